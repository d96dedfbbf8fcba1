"""``POST /slack/events``: Slack's Events API, for questions asked in a session's thread.

Served by the ingest function (the one public function, which already checks
each sender's own credential; the api stays behind Identity-Aware Proxy), and
only when thread questions are on (a signing secret and a bot token:
:func:`tarsy.notify.slack_thread.enabled`); otherwise 404.

Every request is verified first with slack-sdk's ``SignatureVerifier`` over
the raw body (``X-Slack-Signature``, ``X-Slack-Request-Timestamp``, at most
five minutes old): a forged, stale or unsigned request is refused with 401
and nothing is written or posted. Then:

* ``url_verification``: Slack's challenge, answered.
* ``event_callback`` with a ``message`` event in a thread whose parent (or
  whose tarsy message) is a session's Slack notification (the ``slack`` entry
  of the notification ledger records its channel and ts): a question. Bots'
  messages (tarsy's own among them), edits and other subtypes, and messages
  outside a session's thread are acknowledged and ignored. Each event is taken
  once (``slack-event-{event_id}`` in the ledger): Slack redelivers an event
  it thinks unanswered.
* The asker's Slack user becomes an e-mail (``users.info``) and a role through
  the same grants as the api (``TARSY_ACCESS_GRANTS``, groups included); chat
  needs responder.
  A refusal is answered in the thread, naming the role; so is a question the
  chat refuses (the investigation still running, an earlier question still
  being answered). Accepted, it is the session's chat (the api's own
  :func:`tarsy.api.handlers.chat`), recorded in the audit with the asker's
  e-mail, and its answer is posted in the thread once it is ready
  (:mod:`tarsy.notify.slack_thread`).

Anything else is acknowledged with 200: Slack disables an app whose endpoint
keeps failing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tarsy.access.audit import audit_event, audit_keys
from tarsy.access.iap import principal_of
from tarsy.api.handlers import ChatRequest, chat
from tarsy.errors import ConfigError, ForbiddenError, InputError
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.models import ThreadReply
from tarsy.notify import slack, slack_thread
from tarsy.notify.ledger import FirestoreLedger, firestore_ledger

if TYPE_CHECKING:
    from tarsy.app import Deps

logger = logging.getLogger(__name__)

PATH = "/slack/events"
SIGNATURE_HEADER = "x-slack-signature"
TIMESTAMP_HEADER = "x-slack-request-timestamp"
EVENT_PREFIX = "slack-event-"
# A reply also sent to the channel is a person's message like any other; edits,
# deletions, joins and bots' messages carry other subtypes.
QUESTION_SUBTYPES = frozenset({"thread_broadcast"})
# A mention of someone (the bot, usually) opening the question is not part of it.
_LEADING_MENTIONS = re.compile(r"^(\s*<@[A-Z0-9]+>\s*)+")


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MessageEvent(_Tolerant):
    """The fields of a Slack event that decide whether it is a question, and which."""

    type: str
    subtype: str | None = None
    channel: str = ""
    user: str | None = None
    bot_id: str | None = None
    app_id: str | None = None
    text: str = ""
    ts: str = ""
    thread_ts: str | None = None


class UrlVerification(_Tolerant):
    """Slack's check of a new Request URL."""

    type: Literal["url_verification"]
    challenge: str


class EventCallback(_Tolerant):
    """One event delivered to the app."""

    type: Literal["event_callback"]
    event_id: str
    event: MessageEvent


class _Kind(_Tolerant):
    type: str


def _answer(body: dict[str, Any], status: int = 200) -> HttpResponse:
    return HttpResponse(status=status, body=body)


def _refused(message: str, status: int) -> HttpResponse:
    return HttpResponse(status=status, body={"error": {"status": status, "message": message}})


def ignored_because(event: MessageEvent) -> str | None:
    """Why a message event is no question for tarsy (pure); None: it may be one."""
    if event.type != "message":
        return f"event type {event.type!r}"
    if event.subtype is not None and event.subtype not in QUESTION_SUBTYPES:
        return f"message subtype {event.subtype!r}"
    if event.bot_id or event.app_id or not event.user:
        return "a bot's message"
    if not event.thread_ts or event.thread_ts == event.ts:
        return "not a reply in a thread"
    if not question_of(event.text):
        return "no question"
    return None


def question_of(text: str) -> str:
    """The question a message asks: its text without the mentions that open it."""
    return _LEADING_MENTIONS.sub("", text).strip()


async def handle(
    request: HttpRequest, deps: Deps, *, ledger: FirestoreLedger | None = None
) -> HttpResponse:
    """Serve one Events API request (see the module's docstring)."""
    settings = deps.settings
    if not slack_thread.enabled(settings):
        return _refused("Slack thread questions are not configured", 404)
    if request.method != "POST":
        return _refused("use POST", 405)
    try:
        secret = await asyncio.to_thread(slack_thread.signing_secret, settings)
    except ConfigError as e:
        logger.error("Slack signing secret unreadable: %s", e)
        return _refused("the Slack signing secret cannot be read", 503)
    from slack_sdk.signature import SignatureVerifier

    timestamp = request.headers.get(TIMESTAMP_HEADER, "").strip()
    signature = request.headers.get(SIGNATURE_HEADER)
    # The verifier reads the timestamp as an integer and raises on anything else.
    if not (
        timestamp.isdigit()
        and signature
        and SignatureVerifier(secret).is_valid(
            body=request.body, timestamp=timestamp, signature=signature
        )
    ):
        logger.warning("Slack event refused: signature missing, forged or stale")
        return _refused("the request's Slack signature is missing, invalid or stale", 401)
    try:
        payload = json.loads(request.body)
        kind = _Kind.model_validate(payload).type
        if kind == "url_verification":
            return _answer({"challenge": UrlVerification.model_validate(payload).challenge})
        if kind != "event_callback":
            return _answer({"ok": True, "ignored": f"request type {kind!r}"})
        callback = EventCallback.model_validate(payload)
    except (ValueError, ValidationError) as e:
        # Signed by Slack yet not understood: acknowledged, so Slack keeps the endpoint.
        logger.warning("Slack event not understood: %s", e)
        return _answer({"ok": True, "ignored": "not understood"})
    return await _question(callback, deps, ledger or firestore_ledger(settings))


async def _question(callback: EventCallback, deps: Deps, ledger: FirestoreLedger) -> HttpResponse:
    """Take one message event: find its session, check the asker, start the chat."""
    event, settings = callback.event, deps.settings
    reason = ignored_because(event)
    if reason is not None:
        return _answer({"ok": True, "ignored": reason})
    assert event.thread_ts is not None and event.user is not None
    session_id = await ledger.thread_session(slack.NOTIFIER, event.channel, event.thread_ts)
    if session_id is None:
        return _answer({"ok": True, "ignored": "not a session's thread"})
    if await ledger.claim(session_id, EVENT_PREFIX + callback.event_id) is None:
        return _answer({"ok": True, "ignored": "already taken", "session_id": session_id})

    async def say(text: str) -> None:
        try:
            await asyncio.to_thread(
                slack_thread.reply, event.channel, event.thread_ts or "", text, settings
            )
        except Exception as exc:
            logger.warning("cannot answer in the Slack thread: %s", slack.describe(exc))

    try:
        email = await asyncio.to_thread(slack_thread.user_email, event.user, settings)
    except Exception as exc:
        # The event is taken: Slack's redelivery would be ignored, so say so in the thread.
        logger.warning("Slack users.info failed: %s", slack.describe(exc))
        email = None
    if email is None:
        await say(f"<@{event.user}> I cannot tell who you are: Slack shows me no e-mail for you.")
        return _answer({"ok": True, "refused": "no e-mail", "session_id": session_id})
    principal = await principal_of(email, settings)
    try:
        principal.require("chat")
        reply_to = ThreadReply(
            channel=event.channel,
            thread_ts=event.thread_ts,
            event_id=callback.event_id,
            asked_by=email,
        )
        started = await chat(
            deps, session_id, ChatRequest(question=question_of(event.text)), reply_to=reply_to
        )
    except ForbiddenError as e:
        await say(f"<@{event.user}> {e}")
        logger.info("Slack question refused: %s needs %s", email, e.required_role)
        return _answer({"ok": True, "refused": e.required_role, "session_id": session_id})
    except InputError as e:
        await say(f"<@{event.user}> {e}")
        return _answer({"ok": True, "refused": str(e), "session_id": session_id})
    audit = audit_event(principal, "chat", detail="asked in Slack")
    await deps.store.record_action(session_id, audit, audit_keys(audit))
    logger.info("Slack question from %s on %s", email, session_id)
    return _answer({"ok": True, **started})

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
  of the notification ledger records its channel and ts): a question if it
  mentions the bot (``slack.thread_questions: mentions``, the default: people
  talk among themselves in the thread too, and every question is a paid chat)
  or, with ``all``, any person's reply. Bots' messages (tarsy's own among them),
  edits and other subtypes, and messages outside a session's thread are
  acknowledged and ignored.
* Each event is taken once, and not lost: ``slack-event-{event_id}`` in the
  ledger is claimed with a lease (:data:`EVENT_LEASE`) and settled once the
  question is answered or refused. Slack redelivers an event it thinks
  unanswered (after about 1 and 5 minutes): while the claim is held the retry is
  ignored; a claim whose holder died runs out, and the retry takes it over,
  finds the chat that carries the event id (the holder died after starting it)
  or starts it, and answers once (the answer's own ledger entry,
  :mod:`tarsy.notify.slack_thread`, posts it once).
* The asker's Slack user becomes an e-mail (``users.info``) and a role through
  the same grants as the api (``TARSY_ACCESS_GRANTS``, groups included); chat
  needs responder.
  A refusal is answered in the thread, naming the role; so is a question the
  chat refuses (the investigation still running, an earlier question still
  being answered), and one from a person whose daily chat budget
  (``slack.daily_chat_budget_usd``, off by default) is spent, with the figure:
  what their Slack questions cost since 00:00 UTC. Accepted, it is the
  session's chat (the session command :func:`tarsy.commands.sessions.chat`), created in
  one commit with its audit record (the asker's e-mail), and its answer is
  posted in the thread once it is ready (:mod:`tarsy.notify.slack_thread`).

Anything else is acknowledged with 200: Slack disables an app whose endpoint
keeps failing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tarsy.access.iap import principal_of
from tarsy.commands.recorded import Recorder
from tarsy.commands.sessions import ChatRequest, chat
from tarsy.errors import ConfigError, ForbiddenError, InputError
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.models import AgentExecution, ThreadReply, utcnow
from tarsy.money import format_usd, nanos_of_dollars
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
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
# Shorter than Slack's first retry (about a minute after an unanswered delivery), far
# longer than a question takes to start (Slack waits 3 s for the answer).
EVENT_LEASE = timedelta(seconds=30)
ThreadQuestions = Literal["mentions", "all"]


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


class Authorization(_Tolerant):
    """Who the app is in the workspace the event comes from."""

    user_id: str = ""
    is_bot: bool = False


class EventCallback(_Tolerant):
    """One event delivered to the app."""

    type: Literal["event_callback"]
    event_id: str
    event: MessageEvent
    authorizations: list[Authorization] = []
    authed_users: list[str] = []

    def bot_users(self) -> frozenset[str]:
        """The app's own user ids: a message that mentions one is addressed to tarsy."""
        bots = {a.user_id for a in self.authorizations if a.is_bot and a.user_id}
        return frozenset(bots or self.authed_users)


class _Kind(_Tolerant):
    type: str


def _answer(body: dict[str, Any], status: int = 200) -> HttpResponse:
    return HttpResponse(status=status, body=body)


def _refused(message: str, status: int) -> HttpResponse:
    return HttpResponse(status=status, body={"error": {"status": status, "message": message}})


def ignored_because(
    event: MessageEvent,
    *,
    questions: ThreadQuestions = "mentions",
    bots: frozenset[str] = frozenset(),
) -> str | None:
    """Why a message event is no question for tarsy (pure); None: it may be one.

    Args:
        event: The message.
        questions: ``mentions``: only a reply that mentions one of ``bots``; ``all``:
            any person's reply.
        bots: The app's user ids in the workspace.
    """
    if event.type != "message":
        return f"event type {event.type!r}"
    if event.subtype is not None and event.subtype not in QUESTION_SUBTYPES:
        return f"message subtype {event.subtype!r}"
    if event.bot_id or event.app_id or not event.user:
        return "a bot's message"
    if not event.thread_ts or event.thread_ts == event.ts:
        return "not a reply in a thread"
    if questions == "mentions" and not mentions(event.text, bots):
        return "does not mention tarsy"
    if not question_of(event.text):
        return "no question"
    return None


def mentions(text: str, users: frozenset[str]) -> bool:
    """Whether ``text`` mentions one of ``users`` (``<@U123>`` or ``<@U123|name>``)."""
    return any(m.group(1) in users for m in _MENTION.finditer(text))


def chat_for_event(executions: list[AgentExecution], event_id: str) -> AgentExecution | None:
    """The chat started for Slack event ``event_id``, if an earlier taker got that far."""
    return next(
        (
            e
            for e in executions
            if e.role == "chat" and e.reply_to is not None and e.reply_to.event_id == event_id
        ),
        None,
    )


def start_of_day(now: datetime) -> datetime:
    """00:00 UTC of ``now``'s day: when a daily budget starts again."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def budget_refusal(spent: int, budget_usd: float | None) -> str | None:
    """The refusal of a person whose daily chat budget is spent (pure); None: within it.

    Args:
        spent: Nano-dollars their Slack questions cost today.
        budget_usd: The budget in dollars; None: no budget.
    """
    if budget_usd is None or spent < nanos_of_dollars(budget_usd):
        return None
    return (
        f"your chat budget for today is spent: your questions have cost {format_usd(spent)} "
        f"of {format_usd(nanos_of_dollars(budget_usd), places=2)} since 00:00 UTC. "
        "Ask again tomorrow, or ask in the tarsy page."
    )


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
    """Take one message event: find its session, claim the event, then answer it once."""
    event, policy = callback.event, deps.config.slack
    reason = ignored_because(event, questions=policy.thread_questions, bots=callback.bot_users())
    if reason is not None:
        return _answer({"ok": True, "ignored": reason})
    assert event.thread_ts is not None
    session_id = await ledger.thread_session(slack.NOTIFIER, event.channel, event.thread_ts)
    if session_id is None:
        return _answer({"ok": True, "ignored": "not a session's thread"})
    key = EVENT_PREFIX + callback.event_id
    claim = await ledger.claim_event(session_id, key, lease=EVENT_LEASE)
    if claim is None:
        return _answer({"ok": True, "ignored": "already taken", "session_id": session_id})
    if claim.takeover:
        # The holder died: it may have started the chat already. The sweeper runs a
        # chat that was created but never published, and its answer is posted once.
        started = chat_for_event(await deps.store.list_executions(session_id), callback.event_id)
        if started is not None:
            await ledger.settle_event(session_id, key, "answered")
            logger.info("Slack event %s: its chat was started before", callback.event_id)
            return _answer(
                {"ok": True, "session_id": session_id, "execution_id": started.execution_id}
            )
    response = await _ask(callback, session_id, deps, ledger)
    await ledger.settle_event(session_id, key, str(response.body.get("refused") or "answered"))
    return response


async def _ask(
    callback: EventCallback, session_id: str, deps: Deps, ledger: FirestoreLedger
) -> HttpResponse:
    """Check the asker (e-mail, role, budget) and start the chat, or refuse in the thread."""
    event, settings = callback.event, deps.settings
    assert event.thread_ts is not None and event.user is not None

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
        budget = deps.config.slack.daily_chat_budget_usd
        if budget is not None:
            spent = await ledger.chat_spend(email, start_of_day(utcnow()))
            if (refusal := budget_refusal(spent, budget)) is not None:
                await say(f"<@{event.user}> {refusal}")
                logger.info("Slack question refused: %s spent today's chat budget", email)
                return _answer({"ok": True, "refused": "budget", "session_id": session_id})
        reply_to = ThreadReply(
            channel=event.channel,
            thread_ts=event.thread_ts,
            event_id=callback.event_id,
            asked_by=email,
        )
        # The chat's execution is created with its audit record, in one commit.
        recorder = Recorder(principal, "chat", session_id, detail="asked in Slack")
        started = await chat(
            deps,
            session_id,
            ChatRequest(question=question_of(event.text)),
            reply_to=reply_to,
            recorder=recorder,
        )
    except ForbiddenError as e:
        await say(f"<@{event.user}> {e}")
        logger.info("Slack question refused: %s needs %s", email, e.required_role)
        return _answer({"ok": True, "refused": e.required_role, "session_id": session_id})
    except InputError as e:
        await say(f"<@{event.user}> {e}")
        return _answer({"ok": True, "refused": str(e), "session_id": session_id})
    logger.info("Slack question from %s on %s", email, session_id)
    return _answer({"ok": True, **started})

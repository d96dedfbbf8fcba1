"""A Slack message when a session ends, threaded under the alert's own message when it has one.

On completion, failure, timeout and cancellation: status, alert type, chain,
the executive summary (or the final analysis, or the error), the score when
the session has one, tokens and cost, and links to the session (the api's
status URL, the Firestore console). As TARSy does, an alert that carries
``slack_message_fingerprint`` (in its metadata, or as a top-level key of its
data) is answered in the thread of the channel message that contains that
text: the last 24 hours of the channel's history, 50 messages at most, matched
without regard to case or runs of whitespace. No match: a new message.

Effectively once. The notification is claimed in the ledger with a lease
before it is posted (:mod:`tarsy.notify.ledger`). A process that dies after
the claim leaves it to run out; the next caller (a redelivered step, or the
sweeper) takes it over and, before posting, looks for the message the dead
attempt may have sent: every message carries the session in its metadata
(``event_type`` :data:`METADATA_EVENT`) and in its text (``(session ID)``),
and is searched for in the thread it would be in and in the channel's recent
history. Found: recorded as sent, not posted again. A failed post is retried
the same way, :data:`MAX_ATTEMPTS` attempts in all. A check that cannot read
Slack posts nothing (a retry follows): a duplicate is avoided before a loss.

Configured by the settings (a bot token, directly or as a Secret Manager
secret, and a channel) and per chain (``slack_channel``); off otherwise. The
client is slack-sdk's ``WebClient`` run in a worker thread: its async client
needs aiohttp, whose presence alone switches google-genai's async transport
away from httpx. A failure to notify is a ``failed`` result, never an exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import Field

from tarsy import secrets
from tarsy._pydantic import DeferredModel
from tarsy.config.schema import TarsyConfig
from tarsy.models import ExecutionStatus, Session
from tarsy.money import format_usd
from tarsy.notify import configured
from tarsy.notify.ledger import NotificationLedger
from tarsy.notify.result import NotificationResult
from tarsy.settings import Settings
from tarsy.web.links import session_url

if TYPE_CHECKING:
    from slack_sdk import WebClient

logger = logging.getLogger(__name__)

NOTIFIER = "slack"
FINGERPRINT_KEY = "slack_message_fingerprint"
HISTORY_WINDOW_SECONDS = 24 * 3600
HISTORY_LIMIT = 50
# Slack takes 3,000 characters in a section's text; the rest is a link away.
MAX_SECTION_CHARS = 2900
TIMEOUT_SECONDS = 10
# A claim outlives one attempt (three Slack calls of TIMEOUT_SECONDS at most) by far.
CLAIM_LEASE = timedelta(seconds=120)
RETRY_AFTER = timedelta(seconds=60)
MAX_ATTEMPTS = 3
METADATA_EVENT = "tarsy_session_end"
# Replies of a thread searched for an earlier attempt's message.
REPLIES_LIMIT = 200

_STATUS_LINES: dict[ExecutionStatus, tuple[str, str]] = {
    ExecutionStatus.COMPLETED: (":white_check_mark:", "Investigation completed"),
    ExecutionStatus.FAILED: (":x:", "Investigation failed"),
    ExecutionStatus.TIMED_OUT: (":hourglass:", "Investigation timed out"),
    ExecutionStatus.CANCELLED: (":no_entry_sign:", "Investigation cancelled"),
}
_WHITESPACE = re.compile(r"\s+")


# ─── what to send, where ──────────────────────────────────────────────────────


class SlackTarget(DeferredModel):
    """Where one session's notification goes."""

    channel: str
    fingerprint: str | None = None


class SlackMessage(DeferredModel):
    """A message as chat.postMessage takes it: fallback text, Block Kit blocks, metadata."""

    text: str
    blocks: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None


def bot_token(settings: Settings) -> str:
    """The bot token: ``SLACK_BOT_TOKEN``, else the ``TARSY_SLACK_TOKEN_SECRET`` secret.

    Raises:
        ConfigError: The secret cannot be read.
        ValueError: Neither is configured.
    """
    return secrets.credential(
        settings.slack_bot_token, settings.slack_token_secret, settings, "Slack bot token"
    )


def fingerprint_of(session: Session) -> str | None:
    """The alert's ``slack_message_fingerprint``: its metadata's, else its data's top level."""
    value = session.metadata.get(FINGERPRINT_KEY)
    if not value and session.alert_data.lstrip().startswith("{"):
        try:
            data = json.loads(session.alert_data)
        except ValueError:
            data = None
        if isinstance(data, dict):
            value = data.get(FINGERPRINT_KEY)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def target_for(session: Session, settings: Settings, config: TarsyConfig) -> SlackTarget | None:
    """Where the session is announced: its chain's channel, else the default; None: nowhere."""
    if not configured.slack(settings):
        return None
    chain = config.agent_chains.get(session.chain_id)
    channel = (chain.slack_channel if chain is not None else None) or settings.slack_channel
    if not channel:
        return None
    return SlackTarget(channel=channel, fingerprint=fingerprint_of(session))


def score_of(session: object) -> float | None:
    """The session's score when it has one: a number, or a mapping/object with ``total_score``.

    Read tolerantly: sessions are not scored yet everywhere.
    """
    score: object = getattr(session, "score", None)
    if score is None and isinstance(session, Mapping):
        score = session.get("score")
    if isinstance(score, Mapping):
        score = score.get("total_score", score.get("score"))
    elif score is not None and not isinstance(score, int | float):
        score = getattr(score, "total_score", None)
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    return float(score)


def status_url(settings: Settings, session_id: str) -> str | None:
    """The api's view of the session, when the api's public URL is known."""
    if not settings.public_api_url:
        return None
    return f"{settings.public_api_url.rstrip('/')}/sessions/{session_id}"


def page_url(settings: Settings, session_id: str) -> str | None:
    """The session's page in a browser (served by the api), when its public URL is known."""
    if not settings.public_api_url:
        return None
    return session_url(settings.public_api_url, session_id)


def console_url(settings: Settings, session_id: str) -> str:
    """The session document in the Google Cloud console's Firestore viewer."""
    database = settings.firestore_database.replace("(default)", "-default-")
    return (
        f"https://console.cloud.google.com/firestore/databases/{database}"
        f"/data/panel/sessions/{session_id}?project={settings.project_id}"
    )


def _escape(text: str) -> str:
    """Slack mrkdwn control characters, escaped as Slack asks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truncate(text: str, limit: int = MAX_SECTION_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + "\n_… (truncated: the full text is in the session)_"


def build_message(
    session: Session,
    *,
    status_url: str | None,
    console_url: str | None,
    page_url: str | None = None,
) -> SlackMessage:
    """The message announcing that ``session`` ended (pure)."""
    emoji, headline = _STATUS_LINES.get(session.status, (":grey_question:", "Investigation ended"))
    alert = _escape(session.alert_type)
    tokens = session.tokens
    total = tokens.total_tokens or (
        tokens.input_tokens + tokens.output_tokens + tokens.thinking_tokens
    )
    fields = [
        f"*Status*\n{session.status.value}",
        f"*Alert type*\n{alert}",
        f"*Chain*\n{_escape(session.chain_id)}",
        f"*Tokens*\n{total:,} (in {tokens.input_tokens:,} / out "
        f"{tokens.output_tokens + tokens.thinking_tokens:,})",
        f"*Cost*\n{format_usd(session.cost)}",
    ]
    score = score_of(session)
    if score is not None:
        fields.append(f"*Score*\n{score:g}")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{emoji} *{headline}*: {alert}"}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    if session.status is ExecutionStatus.COMPLETED:
        summary = session.executive_summary or session.final_analysis
        if summary:
            body = f"*Summary*\n{_escape(summary)}"
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _truncate(body)}})
    elif session.error is not None:
        body = f"*Error*\n{_escape(session.error.message)}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _truncate(body)}})
    links = [f"session `{session.session_id}`"]
    if page_url:
        links.append(f"<{page_url}|open the investigation>")
    if status_url:
        links.append(f"<{status_url}|status>")
    if console_url:
        links.append(f"<{console_url}|Firestore console>")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(links)}]})
    text = f"{emoji} {headline}: {session.alert_type} {session_marker(session.session_id)}"
    metadata = {"event_type": METADATA_EVENT, "event_payload": {"session_id": session.session_id}}
    return SlackMessage(text=text, blocks=blocks, metadata=metadata)


def session_marker(session_id: str) -> str:
    """The text every message about ``session_id`` carries, found again by :func:`find_posted`."""
    return f"(session {session_id})"


def find_posted(messages: Sequence[Mapping[str, Any]], session_id: str) -> str | None:
    """The ts of a message announcing ``session_id``: by its metadata, else its text (pure)."""
    marker = session_marker(session_id)
    for message in messages:
        metadata = message.get("metadata")
        by_metadata = False
        if isinstance(metadata, Mapping):
            payload = metadata.get("event_payload")
            by_metadata = (
                metadata.get("event_type") == METADATA_EVENT
                and isinstance(payload, Mapping)
                and payload.get("session_id") == session_id
            )
        text = message.get("text")
        if by_metadata or (isinstance(text, str) and marker in text):
            ts = message.get("ts")
            return str(ts) if ts else None
    return None


# ─── the thread ───────────────────────────────────────────────────────────────


def _normalize(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().lower()


def _texts(value: object) -> list[str]:
    """Every ``text``/``fallback``/``pretext``/``title`` string in a message, blocks included."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("text", "fallback", "pretext", "title") and isinstance(item, str):
                found.append(item)
            else:
                found.extend(_texts(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_texts(item))
    return found


def find_thread(messages: Sequence[Mapping[str, Any]], fingerprint: str) -> str | None:
    """The ts of the newest message whose text contains ``fingerprint`` (pure).

    Case and runs of whitespace do not matter; attachments' text, fallback,
    pretext and title and the blocks' text are searched too. A reply found
    this way points at its thread's parent.
    """
    wanted = _normalize(fingerprint)
    if not wanted:
        return None
    for message in messages:  # conversations.history lists the newest first
        if any(wanted in _normalize(text) for text in _texts(message)):
            ts = message.get("thread_ts") or message.get("ts")
            return str(ts) if ts else None
    return None


# ─── delivery ─────────────────────────────────────────────────────────────────


def web_client(token: str, settings: Settings) -> WebClient:
    """slack-sdk's WebClient for ``token``, at ``TARSY_SLACK_BASE_URL`` when set.

    Imported here: only a function that notifies loads slack-sdk.
    """
    from slack_sdk import WebClient

    base_url = settings.slack_base_url or WebClient.BASE_URL
    return WebClient(token=token, base_url=base_url, timeout=TIMEOUT_SECONDS)


def already_posted(
    client: WebClient, channel: str, thread_ts: str | None, session_id: str, oldest: float
) -> str | None:
    """The ts of a message an earlier attempt posted for ``session_id``, if Slack has one.

    Looks in the thread (when there is one) and in the channel's recent history
    (where an unthreaded attempt went). Raises when Slack cannot be read.
    """
    if thread_ts is not None:
        replies = client.conversations_replies(
            channel=channel, ts=thread_ts, include_all_metadata=True, limit=REPLIES_LIMIT
        )
        found = find_posted(replies.get("messages") or [], session_id)
        if found is not None:
            return found
    history = client.conversations_history(
        channel=channel, oldest=f"{oldest:.6f}", limit=HISTORY_LIMIT, include_all_metadata=True
    )
    return find_posted(history.get("messages") or [], session_id)


def deliver(
    target: SlackTarget,
    message: SlackMessage,
    settings: Settings,
    now: float | None = None,
    *,
    check_posted: str | None = None,
) -> NotificationResult:
    """Find the thread, post the message (blocking: run it in a thread). Raises on failure.

    Args:
        target: The channel, and the alert's fingerprint to thread under.
        message: What to post.
        settings: The token and the API's base URL.
        now: The clock (epoch seconds), for the history window.
        check_posted: A session id: first look for a message an earlier attempt
            posted for it, and post nothing if there is one.
    """
    client = web_client(bot_token(settings), settings)
    thread_ts: str | None = None
    oldest = (now if now is not None else time.time()) - HISTORY_WINDOW_SECONDS
    if target.fingerprint:
        try:
            history = client.conversations_history(
                channel=target.channel, oldest=f"{oldest:.6f}", limit=HISTORY_LIMIT
            )
            thread_ts = find_thread(history.get("messages") or [], target.fingerprint)
        except Exception as exc:  # the message still goes out, unthreaded
            logger.warning("Slack history of %s unreadable: %s", target.channel, describe(exc))
        if thread_ts is None:
            logger.info("no Slack message in %s carries the alert's fingerprint", target.channel)
    if check_posted is not None:
        found = already_posted(client, target.channel, thread_ts, check_posted, oldest)
        if found is not None:
            return NotificationResult(
                status="sent",
                channel=target.channel,
                ts=found,
                thread_ts=thread_ts,
                detail="posted by an earlier attempt",
            )
    posted = client.chat_postMessage(
        channel=target.channel,
        text=message.text,
        blocks=message.blocks,
        thread_ts=thread_ts,
        metadata=message.metadata,
        unfurl_links=False,
        unfurl_media=False,
    )
    return NotificationResult(
        status="sent",
        channel=str(posted.get("channel") or target.channel),
        ts=str(posted.get("ts")) if posted.get("ts") else None,
        thread_ts=thread_ts,
    )


def describe(exc: BaseException) -> str:
    """A one-line reason: Slack's error code when it gave one."""
    response = getattr(exc, "response", None)
    if response is not None:
        status = getattr(response, "status_code", None)
        data = getattr(response, "data", None)
        error = data.get("error") if isinstance(data, Mapping) else None
        return f"Slack API answered {status}: {error or 'no error code'}"
    return f"{type(exc).__name__}: {exc}"


async def notify_session_end(
    session: Session,
    settings: Settings,
    config: TarsyConfig,
    ledger: NotificationLedger,
) -> NotificationResult:
    """Announce in Slack that ``session`` ended, once however often this is called.

    Skipped when Slack is not configured for the session's chain or the
    session has not ended; ``duplicate`` when another call holds the claim (or
    it is done). The claim comes first, with a lease; a takeover of a claim
    whose holder died, or a retry of a failed attempt, first looks for the
    message in Slack. The result is recorded in the ledger (with a retry time
    after a failure, while attempts are left) and returned. Nothing raises out
    of here but a process's own death.

    Args:
        session: The session as stored, in its terminal status.
        settings: Process settings (token, default channel, links).
        config: The configuration (per-chain ``slack_channel``).
        ledger: Where the notification is claimed and its result kept.

    Returns:
        What the attempt came to.
    """
    target = target_for(session, settings, config)
    if target is None:
        return NotificationResult(status="skipped", detail="Slack is not configured")
    if not session.status.is_terminal:
        return NotificationResult(status="skipped", detail=f"session is {session.status.value}")
    try:
        claim = await ledger.claim(session.session_id, NOTIFIER, lease=CLAIM_LEASE)
    except Exception as exc:
        logger.warning("cannot claim the Slack notification of %s", session.session_id)
        return NotificationResult(
            status="failed", channel=target.channel, detail=f"claim: {describe(exc)}"
        )
    if claim is None:
        return NotificationResult(status="duplicate", channel=target.channel)
    message = build_message(
        session,
        status_url=status_url(settings, session.session_id),
        console_url=console_url(settings, session.session_id),
        page_url=page_url(settings, session.session_id),
    )
    check = session.session_id if claim.takeover else None
    try:
        result = await asyncio.to_thread(deliver, target, message, settings, check_posted=check)
    except Exception as exc:
        result = NotificationResult(status="failed", channel=target.channel, detail=describe(exc))
    result = result.model_copy(update={"attempt": claim.attempt})
    retry = RETRY_AFTER if result.status == "failed" and claim.attempt < MAX_ATTEMPTS else None
    try:
        await ledger.record(session.session_id, NOTIFIER, result, retry_after=retry)
    except Exception:
        # The claim's lease runs out and a later caller checks Slack before posting again.
        logger.warning("cannot record the Slack notification of %s", session.session_id)
    return result

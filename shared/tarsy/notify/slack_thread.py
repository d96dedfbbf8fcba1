"""Questions asked in a session's Slack thread: where they came from, and their answers, once.

The Events API endpoint (:mod:`tarsy.intake.slack_events`, on the ingest
function) starts a question as the session's chat with
:class:`~tarsy.models.ThreadReply` on the chat execution: the thread, the
event and the asker. Once that chat execution has ended, its answer (or why
there is none) is posted in the thread, effectively once, by the same leased
ledger as the session-end notification (:mod:`tarsy.notify.ledger`,
``sessions/{sid}/notifications/slack-answer-{execution_id}``): the claim comes
first; a caller taking over a claim whose holder died, or whose attempt
failed, first reads the thread's replies and looks for the answer by its
metadata (``event_type`` :data:`METADATA_EVENT`) or its marker text. This
module also holds what the endpoint needs from Slack: who the asker is
(``users.info``) and a reply in the thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tarsy import secrets
from tarsy.models import AgentExecution, ExecutionStatus, Session
from tarsy.notify import configured, slack
from tarsy.notify.ledger import NotificationLedger
from tarsy.notify.result import NotificationResult
from tarsy.persistence.ports import SessionReader
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

ANSWER_PREFIX = "slack-answer-"
METADATA_EVENT = "tarsy_chat_answer"
# Slack takes 40,000 characters in a message's text; a long answer is a link away.
MAX_ANSWER_CHARS = 3800


def enabled(settings: Settings) -> bool:
    """Whether thread questions are on: a signing secret and a bot token (no secret is read)."""
    signing = settings.slack_signing_secret is not None or bool(settings.slack_signing_secret_name)
    return signing and configured.slack(settings)


def signing_secret(settings: Settings) -> str:
    """The Slack app's signing secret: ``SLACK_SIGNING_SECRET``, else its Secret Manager secret.

    Raises:
        ConfigError: The secret cannot be read.
        ValueError: Neither is configured.
    """
    return secrets.credential(
        settings.slack_signing_secret, settings.slack_signing_secret_name, settings,
        "Slack signing secret",
    )  # fmt: skip


def user_email(user: str, settings: Settings) -> str | None:
    """The e-mail of Slack user ``user`` (``users.info``; blocking). None: Slack shows none.

    Needs the ``users:read.email`` scope. Raises when Slack cannot be read.
    """
    client = slack.web_client(slack.bot_token(settings), settings)
    answer = client.users_info(user=user)
    profile = (answer.get("user") or {}).get("profile") or {}
    email = profile.get("email")
    return email.strip().lower() if isinstance(email, str) and email.strip() else None


def reply(channel: str, thread_ts: str, text: str, settings: Settings) -> None:
    """Post ``text`` in a thread (blocking). Raises on failure."""
    client = slack.web_client(slack.bot_token(settings), settings)
    client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, text=text, unfurl_links=False, unfurl_media=False
    )


def answer_marker(execution_id: str) -> str:
    """The text every answer to chat ``execution_id`` carries (see :func:`find_answer`)."""
    return f"(tarsy chat {execution_id})"


def build_answer(execution: AgentExecution, page_url: str | None) -> tuple[str, dict[str, Any]]:
    """The answer's text and metadata (pure)."""
    assert execution.reply_to is not None
    if execution.status is ExecutionStatus.COMPLETED and execution.final_analysis:
        body = execution.final_analysis
    else:
        why = execution.error.message if execution.error is not None else ""
        body = f"No answer: the question {execution.status.value}" + (f" ({why})" if why else "")
    if len(body) > MAX_ANSWER_CHARS:
        body = body[:MAX_ANSWER_CHARS].rstrip() + "\n… (truncated: the full answer is on the page)"
    footer = answer_marker(execution.execution_id)
    if page_url:
        footer = f"<{page_url}|the investigation> {footer}"
    text = f"{body}\n\n_{footer}_"
    metadata = {
        "event_type": METADATA_EVENT,
        "event_payload": {"session_id": execution.session_id, "chat": execution.execution_id},
    }
    return text, metadata


def find_answer(messages: Sequence[Mapping[str, Any]], execution_id: str) -> str | None:
    """The ts of a message answering chat ``execution_id``: by metadata, else marker (pure)."""
    marker = answer_marker(execution_id)
    for message in messages:
        metadata = message.get("metadata")
        payload = metadata.get("event_payload") if isinstance(metadata, Mapping) else None
        by_metadata = (
            isinstance(metadata, Mapping)
            and metadata.get("event_type") == METADATA_EVENT
            and isinstance(payload, Mapping)
            and payload.get("chat") == execution_id
        )
        text = message.get("text")
        if by_metadata or (isinstance(text, str) and marker in text):
            ts = message.get("ts")
            return str(ts) if ts else None
    return None


def deliver(
    execution: AgentExecution, settings: Settings, *, check_posted: bool
) -> NotificationResult:
    """Post the answer in its thread (blocking), first looking for it when ``check_posted``."""
    where = execution.reply_to
    assert where is not None
    client = slack.web_client(slack.bot_token(settings), settings)
    if check_posted:
        replies = client.conversations_replies(
            channel=where.channel,
            ts=where.thread_ts,
            include_all_metadata=True,
            limit=slack.REPLIES_LIMIT,
        )
        found = find_answer(replies.get("messages") or [], execution.execution_id)
        if found is not None:
            return NotificationResult(
                notifier=ANSWER_PREFIX + execution.execution_id,
                status="sent",
                channel=where.channel,
                ts=found,
                thread_ts=where.thread_ts,
                detail="posted by an earlier attempt",
            )
    text, metadata = build_answer(execution, slack.page_url(settings, execution.session_id))
    posted = client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        text=text,
        metadata=metadata,
        unfurl_links=False,
        unfurl_media=False,
    )
    return NotificationResult(
        notifier=ANSWER_PREFIX + execution.execution_id,
        status="sent",
        channel=where.channel,
        ts=str(posted.get("ts")) if posted.get("ts") else None,
        thread_ts=where.thread_ts,
    )


async def answer(
    execution: AgentExecution, settings: Settings, ledger: NotificationLedger
) -> NotificationResult:
    """Post one ended chat's answer in the thread it was asked in, once however often called."""
    notifier = ANSWER_PREFIX + execution.execution_id
    try:
        claim = await ledger.claim(execution.session_id, notifier, lease=slack.CLAIM_LEASE)
    except Exception as exc:
        return NotificationResult(notifier=notifier, status="failed", detail=f"claim: {exc}")
    if claim is None:
        return NotificationResult(notifier=notifier, status="duplicate")
    try:
        result = await asyncio.to_thread(deliver, execution, settings, check_posted=claim.takeover)
    except Exception as exc:
        result = NotificationResult(notifier=notifier, status="failed", detail=slack.describe(exc))
    result = result.model_copy(update={"attempt": claim.attempt})
    failed = result.status == "failed" and claim.attempt < slack.MAX_ATTEMPTS
    try:
        await ledger.record(
            execution.session_id,
            notifier,
            result,
            retry_after=slack.RETRY_AFTER if failed else None,
        )
    except Exception:
        logger.warning("cannot record the Slack answer of %s", execution.execution_id)
    return result


async def answer_questions(
    session: Session, settings: Settings, store: SessionReader, ledger: NotificationLedger
) -> list[NotificationResult]:
    """Answer in their threads every ended chat of ``session`` asked in Slack (once each).

    Never raises: a failure is a ``failed`` result, retried by the sweeper.
    """
    try:
        executions = await store.list_executions(session.session_id)
    except Exception:
        logger.warning("cannot list the chats of %s to answer", session.session_id)
        return []
    asked = [
        e
        for e in executions
        if e.role == "chat" and e.reply_to is not None and e.status.is_terminal
    ]
    return [await answer(execution, settings, ledger) for execution in asked]

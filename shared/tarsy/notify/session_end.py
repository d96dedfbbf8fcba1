"""What happens once when a session ends: the sessions-ended metric, Slack, the PagerDuty note.

And once a question asked in the session's Slack thread has been answered (a
chat, on an ended session), the answer in that thread (:mod:`tarsy.notify.slack_thread`).

:func:`on_session_end` is the one call to make after anything that may have
ended a session (a step's commit, a fan-in, a cancel, a timeout, a dead
letter). It is cheap to call too often: with nothing configured it returns at
once; otherwise it reads the session, does nothing unless it is terminal, and
each action is claimed in the ledger (:mod:`tarsy.notify.ledger`), so a
redelivered step, a duplicate fan-in or a second sweep changes nothing. It
never raises: a notification that fails is recorded (and retried by the
sweeper through :func:`retry_stale`), and the session is as it was.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import Field

from tarsy import telemetry
from tarsy._pydantic import DeferredModel
from tarsy.log import fields
from tarsy.models import ExecutionStatus
from tarsy.money import usd_float
from tarsy.notify import configured
from tarsy.notify.ledger import NotificationLedger, firestore_ledger
from tarsy.notify.result import NotificationResult

if TYPE_CHECKING:
    from tarsy.app import Deps

logger = logging.getLogger(__name__)

METRICS_NOTIFIER = "metrics"  # the ledger entry that makes tarsy.sessions.ended count once


class SessionEndReport(DeferredModel):
    """What :func:`on_session_end` did for one session."""

    session_id: str
    status: ExecutionStatus | None = None
    counted: bool = False
    slack: NotificationResult | None = None
    pagerduty: NotificationResult | None = None
    answers: list[NotificationResult] = Field(default_factory=list)


async def on_session_end(
    session_id: str, deps: Deps, *, ledger: NotificationLedger | None = None
) -> SessionEndReport:
    """Count and announce the end of ``session_id``, once, if it has ended.

    Args:
        session_id: The session that may just have ended.
        deps: The process dependencies (settings, config, store).
        ledger: Where the once-only claims are made; default: Firestore,
            ``sessions/{sid}/notifications/{notifier}``.

    Returns:
        What was done (logged as well); nothing raises.
    """
    report = SessionEndReport(session_id=session_id)
    count = telemetry.exporting() or telemetry.metric_logs()
    announce = configured.slack(deps.settings)
    note = configured.pagerduty_notes(deps.settings, deps.config)
    if not (count or announce or note):
        return report
    try:
        session = await deps.store.get_session(session_id)
    except Exception:
        logger.warning("cannot read session %s to notify its end", session_id, exc_info=True)
        return report
    if session is None or not session.status.is_terminal:
        return report
    report.status = session.status
    log = fields(session_id=session_id)
    try:
        ledger = ledger or firestore_ledger(deps.settings)
    except Exception:
        logger.warning("no notification ledger; not notifying", exc_info=True, extra=log)
        return report
    if count:
        try:
            if await ledger.claim(session_id, METRICS_NOTIFIER):
                telemetry.record_session_end(
                    session.status.value,
                    chain_id=session.chain_id,
                    total_tokens=session.tokens.total_tokens,
                    cost_usd=usd_float(session.cost),
                )
                report.counted = True
        except Exception:
            logger.warning("session end not counted", exc_info=True, extra=log)
    if announce:
        # Imported here: only a configured notifier loads its module (and its client).
        from tarsy.notify import slack, slack_thread

        report.slack = _logged(
            await slack.notify_session_end(session, deps.settings, deps.config, ledger), log
        )
        answers = await slack_thread.answer_questions(session, deps.settings, deps.store, ledger)
        report.answers = [_logged(answered, log) for answered in answers]
    if note:
        from tarsy.notify import pagerduty

        report.pagerduty = _logged(
            await pagerduty.notify_session_end(session, deps.settings, deps.config, ledger), log
        )
    return report


def _logged(result: NotificationResult, log: dict[str, Any]) -> NotificationResult:
    """Log what one notifier's attempt came to (a failure as a warning) and return it."""
    where = result.channel or result.incident_id or ""
    if result.status == "failed":
        logger.warning("%s notification failed: %s", result.notifier, result.detail, extra=log)
    elif result.status == "sent":
        logger.info("%s notification sent (%s)", result.notifier, where, extra=log)
    return result


# Stale claims picked up per sweep; the rest wait for the next one.
STALE_PER_SWEEP = 20


async def retry_stale(
    deps: Deps, *, ledger: NotificationLedger | None = None, limit: int = STALE_PER_SWEEP
) -> list[str]:
    """Notify again the sessions whose claim's holder died, or whose attempt failed (sweeper).

    Does nothing unless Slack or PagerDuty notes are configured. Never raises.

    Returns:
        The sessions notified again (each one's outcome is in its ledger entry).
    """
    if not (
        configured.slack(deps.settings) or configured.pagerduty_notes(deps.settings, deps.config)
    ):
        return []
    try:
        ledger = ledger or firestore_ledger(deps.settings)
        stale = await ledger.stale(limit)
    except Exception:
        logger.warning("cannot list the notifications to retry", exc_info=True)
        return []
    for session_id in stale:
        await on_session_end(session_id, deps, ledger=ledger)
    return stale

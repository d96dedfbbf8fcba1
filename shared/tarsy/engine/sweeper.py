"""The sweeper (invariant 3, nothing gets stuck), called by Cloud Scheduler through the api.

Every live execution carries a due time (``due_at``): when its next step must
have been claimed, set at every commit, publish and fan-in, and renewed by a
running step's heartbeat. A session waiting for a stage start carries one too.
Whatever the reason a step did not run (its process died, its message was
lost, the push gave up), its due time passes, and the sweeper:

* re-publishes the current step of an execution past its due time; for a
  finished agent of a parallel stage, its last step again, which re-runs the
  stage's fan-in;
* re-publishes the awaited stage start of a session past its due time;
* times out sessions past their deadline, with their unfinished executions;
* retries session-end notifications whose claim ran out (:mod:`tarsy.notify.ledger`).

It never stamps retention: that is a job of its own (``POST /retention``,
:mod:`tarsy.persistence.retention`), so the loop that recovers steps costs the
same however many sessions have finished, and a slow stamp never delays a
recovery.

Each action is idempotent (the step's claim and the deterministic creates
absorb duplicates), so overlapping sweeps are harmless. A re-publish first
moves the due time on, under a precondition on the document's update time, and
goes out only if that write wins; each further re-publish of the same step
waits twice as long (:func:`tarsy.engine.messages.due_after_republish`): under a
backlog longer than the due time, a message still queued is not copied again
at every sweep.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from pydantic import Field

from tarsy import telemetry
from tarsy._pydantic import DeferredModel
from tarsy.app import Deps
from tarsy.engine.lifecycle import time_out
from tarsy.engine.messages import due_after_republish, iterate_message, start_stage_message
from tarsy.models import AgentExecution, StepMessage, utcnow
from tarsy.notify.session_end import on_session_end, retry_stale

logger = logging.getLogger(__name__)


class SweepReport(DeferredModel):
    """What one sweep did."""

    republished: list[str] = Field(default_factory=list, description="execution ids")
    restarted: list[str] = Field(default_factory=list, description="session ids (stage starts)")
    timed_out: list[str] = Field(default_factory=list, description="session ids")
    notified: list[str] = Field(
        default_factory=list, description="session ids whose end notification was retried"
    )


async def _trace_of(
    session_id: str, known: dict[str, dict[str, str]], deps: Deps
) -> dict[str, str]:
    """The session's trace context (read once per sweep), the sweep's span linked to it."""
    if session_id not in known:
        session = await deps.store.get_session(session_id)
        known[session_id] = session.trace_context if session is not None else {}
        telemetry.link_current_span(known[session_id])
    return known[session_id]


def message_for_due(execution: AgentExecution) -> StepMessage:
    """The message that gets an overdue execution going again (pure)."""
    if execution.status.is_terminal:
        # Its last step committed but the fan-in did not finish: run that step again.
        return iterate_message(execution, max(execution.step - 1, 1))
    return iterate_message(execution, execution.step)


async def sweep(deps: Deps, now: datetime | None = None) -> SweepReport:
    """Time out sessions past their deadline; re-publish whatever is overdue."""
    now = now or utcnow()
    report = SweepReport()
    for session in await deps.store.overdue_sessions(now):
        telemetry.link_current_span(session.trace_context)
        await time_out(session, deps)
        await on_session_end(session.session_id, deps)
        report.timed_out.append(session.session_id)
    traces: dict[str, dict[str, str]] = {}
    interval = timedelta(seconds=deps.settings.step_due_seconds)
    for due in await deps.store.due_executions(now):
        execution = due.execution
        if execution.session_id in report.timed_out:
            continue
        if not await deps.store.postpone_execution(
            execution.execution_id,
            read_time=due.update_time,
            until=due_after_republish(execution, now, interval),
        ):
            continue  # a step claimed it, or another sweep or a heal re-published it
        carrier = await _trace_of(execution.session_id, traces, deps)
        with telemetry.in_session_trace(carrier):
            await deps.bus.publish(message_for_due(execution))
        report.republished.append(execution.execution_id)
    for due_session in await deps.store.due_sessions(now):
        session = due_session.session
        if session.status.is_terminal or session.session_id in report.timed_out:
            continue
        if not await deps.store.postpone_session(
            session.session_id, read_time=due_session.update_time, until=now + interval
        ):
            continue
        telemetry.link_current_span(session.trace_context)
        with telemetry.in_session_trace(session.trace_context):
            message = start_stage_message(session.session_id, session.awaiting_stage or 0)
            await deps.bus.publish(message)
        report.restarted.append(session.session_id)
    report.notified = await retry_stale(deps)
    if report.republished or report.restarted or report.timed_out:
        logger.warning(
            "sweep: re-published %d steps and %d stage starts, timed out %d sessions",
            len(report.republished),
            len(report.restarted),
            len(report.timed_out),
        )
    return report

"""Every status change of a session, stage or execution, as a named pure function.

Each function takes the record as it was read, refuses a change the lifecycle
forbids (:class:`~tarsy.errors.IllegalTransitionError`), and returns a typed
partial update (:mod:`tarsy.persistence.updates`, persistence's vocabulary) that
only :class:`tarsy.persistence.store.Store` turns into Firestore fields. No other
module writes field names, so the type checker sees every status change, and the
table of allowed moves below is the whole lifecycle::

    pending ──▶ active ──▶ completed | failed | timed_out | cancelled
                  │  ▲
                  ▼  │ resume
                 paused ──▶ failed | timed_out | cancelled

Terminal records never move again, with one exception: a sub-agent
conversation (seed 004) completes each time it answers, and its parent may
message it again (:func:`reopen_sub_agent`: ``completed → active``, sub-agents
only). ``active → active`` is allowed: a session moves from stage to stage, an
execution from step to step.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tarsy.engine.roles import rules
from tarsy.errors import IllegalTransitionError
from tarsy.models import (
    AgentExecution,
    ErrorInfo,
    ExecutionStatus,
    GatherSummary,
    RecalledSession,
    Session,
    SubAgentWait,
)

# Re-exported: the engine speaks of the updates its transitions return.
from tarsy.persistence.updates import ExecutionUpdate as ExecutionUpdate
from tarsy.persistence.updates import SessionUpdate as SessionUpdate
from tarsy.persistence.updates import StageUpdate as StageUpdate

S = ExecutionStatus

ALLOWED_MOVES: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    S.PENDING: frozenset({S.ACTIVE, S.FAILED, S.TIMED_OUT, S.CANCELLED}),
    S.ACTIVE: frozenset({S.ACTIVE, S.COMPLETED, S.FAILED, S.PAUSED, S.TIMED_OUT, S.CANCELLED}),
    S.PAUSED: frozenset({S.ACTIVE, S.FAILED, S.TIMED_OUT, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.TIMED_OUT: frozenset(),
    S.CANCELLED: frozenset(),
}


def check_move(what: str, current: ExecutionStatus, target: ExecutionStatus) -> None:
    """Raise IllegalTransitionError unless ``current → target`` is in the table."""
    if target not in ALLOWED_MOVES[current]:
        raise IllegalTransitionError(what, current.value, target.value)


# ─── executions ───────────────────────────────────────────────────────────────


def _execution(execution: AgentExecution, target: ExecutionStatus) -> None:
    check_move(f"execution {execution.execution_id!r}", execution.status, target)


def count_iteration(
    execution: AgentExecution, *, failed_attempt: bool, next_due: datetime | None
) -> ExecutionUpdate:
    """After a step: one more iteration (or failed attempt), and when the next step is due."""
    if failed_attempt:
        return ExecutionUpdate(
            consecutive_failures=execution.consecutive_failures + 1, due_at=next_due
        )
    return ExecutionUpdate(
        iteration=execution.iteration + 1, consecutive_failures=0, due_at=next_due
    )


def complete_execution(
    execution: AgentExecution, analysis: str | None, now: datetime, *, progress: ExecutionUpdate
) -> ExecutionUpdate:
    """The execution produced its final analysis."""
    _execution(execution, S.COMPLETED)
    return progress.model_copy(
        update={"status": S.COMPLETED, "final_analysis": analysis, "completed_at": now}
    )


def await_fan_in(update: ExecutionUpdate, due: datetime) -> ExecutionUpdate:
    """A finished agent of a parallel stage stays due until the stage's fan-in has run."""
    return update.model_copy(update={"due_at": due})


def await_sub_agents(progress: ExecutionUpdate, wait: SubAgentWait) -> ExecutionUpdate:
    """The step messaged sub-agents: the execution waits for them, due at the deadline.

    Its next step runs once every call is answered (the last answer publishes
    it) or, past the deadline, with error observations for the silent ones.
    """
    return progress.model_copy(update={"awaiting": wait, "due_at": wait.deadline})


def stop_awaiting(update: ExecutionUpdate) -> ExecutionUpdate:
    """The answers are in the conversation: nothing is awaited any more."""
    return update.model_copy(update={"awaiting": None})


def answers_in(due: datetime) -> ExecutionUpdate:
    """Every sub-agent answered: the waiting execution's next step is due by ``due``."""
    return ExecutionUpdate(due_at=due)


def reopen_sub_agent(
    execution: AgentExecution, call_id: str, parent_step: int, iterations: int, due: datetime
) -> ExecutionUpdate:
    """A sub-agent that answered is messaged again: it runs on with ``iterations`` more."""
    if not rules(execution.role).answers_a_parent or execution.status is not S.COMPLETED:
        raise IllegalTransitionError(
            f"execution {execution.execution_id!r}", execution.status.value, "reopened"
        )
    return ExecutionUpdate(
        status=S.ACTIVE,
        final_analysis=None,
        error=None,
        completed_at=None,
        max_iterations=execution.iteration + iterations,
        parent_tool_call_id=call_id,
        parent_step=parent_step,
        due_at=due,
    )


def gathered(next_due: datetime) -> ExecutionUpdate:
    """The gather phase committed its evidence: the first model call is due by ``next_due``."""
    return ExecutionUpdate(gather_pending=False, due_at=next_due)


def fan_in_done() -> ExecutionUpdate:
    """The stage moved on: nothing more is due for its finished agents."""
    return ExecutionUpdate(due_at=None)


def fail_execution(
    execution: AgentExecution,
    error: ErrorInfo | None,
    now: datetime,
    *,
    progress: ExecutionUpdate | None = None,
) -> ExecutionUpdate:
    """The execution failed with ``error``; its lease is released."""
    _execution(execution, S.FAILED)
    base = progress or ExecutionUpdate()
    return base.model_copy(
        update={
            "status": S.FAILED,
            "error": error,
            "completed_at": now,
            "release_lease": True,
            "due_at": None,
        }
    )


def pause_execution(
    execution: AgentExecution, error: ErrorInfo | None, *, progress: ExecutionUpdate
) -> ExecutionUpdate:
    """Stop at max_iterations until someone resumes."""
    _execution(execution, S.PAUSED)
    return progress.model_copy(update={"status": S.PAUSED, "error": error, "due_at": None})


def resume_execution(
    execution: AgentExecution, extra_iterations: int, due: datetime
) -> ExecutionUpdate:
    """A paused execution continues with ``extra_iterations`` more iterations."""
    _execution(execution, S.ACTIVE)
    if execution.status is not S.PAUSED:
        raise IllegalTransitionError(
            f"execution {execution.execution_id!r}", execution.status.value, "resumed"
        )
    return ExecutionUpdate(
        status=S.ACTIVE,
        max_iterations=execution.max_iterations + extra_iterations,
        error=None,
        due_at=due,
    )


def request_cancel_of_execution(execution: AgentExecution) -> ExecutionUpdate:
    """Mark a running execution cancelled-to-be.

    The write itself matters: it changes the execution's update time, so a step
    running on it cannot commit (its precondition fails) and cancels instead.
    """
    if execution.status.is_terminal:
        raise IllegalTransitionError(
            f"execution {execution.execution_id!r}", execution.status.value, "cancel requested"
        )
    return ExecutionUpdate(cancel_requested=True)


CANCELLED_BY_REQUEST = ErrorInfo(message="cancelled on request", code="cancelled")


def cancel_one_execution(execution: AgentExecution, now: datetime) -> ExecutionUpdate:
    """End one agent that was cancelled on its own; its stage goes on without it."""
    return cancel_execution(execution, now).model_copy(update={"error": CANCELLED_BY_REQUEST})


def cancel_execution(execution: AgentExecution, now: datetime) -> ExecutionUpdate:
    """End an execution whose session was cancelled, without another model call."""
    _execution(execution, S.CANCELLED)
    return ExecutionUpdate(status=S.CANCELLED, completed_at=now, release_lease=True, due_at=None)


def time_out_execution(
    execution: AgentExecution, error: ErrorInfo, now: datetime
) -> ExecutionUpdate:
    """End an unfinished execution of a session past its deadline."""
    _execution(execution, S.TIMED_OUT)
    return ExecutionUpdate(
        status=S.TIMED_OUT, error=error, completed_at=now, release_lease=True, due_at=None
    )


def dead_letter_execution(
    execution: AgentExecution, error: ErrorInfo, now: datetime
) -> ExecutionUpdate:
    """Fail an execution whose step message Pub/Sub gave up delivering."""
    return fail_execution(execution, error, now)


# ─── sessions ─────────────────────────────────────────────────────────────────


def _session(session: Session, target: ExecutionStatus) -> None:
    check_move(f"session {session.session_id!r}", session.status, target)


def record_executive_summary(session: Session, summary: str | None) -> SessionUpdate:
    """The summary is written; the session's scoring comes next."""
    _session(session, S.ACTIVE)
    return SessionUpdate(executive_summary=summary)


def record_score(
    score: int | None, report: dict[str, Any] | None, error: str | None
) -> SessionUpdate:
    """The judge's verdict on a session (or why it gave none); its status is untouched."""
    return SessionUpdate(score=score, score_report=report, score_error=error)


def start_stage_of_session(session: Session, index: int, now: datetime) -> SessionUpdate:
    """The session runs stage ``index`` (the first one also marks the start)."""
    _session(session, S.ACTIVE)
    update = SessionUpdate(status=S.ACTIVE, current_stage=index, awaiting_stage=None, due_at=None)
    if index == 0:
        return update.model_copy(update={"started_at": now})
    return update


def with_runbook(
    update: SessionUpdate, url: str, text: str | None, error: str | None
) -> SessionUpdate:
    """``update`` that also records the session's fetched runbook (or why it has none)."""
    return update.model_copy(
        update={"runbook_url": url, "runbook_text": text, "runbook_error": error}
    )


def with_memory(
    update: SessionUpdate, keys: list[str], recalled: list[RecalledSession]
) -> SessionUpdate:
    """``update`` that also records the session's memory keys and what it recalled."""
    return update.model_copy(update={"memory_keys": keys, "recalled": recalled})


def await_stage(session: Session, index: int, due: datetime) -> SessionUpdate:
    """Stage ``index`` is to start (its message is being published) by ``due``."""
    _session(session, S.ACTIVE)
    return SessionUpdate(awaiting_stage=index, due_at=due)


def record_final_analysis(session: Session, analysis: str) -> SessionUpdate:
    """The chain's analysis is known; the executive summary is still to come."""
    _session(session, S.ACTIVE)
    return SessionUpdate(final_analysis=analysis)


def cut_short_by_budget(update: SessionUpdate, spent: str | None) -> SessionUpdate:
    """``update``, saying the session ended early when its budget is ``spent`` (else as is)."""
    if spent is None:
        return update
    return update.model_copy(update={"completion_reason": "budget"})


def complete_session(
    session: Session,
    now: datetime,
    *,
    final_analysis: str | None = None,
    executive_summary: str | None = None,
    with_summary: bool = False,
) -> SessionUpdate:
    """The investigation is done; ``with_summary`` writes the summary (None when it failed)."""
    _session(session, S.COMPLETED)
    update = SessionUpdate(status=S.COMPLETED, completed_at=now, due_at=None, retention_due=now)
    if final_analysis is not None:
        update = update.model_copy(update={"final_analysis": final_analysis})
    if with_summary:
        update = update.model_copy(update={"executive_summary": executive_summary})
    return update


def fail_session(
    session: Session, error: ErrorInfo, now: datetime, *, status: ExecutionStatus = S.FAILED
) -> SessionUpdate:
    """The session ends unsuccessfully (a stage failed, timed out or was cancelled)."""
    if status is S.COMPLETED or status is S.PAUSED or not status.is_terminal:
        raise IllegalTransitionError(f"session {session.session_id!r}", "failing", status.value)
    _session(session, status)
    update = SessionUpdate(
        status=status, error=error, completed_at=now, due_at=None, retention_due=now
    )
    if session.findings and status is not S.CANCELLED and session.executive_summary is None:
        return update.model_copy(update={"executive_summary": findings_summary(session, error)})
    return update


def findings_summary(session: Session, error: ErrorInfo) -> str:
    """The executive summary of an investigation the model did not finish: the checks' findings."""
    lines = [
        f"The investigation did not finish ({error.message}). "
        "tarsy's automatic checks of the evidence found:",
        *(f"- {finding}" for finding in session.findings),
    ]
    return "\n".join(lines)


def record_gathering(findings: list[str], summary: GatherSummary) -> SessionUpdate:
    """The gather phase's findings (kept for a summary if the model fails) and its figures."""
    return SessionUpdate(findings=findings, gather=summary)


def keep_until_answered(session: Session, now: datetime) -> SessionUpdate:
    """A finished session takes a chat question or a re-score: its expiry is stamped again.

    The new records need an ``expire_at`` too; the retention pass runs again
    once every execution of the session has ended (see :mod:`tarsy.persistence.retention`).
    """
    if not session.status.is_terminal:
        raise IllegalTransitionError(
            f"session {session.session_id!r}", session.status.value, "retention renewed"
        )
    return SessionUpdate(retention_due=now)


def pause_session(session: Session, error: ErrorInfo | None) -> SessionUpdate:
    """An agent paused at max_iterations: so does the session."""
    _session(session, S.PAUSED)
    return SessionUpdate(status=S.PAUSED, error=error)


def resume_session(session: Session, deadline: datetime) -> SessionUpdate:
    """A paused session continues, with a new deadline (the pause did not use its time)."""
    if session.status is not S.PAUSED:
        raise IllegalTransitionError(
            f"session {session.session_id!r}", session.status.value, "resumed"
        )
    return SessionUpdate(status=S.ACTIVE, error=None, deadline=deadline)


def request_cancel(session: Session) -> SessionUpdate:
    """Ask a running session to stop; steps check the flag before each model call."""
    if session.status.is_terminal:
        raise IllegalTransitionError(
            f"session {session.session_id!r}", session.status.value, "cancel requested"
        )
    return SessionUpdate(cancel_requested=True)


def cancel_session(session: Session, now: datetime) -> SessionUpdate:
    """The session's cancel took effect."""
    _session(session, S.CANCELLED)
    return SessionUpdate(status=S.CANCELLED, completed_at=now, due_at=None, retention_due=now)


def time_out_session(session: Session, error: ErrorInfo, now: datetime) -> SessionUpdate:
    """The session passed its deadline."""
    _session(session, S.TIMED_OUT)
    return SessionUpdate(
        status=S.TIMED_OUT, error=error, completed_at=now, due_at=None, retention_due=now
    )


def dead_letter_session(session: Session, error: ErrorInfo, now: datetime) -> SessionUpdate:
    """A step of the session could not be delivered: it fails with the reason."""
    _session(session, S.FAILED)
    return SessionUpdate(
        status=S.FAILED, error=error, completed_at=now, due_at=None, retention_due=now
    )


# ─── stages ───────────────────────────────────────────────────────────────────


def end_stage(
    status: ExecutionStatus, now: datetime, finished: dict[str, str] | None = None
) -> StageUpdate:
    """A stage has its result: its status from its agents' (and synthesis')."""
    if not status.is_terminal:
        raise IllegalTransitionError("stage", "active", status.value)
    if finished is None:
        return StageUpdate(status=status, completed_at=now)
    return StageUpdate(status=status, completed_at=now, finished_executions=finished)


def pause_stage() -> StageUpdate:
    """The stage's agent paused at max_iterations."""
    return StageUpdate(status=S.PAUSED)


def resume_stage() -> StageUpdate:
    """The stage's paused agent continues."""
    return StageUpdate(status=S.ACTIVE)


def start_synthesis(finished: dict[str, str], synthesis_id: str) -> StageUpdate:
    """A parallel stage's agents are done; its synthesis runs next."""
    return StageUpdate(finished_executions=finished, synthesis_execution_id=synthesis_id)

"""Ending executions and sessions from outside a step's commit: cancel, time-out, fail.

Design constraint: the step engine, the api and the sweeper all end things,
and must end them the same way; each ending lives here once. Every function is
safe to repeat (the sweeper and redeliveries run them again) and writes only
typed transitions (:mod:`tarsy.engine.transitions`).

A dead letter that arrives after its step was done (a slow step outlived its
deliveries, then committed) is late, not a failure: :func:`dead_letter`
drops it.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from tarsy.app import Deps
from tarsy.engine import chains, transitions
from tarsy.engine.roles import rules
from tarsy.log import fields
from tarsy.models import (
    AgentExecution,
    ErrorInfo,
    ExecutionStatus,
    Session,
    StepMessage,
    utcnow,
)

logger = logging.getLogger(__name__)


async def cancel_execution(execution: AgentExecution, session: Session, deps: Deps) -> None:
    """End a cancelled session's execution (and the session) without another LLM call."""
    now = utcnow()
    await deps.store.update_execution(
        execution.execution_id, transitions.cancel_execution(execution, now)
    )
    if not session.status.is_terminal:
        await deps.store.update_session(
            session.session_id, transitions.cancel_session(session, now)
        )
    logger.info(
        "cancelled",
        extra=fields(session_id=execution.session_id, execution_id=execution.execution_id),
    )
    if rules(execution.role).answers_a_parent:  # its parent may be waiting: wake it to cancel
        ended = execution.model_copy(update={"status": ExecutionStatus.CANCELLED})
        await chains.answer_parent(ended, deps)


async def cancel_one(execution: AgentExecution, deps: Deps) -> None:
    """End one execution cancelled on its own; its stage moves on without it (fan-in).

    Its sub-agent conversations still running are cancelled too; a cancelled
    sub-agent gives its parent an error observation (:func:`answer_parent`).
    """
    update = transitions.cancel_one_execution(execution, utcnow())
    await deps.store.end_execution(execution, update)
    await cancel_sub_agents(execution.execution_id, deps)
    logger.info(
        "agent cancelled",
        extra=fields(session_id=execution.session_id, execution_id=execution.execution_id),
    )
    ended = execution.model_copy(
        update={"status": ExecutionStatus.CANCELLED, "error": update.error}
    )
    await chains.after_execution(ended, deps)


async def cancel_sub_agents(
    parent_execution_id: str, deps: Deps, only: set[str] | None = None
) -> None:
    """Ask the parent's running sub-agent conversations (or ``only`` those) to stop."""
    for conversation, _ in (await deps.store.list_sub_agents(parent_execution_id)).values():
        chosen = only is None or conversation.execution_id in only
        if chosen and not conversation.status.is_terminal:
            await deps.store.update_execution(
                conversation.execution_id, transitions.request_cancel_of_execution(conversation)
            )


DEADLINE_ERROR = ErrorInfo(message="the session passed its deadline", code="deadline")


async def time_out(session: Session, deps: Deps) -> None:
    """End a session past its deadline: it and its unfinished executions become timed_out."""
    now = utcnow()
    for execution in await deps.store.list_executions(session.session_id):
        if not execution.status.is_terminal:
            await deps.store.update_execution(
                execution.execution_id,
                transitions.time_out_execution(execution, DEADLINE_ERROR, now),
            )
    if not session.status.is_terminal:
        await deps.store.update_session(
            session.session_id, transitions.time_out_session(session, DEADLINE_ERROR, now)
        )
    logger.warning("session timed out", extra=fields(session_id=session.session_id))


async def fail(
    message: StepMessage, error: ErrorInfo, deps: Deps, *, unless_leased: bool = False
) -> None:
    """Fail the execution and session of ``message`` with ``error`` (safe to repeat).

    For what no retry can fix: a configuration error met while stepping, a
    permanent failure, or a message Pub/Sub gave up delivering. With
    ``unless_leased`` (the dead-letter path), an execution whose step holds a
    live lease is left alone: its deliveries were refused because a step was
    running (or had just died), and its due time lets the sweeper re-run it.
    """
    now = utcnow()
    if message.execution_id:
        try:
            execution = await deps.store.get_execution(message.execution_id)
        except ValidationError:
            execution = None  # a document no step can read: fail the session alone
            logger.error("execution %s cannot be read", message.execution_id)
        if (
            unless_leased
            and execution is not None
            and not execution.status.is_terminal
            and execution.lease_until is not None
            and execution.lease_until > now
        ):
            logger.warning(
                "dead letter for %s while a step holds its lease; the sweeper re-runs it",
                message.execution_id,
                extra=fields(session_id=message.session_id),
            )
            return
        logger.error(error.message, extra=fields(session_id=message.session_id))
        if execution is not None and not execution.status.is_terminal:
            await deps.store.update_execution(
                message.execution_id, transitions.dead_letter_execution(execution, error, now)
            )
    session = await deps.store.get_session(message.session_id)
    if session is not None and not session.status.is_terminal:
        await deps.store.update_session(
            message.session_id, transitions.dead_letter_session(session, error, now)
        )


async def dead_letter(message: StepMessage, deps: Deps, *, delivery_attempts: str) -> None:
    """Fail the execution and session of a message Pub/Sub gave up delivering, unless late."""
    if await _dead_letter_is_late(message, deps):
        logger.warning(
            "dead letter for %s #%s arrived after its step was done; dropped",
            message.kind,
            message.step or message.stage,
            extra=fields(session_id=message.session_id, execution_id=message.execution_id),
        )
        return
    reason = ErrorInfo(
        message=(
            f"step {message.kind!r} #{message.step or message.stage} could not be processed "
            f"after {delivery_attempts} delivery attempts"
        ),
        code="dead_letter",
    )
    await fail(message, reason, deps, unless_leased=True)


async def _dead_letter_is_late(message: StepMessage, deps: Deps) -> bool:
    """Whether the step of a dead-lettered message already happened."""
    if message.runs_step:
        try:
            execution = await deps.store.get_execution(message.execution_id)
        except ValidationError:
            return False  # a document no step can read: the poison the dead letter is for
        return execution is not None and step_is_done(message, execution)
    return await deps.store.get_stage(message.session_id, message.stage) is not None


def step_is_done(message: StepMessage, execution: AgentExecution) -> bool:
    """Whether ``message``'s step is behind a committed one, or its execution ended (pure)."""
    return message.step < execution.step or execution.status.is_terminal

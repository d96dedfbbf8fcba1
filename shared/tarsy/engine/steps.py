"""The step engine: what one invocation of the step function does with one message.

A ``start_session``/``start_stage`` message creates a stage (:mod:`tarsy.engine.chains`).
An ``iterate`` message runs ONE step of one execution, read top to bottom in
:func:`iterate`::

    load state → triage → pick the kind of step → claim → work (under the
    lease heartbeat) → commit (one batch) → publish what comes next

At-least-once delivery is made safe by :func:`triage`:

* ``message.step < execution.step``: the step is already committed. If the
  next message may never have been published (a crash between commit and
  publish), publish it again; a finished execution re-runs its fan-in.
* ``message.step == execution.step``: claim the lease (another invocation
  holding it raises LeaseHeldError: Pub/Sub redelivers later), run, commit
  under the claim, publish.
* ``message.step > execution.step``: cannot happen in order; acknowledged.

Design constraint: the claim, the heartbeat, the commit, a lost commit and the
publish are written once, in :func:`run_claimed`, for every kind of step
(:mod:`tarsy.engine.step_kinds`); a kind only does its work and says what to
commit and what follows.

Errors are mapped once, in :func:`handle`: transient ones are re-raised so
Pub/Sub redelivers; configuration and permanent errors fail the session with
the reason and the message is acknowledged (see :mod:`tarsy.errors`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from datetime import datetime
from typing import assert_never

from tarsy.app import Deps
from tarsy.engine import chains, lifecycle
from tarsy.engine.commits import build_commit as build_commit  # re-exported: replay and tests
from tarsy.engine.commits import execution_update as execution_update  # re-exported: replay
from tarsy.engine.heartbeat import Heartbeat, lease_of
from tarsy.engine.messages import due_after_republish, iterate_message
from tarsy.engine.step_kinds import collect_answers
from tarsy.engine.step_kinds.base import (
    Advance,
    FanInOf,
    FollowOn,
    Publish,
    StepInput,
    StepKind,
    step_due,
)
from tarsy.engine.step_kinds.gather_turn import GatherTurn
from tarsy.engine.step_kinds.model_turn import ModelTurn
from tarsy.engine.triage import Settle, triage
from tarsy.errors import ConfigError, LeaseHeldError, PermanentError, TransientError
from tarsy.log import fields
from tarsy.models import AgentExecution, ErrorInfo, ExecutionStatus, Session, StepMessage, utcnow
from tarsy.notify.session_end import on_session_end
from tarsy.persistence.step_values import Claim

logger = logging.getLogger(__name__)


# ─── entry ────────────────────────────────────────────────────────────────────


async def handle(message: StepMessage, deps: Deps) -> None:
    """Run one step message, mapping errors once.

    Raises TransientError when the message must be redelivered; records
    everything else from the error tree on the execution and session. The
    session's end is announced after any message that may have ended it: a
    step that only went on to the next one skips that read of the session.
    """
    log = fields(session_id=message.session_id, execution_id=message.execution_id)
    logger.info("step %s %s", message.kind, message.step or message.stage, extra=log)
    may_have_ended = True
    try:
        if message.runs_step:
            may_have_ended = await iterate(message, deps)
        else:
            await chains.start_stage(message.session_id, message.stage, deps)
    except TransientError:
        raise
    except ConfigError as error:
        await lifecycle.fail(message, ErrorInfo(message=str(error), code="configuration"), deps)
    except PermanentError as error:
        await lifecycle.fail(message, ErrorInfo(message=str(error), code="permanent"), deps)
    if may_have_ended:
        await on_session_end(message.session_id, deps)


async def handle_dead_letter(message: StepMessage, deps: Deps, *, delivery_attempts: str) -> None:
    """Fail what a message Pub/Sub gave up delivering (a late one is dropped: lifecycle)."""
    await lifecycle.dead_letter(message, deps, delivery_attempts=delivery_attempts)
    await on_session_end(message.session_id, deps)


# ─── one step, top to bottom ──────────────────────────────────────────────────


async def iterate(message: StepMessage, deps: Deps) -> bool:
    """Run step ``message.step`` of execution ``message.execution_id``.

    Returns False when the session cannot have ended here (the step went on to
    the next, or the message was a duplicate); True whenever it may have.
    """
    # Model attempts, retries and summaries share this deadline (Settings.step_budget_seconds).
    budget = time.monotonic() + deps.settings.step_budget_seconds
    # The conversation is read alongside the state: the claim then needs no read after it.
    state = await deps.store.get_step_state(
        message.execution_id, message.session_id, list(deps.config.mcp_servers),
        conversation=True,
    )  # fmt: skip
    execution, session = state.execution, state.session
    if execution is None or session is None or state.update_time is None:
        logger.error("execution %s or its session is missing; dropping", message.execution_id)
        return False
    fate = triage(message, execution, session, utcnow())
    if fate != "run":
        await _settle(fate, message, execution, state.update_time, session, deps)
        return fate not in ("heal", "ahead")
    kind = await step_kind(execution, deps)
    if kind is None:  # a waiting turn whose answers are still to come: nothing to do yet
        return True
    running = execution.model_copy(update={"status": ExecutionStatus.ACTIVE})
    step = StepInput(message, state, running, session, budget, deps)
    return await run_claimed(kind, step, state.update_time)


async def step_kind(execution: AgentExecution, deps: Deps) -> StepKind | None:
    """The kind of step the execution is at; None while a waiting turn's answers are missing."""
    if execution.awaiting is not None:
        return await collect_answers.when_due(execution, execution.awaiting, deps)
    if execution.gather_pending:
        return GatherTurn()
    return ModelTurn()


async def run_claimed(kind: StepKind, step: StepInput, read_time: datetime) -> bool:
    """Claim the step, run the kind's work under the heartbeat, commit it, publish what follows.

    The one place a step is claimed, committed and published: a commit that
    finds the execution changed (a cancel, a takeover after the lease ran out)
    writes nothing, and the step ends as :func:`after_lost_commit` says.
    ``read_time`` is when the execution was last written, as the step read it.
    Returns whether the session may have ended.
    """
    message, deps = step.message, step.deps
    claim = await claim_step(message, read_time, deps)
    async with Heartbeat(
        deps.store, message.execution_id, claim, lease_of(deps),
        deps.settings.step_cancel_poll_seconds,
    ) as heartbeat:  # fmt: skip
        work = await kind.work(step, heartbeat)
    # Only now is the claim final: a renewal may have run while the kind worked.
    if work is None or not await deps.store.commit_step(
        work.commit.model_copy(update={"claim": heartbeat.claim})
    ):
        await after_lost_commit(message, deps)
        return True
    if work.stop_conversations:
        await lifecycle.cancel_sub_agents(
            message.execution_id, deps, only=set(work.stop_conversations)
        )
    await _follow(work.then, deps)
    return work.may_end


async def _follow(then: FollowOn, deps: Deps) -> None:
    """Publish what follows a committed step: messages, the chain's advance, or the fan-in."""
    match then:
        case Publish(messages):
            for message in messages:
                await deps.bus.publish(message)
        case FanInOf(finished):
            await chains.after_execution(finished, deps)
        case Advance(execution_id, message):
            await deps.bus.publish(message)
            # One batch: the next step is known published, and nothing more is due here.
            await deps.store.settle_advance(execution_id, message)
        case _:
            assert_never(then)


# ─── everything but running ───────────────────────────────────────────────────


async def _settle(
    fate: Settle,
    message: StepMessage,
    execution: AgentExecution,
    read_time: datetime,
    session: Session,
    deps: Deps,
) -> None:
    """Everything but running: heal, fan in, cancel, time out, or wait for the lease.

    ``read_time`` is when ``execution`` was last written, as the step read it.
    """
    match fate:
        case "fan_in":
            await chains.after_execution(execution, deps)  # the fan-in may not have run
        case "heal":
            await _heal_publish(execution, read_time, deps, utcnow())
        case "ahead":
            logger.warning(
                "message for step %s but execution %s is at step %s; dropping",
                message.step,
                execution.execution_id,
                execution.step,
            )
        case "settled":
            pass  # finished or paused: the message is a late duplicate
        case "cancel":
            await lifecycle.cancel_execution(execution, session, deps)
        case "cancel_one":
            await lifecycle.cancel_one(execution, deps)
        case "time_out":
            await lifecycle.time_out(session, deps)
        case "leased":
            until = execution.lease_until.isoformat() if execution.lease_until else "?"
            step = f"execution {execution.execution_id!r} step {execution.step}"
            raise LeaseHeldError(f"{step} is leased until {until}")
        case _:
            assert_never(fate)


async def _heal_publish(
    execution: AgentExecution, read_time: datetime, deps: Deps, now: datetime
) -> None:
    """Re-publish the execution's current step if its message is overdue.

    A duplicate of a committed step arrives while the next step's message is
    most likely still on its way: publishing again on every duplicate would
    only multiply messages. Once the next step is overdue, it may have been
    lost, or it may only be queued behind a backlog longer than the due time;
    so the re-publish first moves the due time on, under a precondition on
    the execution as this step read it, and only the one duplicate (or sweep)
    whose write wins publishes. Each copy is a duplicate of the next step in
    turn: without the gate, every one of them would publish again.
    """
    if execution.status.is_terminal or execution.status == ExecutionStatus.PAUSED:
        return
    if execution.published_step >= execution.step or execution.lease_owner:
        return
    if execution.due_at is not None and execution.due_at > now:
        return
    if not await deps.store.postpone_execution(
        execution.execution_id,
        read_time=read_time,
        until=due_after_republish(execution, now, step_due(deps)),
    ):
        return  # the step was claimed, or someone else re-published it
    logger.info(
        "re-publishing step %s of %s (its message may have been lost)",
        execution.step,
        execution.execution_id,
    )
    await deps.bus.publish(iterate_message(execution, execution.step))


async def after_lost_commit(message: StepMessage, deps: Deps) -> None:
    """The execution changed under the step: a cancel, or a takeover after the lease ran out.

    A cancel marks the execution (see :func:`tarsy.engine.transitions.request_cancel_of_execution`),
    so a step that was mid-call when it came ends the execution here instead of
    committing and publishing what would follow.
    """
    execution = await deps.store.get_execution(message.execution_id)
    if execution is None or not execution.cancel_requested or execution.status.is_terminal:
        return  # another invocation took over after our lease expired; it owns the step now
    session = await deps.store.get_session(message.session_id)
    if session is not None and session.cancel_requested:
        await lifecycle.cancel_execution(execution, session, deps)
    elif session is not None:
        await lifecycle.cancel_one(execution, deps)


# ─── the claim ────────────────────────────────────────────────────────────────


def _lease_owner() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def claim_step(message: StepMessage, read_time: datetime, deps: Deps) -> Claim:
    """Take the execution's lease for this step (LeaseHeldError if someone wrote it since)."""
    return await deps.store.claim(
        message.execution_id,
        owner=_lease_owner(),
        until=utcnow() + lease_of(deps),
        read_time=read_time,
        step=message.step,
    )

"""What a model turn commits, and what follows the commit (pure).

Design constraint: a step writes everything in ONE batch, conditional on its
claim (:meth:`tarsy.persistence.store.Store.commit_step`): the call's and the
tools' records, the spend, the conversation, the timeline, the execution's
status and, when the execution ends, what the chain does next. Nothing here
does I/O, so each outcome's commit is tested without a store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import assert_never

from tarsy.agent.strategies.base import IterationOutcome
from tarsy.config.schema import TarsyConfig
from tarsy.engine import progression, transitions
from tarsy.engine.iteration import ModelCall, ToolRun, Turn, cost_of
from tarsy.engine.messages import iterate_message
from tarsy.engine.progression import Decision, FanIn, Next
from tarsy.engine.roles import PauseScope, rules
from tarsy.engine.step_kinds.base import Advance, FanInOf, FollowOn, Publish
from tarsy.engine.transitions import ExecutionUpdate, SessionUpdate, StageUpdate
from tarsy.models import AgentExecution, ExecutionStatus, Session, StepMessage, TokenUsage, utcnow
from tarsy.persistence.step_values import Claim, StepCommit

# Thought signatures are only useful while an execution runs; the TTL policy deletes them.
PROVIDER_STATE_TTL = timedelta(hours=1)


def execution_update(
    execution: AgentExecution, outcome: IterationOutcome, now: datetime, next_due: datetime | None
) -> ExecutionUpdate:
    """The execution's status change after this iteration (pure)."""
    progress = transitions.count_iteration(
        execution, failed_attempt=outcome.failed_attempt, next_due=next_due
    )
    if outcome.next == "complete":
        return transitions.complete_execution(
            execution, outcome.final_analysis, now, progress=progress
        )
    if outcome.next == "fail":
        update = transitions.fail_execution(execution, outcome.error, now, progress=progress)
        return transitions.await_fan_in(update, next_due) if next_due else update
    if outcome.next == "pause":
        return transitions.pause_execution(execution, outcome.error, progress=progress)
    return progress


FINISHED: dict[str, ExecutionStatus] = {
    "complete": ExecutionStatus.COMPLETED,
    "fail": ExecutionStatus.FAILED,
}


def build_commit(
    message: StepMessage,
    turn: Turn,
    call: ModelCall | None,
    tools: ToolRun,
    outcome: IterationOutcome,
    claim: Claim | None,
    config: TarsyConfig,
    due: timedelta,
) -> tuple[StepCommit, Decision | None]:
    """Everything this step writes, as one atomic batch, and what follows it.

    When the execution ends, the chain state machine decides what follows
    (:func:`tarsy.engine.progression.after_execution`); a :class:`Next` joins the
    batch (the stage result, the session's status, the next execution), a
    :class:`FanIn` is left to :func:`tarsy.engine.chains.after_execution`.
    ``call`` is None for the step that completes a turn with its sub-agents' answers.
    """
    now = utcnow()
    execution, session = turn.execution, turn.session
    records = step_records(message, turn, call, tools, claim, config, now)
    finished = FINISHED.get(outcome.next)
    decision: Decision | None = None
    if finished is not None:
        ended = execution.model_copy(update={"error": outcome.error})
        # The session as this commit leaves it: its spend includes this step's own, so a
        # budget crossed by a stage's last call is seen before the next stage starts.
        spent = session.model_copy(
            update={"tokens": session.tokens + records.usage, "cost": session.cost + records.cost}
        )
        decision = progression.after_execution(
            config, spent, ended, finished, outcome.final_analysis, now, now + due
        )
    # Due: the next step; or, once finished, what follows it until that is published
    # (a parallel stage's fan-in, or the decided message).
    follows = not isinstance(decision, Next) or decision.publish is not None
    awaits = outcome.next == "continue" or (finished is not None and follows)
    update = execution_update(execution, outcome, now, now + due if awaits else None)
    commit = records.model_copy(
        update={
            "messages": outcome.messages,
            "timeline": outcome.timeline,
            "execution": update,
            "stage_index": execution.stage if execution.stage >= 0 else None,
            "finished_status": finished,
        }
    )
    if outcome.next == "pause":
        commit.stage, commit.session = _paused(rules(execution.role).pauses, session, outcome)
    if isinstance(decision, Next):
        commit.stage, commit.session = decision.stage, decision.session
        commit.create_execution = decision.create
        commit.create_opening = decision.opening
    return commit, decision


def _paused(
    scope: PauseScope, session: Session, outcome: IterationOutcome
) -> tuple[StageUpdate | None, SessionUpdate | None]:
    """What a pause at max iterations pauses besides the execution, by its role's scope."""
    match scope:
        case "stage_and_session":
            return transitions.pause_stage(), transitions.pause_session(session, outcome.error)
        case "session":
            return None, transitions.pause_session(session, outcome.error)
        case "nothing":
            return None, None
        case _:
            assert_never(scope)


def step_records(
    message: StepMessage,
    turn: Turn,
    call: ModelCall | None,
    tools: ToolRun,
    claim: Claim | None,
    config: TarsyConfig,
    now: datetime,
) -> StepCommit:
    """What every step commits: the call's and the tools' records, spend, provider state."""
    usage = tools.usage + (call.interaction.tokens if call is not None else TokenUsage())
    price = config.price_for(turn.config.provider.model)
    commit = StepCommit(
        execution_id=turn.execution.execution_id,
        session_id=turn.session.session_id,
        step=message.step,
        next_step=message.step + 1,
        claim=claim,
        llm_interaction=call.interaction if call is not None else None,
        mcp_interactions=tools.records,
        summary_interactions=tools.interactions,
        usage=usage,
        cost=(call.interaction.cost if call is not None else 0) + cost_of(price, tools.usage),
        role=turn.execution.role,
    )
    if call is not None and call.result is not None and call.result.provider_state:
        commit.provider_state = call.result.provider_state
        commit.provider_state_expire_at = now + PROVIDER_STATE_TTL
    return commit


def follow_on(
    message: StepMessage,
    turn: Turn,
    outcome: IterationOutcome,
    commit: StepCommit,
    decision: Decision | None,
) -> FollowOn:
    """What follows the committed turn: the next step, the decision, or the fan-in (pure)."""
    if outcome.next == "continue":
        return Publish((iterate_message(turn.execution, message.step + 1),))
    if commit.finished_status is None or decision is None:
        return Publish()  # paused
    if isinstance(decision, FanIn):
        finished = turn.execution.model_copy(
            update={"status": commit.finished_status, "final_analysis": outcome.final_analysis}
        )
        return FanInOf(finished)
    if decision.publish is not None:
        return Advance(turn.execution.execution_id, decision.publish)
    return Publish()

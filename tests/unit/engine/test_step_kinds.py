"""The kinds of step, by what their work returns: what to commit and what follows it (pure)."""

from __future__ import annotations

from datetime import timedelta

from tarsy.agent.strategies.base import IterationOutcome, IterationState
from tarsy.agent.strategies.registry import get_strategy
from tarsy.config import load_config
from tarsy.engine.commits import build_commit, follow_on
from tarsy.engine.iteration import ModelCall, ToolRun, Turn
from tarsy.engine.messages import FIRST_ITERATION_STEP, iterate_message
from tarsy.engine.progression import FanIn
from tarsy.engine.step_kinds.base import Advance, FanInOf, Publish
from tarsy.engine.step_kinds.model_turn import waiting
from tarsy.llm.base import LLMResult
from tarsy.models import (
    AgentExecution,
    ExecutionStatus,
    LLMInteraction,
    Session,
    StepMessage,
    utcnow,
)
from tarsy.persistence.turns import Dispatch
from tarsy.settings import Settings

SID = "0b7e5c1a-1111-4222-8333-444455556666"
EID = f"{SID}-s00-a00"
CONFIG = load_config(Settings())
DUE = timedelta(seconds=60)
SESSION = Session(
    session_id=SID, alert_type="t", alert_data="d", chain_id="default", status="active"
)
MESSAGE = StepMessage(session_id=SID, execution_id=EID, step=4, kind="iterate")


def turn() -> Turn:
    running = AgentExecution(
        execution_id=EID, session_id=SID, stage=0, agent="investigator", strategy="react",
        status=ExecutionStatus.ACTIVE, provider="default", step=4, iteration=3,
    )  # fmt: skip
    resolved = CONFIG.resolve("default", 0, 0)
    state = IterationState(execution=running, config=resolved, messages=[])
    strategy = get_strategy(running.strategy)
    return Turn(
        execution=running,
        session=SESSION,
        config=resolved,
        strategy=strategy,
        state=state,
        request=strategy.build_request(state),
        budget=0.0,
    )


def call() -> ModelCall:
    interaction = LLMInteraction(step=4, model="m", provider="google-native", request={})
    return ModelCall(interaction=interaction, result=LLMResult(text="asking"))


def test_a_turn_that_goes_on_publishes_its_next_step() -> None:
    outcome = IterationOutcome(next="continue")
    commit, decision = build_commit(MESSAGE, turn(), call(), ToolRun(), outcome, None, CONFIG, DUE)
    then = follow_on(MESSAGE, turn(), outcome, commit, decision)
    assert then == Publish((iterate_message(turn().execution, 5),))


def test_a_paused_turn_publishes_nothing() -> None:
    outcome = IterationOutcome(next="pause")
    commit, decision = build_commit(MESSAGE, turn(), call(), ToolRun(), outcome, None, CONFIG, DUE)
    assert follow_on(MESSAGE, turn(), outcome, commit, decision) == Publish()


def test_a_completed_single_agent_stage_advances_to_what_the_chain_decided() -> None:
    outcome = IterationOutcome(next="complete", final_analysis="root cause")
    commit, decision = build_commit(MESSAGE, turn(), call(), ToolRun(), outcome, None, CONFIG, DUE)
    then = follow_on(MESSAGE, turn(), outcome, commit, decision)
    assert commit.create_execution is not None
    assert then == Advance(EID, iterate_message(commit.create_execution, 1))


def test_an_execution_that_ends_in_a_fan_in_hands_its_finished_self_to_it() -> None:
    outcome = IterationOutcome(next="complete", final_analysis="root cause")
    commit, _ = build_commit(MESSAGE, turn(), call(), ToolRun(), outcome, None, CONFIG, DUE)
    then = follow_on(MESSAGE, turn(), outcome, commit, FanIn(reason="parallel_stage"))
    assert isinstance(then, FanInOf)
    assert then.finished.status is ExecutionStatus.COMPLETED
    assert then.finished.final_analysis == "root cause"


def test_a_turn_that_messages_a_sub_agent_waits_and_starts_its_conversation() -> None:
    dispatch = Dispatch(
        call_id="c1", agent_name="kubernetes-investigator", conversation_id="conv",
        message="look at the pods", new=True,
    )  # fmt: skip
    now = utcnow()
    work = waiting(
        MESSAGE, turn(), call(), ToolRun(dispatches=[dispatch]),
        IterationOutcome(next="continue"), CONFIG, now, DUE,
    )  # fmt: skip
    [started] = work.commit.new_conversations
    assert work.then == Publish((iterate_message(started.execution, FIRST_ITERATION_STEP),))
    assert work.commit.pending_turn is not None and work.commit.pending_turn.step == 4
    assert work.commit.messages == []  # written when the answers are collected
    assert work.commit.claim is None  # the skeleton commits it under its own claim
    assert work.may_end

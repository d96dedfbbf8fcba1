"""The step engine's pure parts: ids, step messages, cost, and the commit of each outcome."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tarsy.agent.strategies.base import IterationOutcome, IterationState
from tarsy.agent.strategies.registry import get_strategy
from tarsy.config import load_config
from tarsy.config.schema import ModelPrice
from tarsy.engine.iteration import ModelCall, ToolRun, Turn, after_llm_failure, cost_of
from tarsy.engine.lifecycle import step_is_done
from tarsy.engine.messages import (
    execution_id_for,
    iterate_message,
    summary_id_for,
    synthesis_id_for,
)
from tarsy.engine.progression import stage_status
from tarsy.engine.steps import build_commit
from tarsy.engine.transitions import SessionUpdate, StageUpdate
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ErrorInfo,
    ExecutionStatus,
    LLMInteraction,
    LLMResponseEvent,
    Session,
    StepMessage,
    TimelineEvent,
    TokenUsage,
)
from tarsy.persistence.store import StepCommit, firestore_fields
from tarsy.settings import Settings

SID = "0b7e5c1a-1111-4222-8333-444455556666"


# ─── ids and messages ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("stage", "agent", "expected"),
    [(0, 0, f"{SID}-s00-a00"), (1, 2, f"{SID}-s01-a02"), (12, 10, f"{SID}-s12-a10")],
)
def test_execution_id_for(stage: int, agent: int, expected: str) -> None:
    assert execution_id_for(SID, stage, agent) == expected


def test_execution_ids_are_deterministic_and_distinct() -> None:
    ids = {execution_id_for(SID, s, a) for s in range(5) for a in range(5)}
    ids |= {synthesis_id_for(SID, s) for s in range(5)} | {summary_id_for(SID)}
    assert len(ids) == 25 + 5 + 1
    assert execution_id_for(SID, 3, 1) == execution_id_for(SID, 3, 1)
    assert execution_id_for(SID, 1, 0) != execution_id_for("other-session", 1, 0)
    assert synthesis_id_for(SID, 2) == f"{SID}-s02-synthesis"
    assert summary_id_for(SID) == f"{SID}-summary"


def execution(**overrides: Any) -> AgentExecution:
    values: dict[str, Any] = {
        "execution_id": execution_id_for(SID, 0, 0),
        "session_id": SID,
        "stage": 0,
        "agent": "investigator",
        "strategy": "react",
        "status": "active",
        "provider": "default",
        "step": 4,
        "iteration": 3,
    }
    values.update(overrides)
    return AgentExecution.model_validate(values)


def test_iterate_message() -> None:
    message = iterate_message(execution(), 5)
    assert message == StepMessage(
        session_id=SID, execution_id=execution_id_for(SID, 0, 0), step=5, kind="iterate"
    )
    assert message.dedup_key() == f"{SID}/{execution_id_for(SID, 0, 0)}/iterate/0/5"


# ─── cost ────────────────────────────────────────────────────────────────────


def test_cost_without_price_is_zero() -> None:
    assert cost_of(None, TokenUsage(input_tokens=10**6, output_tokens=10**6)) == 0


def test_cost_bills_thinking_as_output() -> None:
    price = ModelPrice(input_per_million=0.30, output_per_million=2.50)
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=200_000, thinking_tokens=800_000)
    assert cost_of(price, usage) == 2_800_000_000  # nano-dollars: exactly $2.80
    assert cost_of(price, TokenUsage(input_tokens=1000)) == 300_000  # $0.0003
    assert cost_of(price, TokenUsage(input_tokens=7)) == 2_100  # $0.0000021, no float noise
    assert cost_of(price, TokenUsage()) == 0


# ─── the commit of one step ──────────────────────────────────────────────────

SESSION = Session(
    session_id=SID, alert_type="t", alert_data="d", chain_id="default", status="active"
)
USAGE = TokenUsage(input_tokens=100, output_tokens=20, total_tokens=130, thinking_tokens=10)
DUE = timedelta(seconds=60)
CONFIG = load_config(Settings())


def interaction() -> LLMInteraction:
    return LLMInteraction(
        step=4, model="gemini-2.5-flash", provider="google-native", request={}, tokens=USAGE,
        cost=125_000_000,
    )  # fmt: skip


def turn(**execution_overrides: Any) -> Turn:
    running = execution(**execution_overrides)
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


def commit(outcome: IterationOutcome, **execution_overrides: Any) -> StepCommit:
    return planned(outcome, **execution_overrides)[0]


def planned(outcome: IterationOutcome, **execution_overrides: Any) -> tuple[StepCommit, Any]:
    message = StepMessage(
        session_id=SID, execution_id=execution_id_for(SID, 0, 0), step=4, kind="iterate"
    )
    call = ModelCall(interaction=interaction())
    return build_commit(
        message, turn(**execution_overrides), call, ToolRun(), outcome, None, CONFIG, DUE
    )


def test_continue_only_counts_the_iteration() -> None:
    messages = [ConversationMessage(role="assistant", content="thinking aloud")]
    timeline: list[TimelineEvent] = [LLMResponseEvent(content="thinking aloud")]
    result = commit(IterationOutcome(next="continue", messages=messages, timeline=timeline))
    assert result.execution_id == execution_id_for(SID, 0, 0)
    assert result.session_id == SID
    assert (result.step, result.next_step) == (4, 5)
    fields = firestore_fields(result.execution)
    assert result.llm_interaction is not None
    assert fields.pop("due_at") - result.llm_interaction.created_at > DUE / 2  # next step due
    assert fields == {"iteration": 4, "consecutive_failures": 0}
    assert result.stage is None
    assert result.session is None
    assert result.finished_status is None
    assert result.messages == messages
    assert result.timeline == timeline
    assert result.usage == USAGE
    assert result.cost == 125_000_000
    assert result.stage_index == 0
    assert result.llm_interaction == interaction().model_copy(
        update={"created_at": result.llm_interaction.created_at}
    )


def test_complete_finishes_the_execution_and_plans_the_summary_in_the_same_commit() -> None:
    result, advance = planned(
        IterationOutcome(next="complete", final_analysis="## Root cause\nconfig")
    )
    fields = firestore_fields(result.execution)
    assert fields["iteration"] == 4
    assert fields["status"] == "completed"
    assert fields["final_analysis"] == "## Root cause\nconfig"
    # Due until the summary's first message is known to be out (settle_advance clears it).
    assert isinstance(fields["due_at"], datetime)
    assert isinstance(fields["completed_at"], datetime)
    assert fields["completed_at"].tzinfo is not None
    assert result.finished_status is ExecutionStatus.COMPLETED
    # A single-agent stage's last step also ends the stage and starts the summary.
    assert isinstance(result.stage, StageUpdate)
    assert firestore_fields(result.stage)["status"] == "completed"
    assert firestore_fields(result.stage)["finished_executions"] == {
        execution_id_for(SID, 0, 0): "completed"
    }
    assert result.session == SessionUpdate(final_analysis="## Root cause\nconfig")
    assert result.create_execution is not None
    assert result.create_execution.execution_id == summary_id_for(SID)
    assert [m.role for m in result.create_opening] == ["system", "user"]
    assert advance.publish == iterate_message(result.create_execution, 1)


def test_fail_records_the_error_and_fails_the_session() -> None:
    error = ErrorInfo(message="quota", code="429", retryable=True)
    result = commit(IterationOutcome(next="fail", error=error))
    fields = firestore_fields(result.execution)
    assert fields["status"] == "failed"
    assert fields["error"] == {"message": "quota", "code": "429", "retryable": True}
    assert (fields["lease_owner"], fields["lease_until"]) == (None, None)
    assert "completed_at" in fields
    assert result.finished_status is ExecutionStatus.FAILED
    assert result.session is not None
    assert result.session.status is ExecutionStatus.FAILED
    assert result.session.error is not None
    assert "investigator: quota" in result.session.error.message


def test_fail_without_error_info() -> None:
    result = commit(IterationOutcome(next="fail"))
    assert firestore_fields(result.execution)["error"] is None
    assert result.finished_status is ExecutionStatus.FAILED


def test_pause_pauses_execution_stage_and_session() -> None:
    error = ErrorInfo(message="max iterations reached", code="max_iterations")
    result = commit(IterationOutcome(next="pause", error=error))
    dumped = error.model_dump()
    assert firestore_fields(result.execution) == {
        "iteration": 4,
        "consecutive_failures": 0,
        "status": "paused",
        "error": dumped,
        "due_at": None,  # nothing runs until someone resumes
    }
    assert result.stage is not None
    assert firestore_fields(result.stage) == {"status": "paused"}
    assert result.session is not None
    assert firestore_fields(result.session) == {"status": "paused", "error": dumped}
    # A paused execution can resume: it is not finished and has no completion time.
    assert result.finished_status is None
    assert "completed_at" not in firestore_fields(result.execution)


def test_paused_synthesis_leaves_the_stage_alone() -> None:
    result = commit(IterationOutcome(next="pause"), role="synthesis")
    assert result.stage is None
    assert result.session is not None
    assert result.session.status is ExecutionStatus.PAUSED
    assert result.role == "synthesis"


def test_summary_execution_has_no_stage_and_completes_the_session() -> None:
    result = commit(IterationOutcome(next="complete", final_analysis="s"), stage=-1, role="summary")
    assert result.stage_index is None
    assert result.role == "summary"
    assert firestore_fields(result.execution)["due_at"] is None  # nothing follows a summary
    assert result.session is not None
    assert firestore_fields(result.session)["status"] == "completed"
    assert firestore_fields(result.session)["executive_summary"] == "s"


def test_a_cancelled_execution_cannot_complete() -> None:
    from tarsy.errors import IllegalTransitionError

    with pytest.raises(IllegalTransitionError):
        commit(IterationOutcome(next="complete", final_analysis="x"), status="cancelled")


# ─── stage status from its agents ────────────────────────────────────────────


@pytest.mark.parametrize(
    ("statuses", "policy", "expected"),
    [
        (["completed", "completed"], "all", "completed"),
        (["completed", "failed"], "all", "failed"),
        (["completed", "failed"], "any", "completed"),
        (["failed", "failed"], "any", "failed"),
        (["completed", "timed_out", "failed"], "all", "timed_out"),
        # An agent cancelled on its own (a cancelled session never aggregates): "all" fails.
        (["completed", "cancelled"], "all", "failed"),
        (["cancelled", "cancelled"], "any", "cancelled"),
        (["cancelled"], "all", "cancelled"),
    ],
)
def test_stage_status(statuses: list[str], policy: str, expected: str) -> None:
    assert stage_status(statuses, policy) is ExecutionStatus(expected)


RETRYABLE = ErrorInfo(message="503 backend unavailable", code="503", retryable=True)
PERMANENT = ErrorInfo(message="400 bad request", code="400", retryable=False)


def test_first_retryable_failure_retries_the_iteration_next_step() -> None:
    outcome = after_llm_failure(execution(), RETRYABLE)
    assert (outcome.next, outcome.failed_attempt) == ("continue", True)
    result = commit(outcome)
    # The iteration is not counted; the step advances so the retry is a new message.
    assert result.execution.consecutive_failures == 1
    assert result.execution.written() == {"consecutive_failures", "due_at"}
    assert (result.step, result.next_step) == (4, 5)
    assert result.finished_status is None


def test_second_consecutive_failure_fails_with_the_reason() -> None:
    outcome = after_llm_failure(execution(consecutive_failures=1), RETRYABLE)
    assert outcome.next == "fail"
    assert outcome.error is not None
    assert outcome.error.message == "2 consecutive failed iterations; last: 503 backend unavailable"


def test_permanent_failure_fails_at_once() -> None:
    outcome = after_llm_failure(execution(), PERMANENT)
    assert (outcome.next, outcome.error) == ("fail", PERMANENT)


def test_a_dead_letter_is_late_once_its_step_is_committed_or_its_execution_ended() -> None:
    running = AgentExecution(
        execution_id="e", session_id="s", stage=0, agent="a", strategy="react", provider="p",
        step=9, status=ExecutionStatus.ACTIVE,
    )  # fmt: skip

    def message(step: int) -> StepMessage:
        return StepMessage(session_id="s", execution_id="e", step=step, kind="iterate")

    assert step_is_done(message(8), running)
    assert not step_is_done(message(9), running)
    ended = running.model_copy(update={"status": ExecutionStatus.COMPLETED})
    assert step_is_done(message(9), ended)

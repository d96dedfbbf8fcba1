"""Shared data models: statuses, usage arithmetic, alert submissions, step messages."""

from __future__ import annotations

import json
from datetime import UTC

import pytest
from pydantic import ValidationError

from tarsy.models import (
    AgentExecution,
    AlertSubmission,
    ConversationMessage,
    ExecutionStatus,
    FinalAnalysisEvent,
    MCPInteraction,
    Session,
    Stage,
    StepMessage,
    TimelineEventType,
    TokenUsage,
    timeline_event,
    utcnow,
)
from tarsy.persistence.session_list import SessionSummary


@pytest.mark.parametrize(
    ("status", "terminal"),
    [
        (ExecutionStatus.PENDING, False),
        (ExecutionStatus.ACTIVE, False),
        (ExecutionStatus.PAUSED, False),
        (ExecutionStatus.COMPLETED, True),
        (ExecutionStatus.FAILED, True),
        (ExecutionStatus.TIMED_OUT, True),
        (ExecutionStatus.CANCELLED, True),
    ],
)
def test_is_terminal(status: ExecutionStatus, terminal: bool) -> None:
    assert status.is_terminal is terminal


def test_status_values_are_the_stored_strings() -> None:
    assert [s.value for s in ExecutionStatus] == [
        "pending",
        "active",
        "completed",
        "failed",
        "timed_out",
        "cancelled",
        "paused",
    ]
    assert ExecutionStatus("paused") is ExecutionStatus.PAUSED


def test_timeline_event_types_are_the_eight_of_seed_003_and_detections() -> None:
    assert {t.value for t in TimelineEventType} == {
        "llm_thinking", "llm_response", "llm_tool_call", "mcp_tool_call", "mcp_tool_summary",
        "final_analysis", "user_question", "executive_summary", "detection",
    }  # fmt: skip
    assert TimelineEventType("mcp_tool_summary") is TimelineEventType.MCP_TOOL_SUMMARY


def test_utcnow_is_timezone_aware_utc() -> None:
    now = utcnow()
    assert now.tzinfo is not None
    assert now.utcoffset() == UTC.utcoffset(now)


def test_token_usage_addition_sums_every_field_and_leaves_operands_alone() -> None:
    a = TokenUsage(input_tokens=1, output_tokens=2, total_tokens=3, thinking_tokens=4)
    b = TokenUsage(input_tokens=10, output_tokens=20, total_tokens=30, thinking_tokens=40)
    total = a + b
    assert total == TokenUsage(
        input_tokens=11, output_tokens=22, total_tokens=33, thinking_tokens=44
    )
    assert a.input_tokens == 1
    assert b.input_tokens == 10
    assert TokenUsage() + TokenUsage() == TokenUsage()


# ─── AlertSubmission ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "alert_type",
    ["PodCrashLooping", "kubernetes/pod.crash-loop", "a b:c_d", "x" * 200, "ünïcode"],
)
def test_alert_type_accepted(alert_type: str) -> None:
    assert AlertSubmission(alert_type=alert_type, data="d").alert_type == alert_type


@pytest.mark.parametrize(
    ("alert_type", "error_type"),
    [
        ("", "string_too_short"),
        ("x" * 201, "string_too_long"),
        ("bad;type", "string_pattern_mismatch"),
        ("trailing\n", "string_pattern_mismatch"),
        ("<script>", "string_pattern_mismatch"),
    ],
)
def test_alert_type_rejected(alert_type: str, error_type: str) -> None:
    with pytest.raises(ValidationError) as failure:
        AlertSubmission(alert_type=alert_type, data="d")
    [error] = failure.value.errors()
    assert error["loc"] == ("alert_type",)
    assert error["type"] == error_type


@pytest.mark.parametrize("data", ["", {}])
def test_empty_data_rejected(data: object) -> None:
    with pytest.raises(ValidationError) as failure:
        AlertSubmission(alert_type="t", data=data)
    assert failure.value.errors()[0]["loc"] == ("data",)
    assert "must not be empty" in failure.value.errors()[0]["msg"]


@pytest.mark.parametrize("data", [42, ["a", "b"], None])
def test_data_must_be_text_or_object(data: object) -> None:
    with pytest.raises(ValidationError):
        AlertSubmission(alert_type="t", data=data)


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError) as failure:
        AlertSubmission.model_validate({"alert_type": "t", "data": "d", "severity": "high"})
    [error] = failure.value.errors()
    assert error["loc"] == ("severity",)
    assert error["type"] == "extra_forbidden"


def test_runbook_size_limit() -> None:
    assert AlertSubmission(alert_type="t", data="d", runbook="r" * 200_000).runbook
    with pytest.raises(ValidationError):
        AlertSubmission(alert_type="t", data="d", runbook="r" * 200_001)


def test_defaults() -> None:
    submission = AlertSubmission(alert_type="t", data="d")
    assert submission.runbook is None
    assert submission.metadata == {}


def test_data_as_text_passes_strings_through() -> None:
    text = "pod api-0 restarted 5 times\n"
    assert AlertSubmission(alert_type="t", data=text).data_as_text() == text


def test_data_as_text_renders_objects_as_sorted_indented_json() -> None:
    submission = AlertSubmission(alert_type="t", data={"b": 1, "a": {"ü": "é"}})
    text = submission.data_as_text()
    assert text == '{\n  "a": {\n    "ü": "é"\n  },\n  "b": 1\n}'
    assert json.loads(text) == {"a": {"ü": "é"}, "b": 1}


# ─── records ──────────────────────────────────────────────────────────────────


def test_session_defaults() -> None:
    session = Session(session_id="s", alert_type="t", alert_data="d", chain_id="default")
    assert session.status is ExecutionStatus.PENDING
    assert session.tokens == TokenUsage()
    assert session.cost == 0.0
    assert session.cancel_requested is False
    assert session.created_at.tzinfo is not None
    assert session.started_at is None


def test_records_ignore_unknown_stored_fields() -> None:
    # Firestore documents may carry fields a newer version wrote.
    session = Session.model_validate(
        {
            "session_id": "s",
            "alert_type": "t",
            "alert_data": "d",
            "chain_id": "c",
            "status": "active",
            "added_later": 1,
        }
    )
    assert session.status is ExecutionStatus.ACTIVE
    assert not hasattr(session, "added_later")


def test_execution_defaults() -> None:
    execution = AgentExecution(
        execution_id="e", session_id="s", stage=0, agent="a", strategy="react", provider="p"
    )
    assert execution.step == 0
    assert execution.published_step == -1
    assert execution.iteration == 0
    assert execution.max_iterations == 20
    assert execution.lease_owner is None


def test_stage_parallel_type_is_checked() -> None:
    assert Stage(index=0, name="s").parallel_type == "single"
    with pytest.raises(ValidationError):
        Stage(index=0, name="s", parallel_type="sequential")


def test_conversation_message_role_is_checked() -> None:
    message = ConversationMessage(role="tool", content="out", tool_call_id="c1", tool_name="k.g")
    assert message.tool_calls == []
    with pytest.raises(ValidationError):
        ConversationMessage(role="model")


def test_timeline_event_type_from_string() -> None:
    event = timeline_event({"type": "final_analysis", "content": "done"})
    assert event.type is TimelineEventType.FINAL_ANALYSIS
    assert isinstance(event, FinalAnalysisEvent)
    with pytest.raises(ValidationError):
        timeline_event({"type": "nonsense"})


def test_mcp_interaction_shown_as_is_checked() -> None:
    record = MCPInteraction(step=1, call_id="c", server="k", tool="t")
    assert record.shown_as == "full"
    with pytest.raises(ValidationError):
        MCPInteraction(step=1, call_id="c", server="k", tool="t", shown_as="cut")


# ─── StepMessage ──────────────────────────────────────────────────────────────


def test_step_message_dedup_key() -> None:
    message = StepMessage(session_id="s1", execution_id="e1", step=3, kind="iterate")
    assert message.dedup_key() == "s1/e1/iterate/0/3"
    again = StepMessage.model_validate_json(message.model_dump_json())
    assert again == message
    assert again.dedup_key() == message.dedup_key()


def test_step_message_defaults_and_distinct_keys() -> None:
    start = StepMessage(session_id="s1", kind="start_session")
    assert (start.execution_id, start.step, start.stage) == ("", 0, 0)
    keys = {
        StepMessage(session_id="s1", execution_id="e1", step=step, kind="iterate").dedup_key()
        for step in (1, 2)
    } | {
        StepMessage(session_id="s1", stage=stage, kind="start_stage").dedup_key()
        for stage in (1, 2)
    }
    assert len(keys) == 4


@pytest.mark.parametrize("kind", ["start_execution", "synthesize", "summarize", "chat"])
def test_only_the_published_step_kinds_exist(kind: str) -> None:
    with pytest.raises(ValidationError):
        StepMessage.model_validate({"session_id": "s1", "kind": kind})


@pytest.mark.parametrize(
    "payload",
    [
        {"session_id": "", "kind": "iterate"},
        {"session_id": "s", "kind": "iterate", "step": -1},
        {"session_id": "s", "kind": "explode"},
        {"session_id": "s", "kind": "iterate", "extra": 1},
        {"kind": "iterate"},
    ],
)
def test_step_message_rejects(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        StepMessage.model_validate(payload)


def test_step_message_is_frozen() -> None:
    message = StepMessage(session_id="s", kind="iterate")
    with pytest.raises(ValidationError):
        message.step = 2  # type: ignore[misc]


def test_a_legacy_float_cost_is_read_as_nanodollars_and_served_as_a_decimal_string() -> None:
    summed = 0.000212 + 0.000212  # 0.00042399999999999995: how older documents summed
    session = Session(session_id="s", alert_type="a", alert_data="d", chain_id="c", cost=summed)
    assert session.cost == 424_000
    assert session.model_dump()["cost"] == 424_000  # what Firestore stores: an int
    assert session.model_dump(mode="json")["cost"] == "0.000424"
    assert '"cost":"0.000424"' in session.model_dump_json()
    served = session.model_dump(mode="json")
    assert SessionSummary.model_validate(served).cost == 424_000  # what a client reads back

"""Typed timeline events: one model per type, stored in the shape every session was written in.

Documents written before the models existed (``{type, content, created_at,
metadata: {...}}`` with whatever keys the writer of the day put there) must
still load, so every session ever stored stays readable in the web view, the
CLI, replay and the evals.
"""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from tarsy.agent.strategies.base import IterationOutcome, IterationState, tool_events
from tarsy.agent.strategies.single_call import SingleCallStrategy
from tarsy.config import load_config
from tarsy.engine.iteration import ModelCall, ToolRun, Turn, decide
from tarsy.engine.messages import execution_id_for
from tarsy.llm.base import LLMResult
from tarsy.models import (
    AgentExecution,
    CodeExecution,
    DetectionEvent,
    EventSubject,
    ExecutiveSummaryEvent,
    FinalAnalysisEvent,
    LLMInteraction,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    MCPToolSummaryEvent,
    Session,
    TimelineEvent,
    TimelineEventType,
    ToolCall,
    TurnNotes,
    UserQuestionEvent,
    timeline_event,
)
from tarsy.settings import Settings
from tarsy.tools.base import ToolListing, ToolResult
from tarsy_dev.cli import event_style
from tests.unit.timeline_events import expect

AT = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)

# One document of each type as the writers before the typed models stored them
# (copied from what their code wrote: keys absent when unset, older key names).
OLD_DOCUMENTS: dict[TimelineEventType, dict[str, Any]] = {
    TimelineEventType.LLM_THINKING: {
        "type": "llm_thinking", "content": "Looking at the pod.", "created_at": AT,
        "metadata": {"iteration": 1, "source": "react", "react_kind": "action",
                     "native_tools_suppressed": ["google_search"]},
    },
    TimelineEventType.LLM_RESPONSE: {
        "type": "llm_response", "content": "## Root cause\nThe", "created_at": AT,
        "metadata": {"iteration": 2, "cut_short": "truncated", "finish_reason": "MAX_TOKENS",
                     "error": "the reply was cut", "code_executions": [
                         {"code": "print(1)", "outcome": "OUTCOME_OK", "output": "1\n"}]},
    },
    TimelineEventType.LLM_TOOL_CALL: {
        "type": "llm_tool_call", "content": 'kubernetes.pods_get {"name": "api-0"}',
        "created_at": AT,
        # Older records: "tool" and "server" before seed 003's names.
        "metadata": {"call_id": "c1", "tool": "pods_get", "server": "kubernetes",
                     "arguments": '{"name": "api-0"}', "loop_detected": True, "repeats": 3,
                     "unavailable_servers": {"prometheus": "connection refused"}},
    },
    TimelineEventType.MCP_TOOL_CALL: {
        "type": "mcp_tool_call", "content": "status: CrashLoopBackOff", "created_at": AT,
        "metadata": {"call_id": "gather-000", "tool_name": "pods_get",
                     "server_name": "kubernetes", "arguments": {"name": "api-0"},
                     "is_error": False, "duration_ms": 12.5, "shown_as": "full",
                     "gathered": True, "collector": "pod", "evidence_label": "E1",
                     "a_key_no_model_knows": 1},
    },
    TimelineEventType.MCP_TOOL_SUMMARY: {
        "type": "mcp_tool_summary", "content": "3 restarts", "created_at": AT,
        "metadata": {"call_id": "c2", "tool_name": "pods_log", "server_name": "kubernetes",
                     "original_tokens": 6000, "summary_tokens": 40},
    },
    TimelineEventType.FINAL_ANALYSIS: {
        "type": "final_analysis", "content": "The config map lost DB_URL.", "created_at": AT,
        "metadata": {"iteration": 5, "agent": "investigator",
                     "forced_conclusion": "max_iterations",
                     "ignored_tool_calls": ["kubernetes.pods_get"],
                     "runbook_error": "HTTP 404 from github.com"},
    },
    TimelineEventType.USER_QUESTION: {
        "type": "user_question", "content": "Which pod?", "created_at": AT,
        "metadata": {"from_agent": "coordinator", "call_id": "c3"},
    },
    TimelineEventType.EXECUTIVE_SUMMARY: {
        "type": "executive_summary", "content": "A bad config map.", "created_at": AT,
        "metadata": {"agent": "summarizer"},
    },
    TimelineEventType.DETECTION: {
        "type": "detection", "content": "Pod shop/api-0 restarted 12 times.", "created_at": AT,
        # The subject was stored as its text.
        "metadata": {"check": "crash_loop", "subject": "Pod shop/api-0", "severity": 1,
                     "evidence": ["gather-000"], "evidence_labels": ["E1"]},
    },
}  # fmt: skip


def test_every_event_type_has_one_model_in_the_union() -> None:
    [union, _] = typing.get_args(TimelineEvent)
    models = typing.get_args(union)
    covered = [typing.get_args(model.model_fields["type"].annotation)[0] for model in models]
    assert sorted(covered) == sorted(TimelineEventType)


@pytest.mark.parametrize("model", [LLMThinkingEvent, LLMResponseEvent, FinalAnalysisEvent])
def test_every_note_a_strategy_takes_is_a_field_of_the_events_that_carry_notes(
    model: type[LLMThinkingEvent | LLMResponseEvent | FinalAnalysisEvent],
) -> None:
    assert set(TurnNotes.__annotations__) <= set(model.model_fields)


def test_a_misspelt_field_is_refused_when_built_in_code_and_dropped_when_read() -> None:
    with pytest.raises(ValidationError):
        LLMToolCallEvent.model_validate({"call_idd": "c1"})
    stored = {"type": "llm_tool_call", "metadata": {"call_idd": "c1"}, "stage": 0, "agent": "a"}
    read = timeline_event(stored)
    assert read == LLMToolCallEvent(created_at=read.created_at)


@pytest.mark.parametrize("kind", list(TimelineEventType))
def test_a_document_written_before_the_typed_models_loads_as_its_type(
    kind: TimelineEventType,
) -> None:
    event = timeline_event(OLD_DOCUMENTS[kind])
    assert (event.type, event.created_at) == (kind, AT)
    assert event.content == OLD_DOCUMENTS[kind]["content"]


def test_old_documents_read_by_attribute_with_their_older_spellings_mapped() -> None:
    thinking = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.LLM_THINKING]), LLMThinkingEvent
    )
    assert (thinking.iteration, thinking.source, thinking.react_kind) == (1, "react", "action")
    assert thinking.native_tools_suppressed == ["google_search"]
    response = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.LLM_RESPONSE]), LLMResponseEvent
    )
    assert (response.cut_short, response.finish_reason) == ("truncated", "MAX_TOKENS")
    assert response.code_executions == [
        CodeExecution(code="print(1)", outcome="OUTCOME_OK", output="1\n")
    ]
    asked = expect(timeline_event(OLD_DOCUMENTS[TimelineEventType.LLM_TOOL_CALL]), LLMToolCallEvent)
    assert (asked.tool_name, asked.server_name) == ("pods_get", "kubernetes")
    assert (asked.arguments, asked.loop_detected, asked.repeats) == ('{"name": "api-0"}', True, 3)
    assert asked.unavailable_servers == {"prometheus": "connection refused"}
    result = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.MCP_TOOL_CALL]), MCPToolCallEvent
    )
    assert (result.arguments, result.gathered, result.collector) == ({"name": "api-0"}, True, "pod")
    assert (result.evidence_label, result.duration_ms) == ("E1", 12.5)
    summary = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.MCP_TOOL_SUMMARY]), MCPToolSummaryEvent
    )
    assert (summary.original_tokens, summary.summary_tokens) == (6000, 40)
    final = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.FINAL_ANALYSIS]), FinalAnalysisEvent
    )
    assert (final.agent, final.forced_conclusion) == ("investigator", "max_iterations")
    assert final.runbook_error == "HTTP 404 from github.com"
    asked_sub = expect(
        timeline_event(OLD_DOCUMENTS[TimelineEventType.USER_QUESTION]), UserQuestionEvent
    )
    assert (asked_sub.from_agent, asked_sub.call_id, asked_sub.chat) == ("coordinator", "c3", None)
    summary_event = timeline_event(OLD_DOCUMENTS[TimelineEventType.EXECUTIVE_SUMMARY])
    assert expect(summary_event, ExecutiveSummaryEvent).agent == "summarizer"
    found = expect(timeline_event(OLD_DOCUMENTS[TimelineEventType.DETECTION]), DetectionEvent)
    assert found.subject == EventSubject(kind="Pod", name="api-0", namespace="shop")
    assert (found.check, found.severity, found.evidence_labels) == ("crash_loop", 1, ["E1"])


def test_the_arguments_of_a_tool_request_given_as_an_object_read_as_their_text() -> None:
    document = {"type": "llm_tool_call", "metadata": {"arguments": {"name": "api-0"}}}
    assert expect(timeline_event(document), LLMToolCallEvent).arguments == '{"name": "api-0"}'


def test_the_tool_arguments_of_an_older_result_given_as_text_are_parsed() -> None:
    document = {"type": "mcp_tool_call", "metadata": {"arguments": '{"name": "api-0"}'}}
    assert expect(timeline_event(document), MCPToolCallEvent).arguments == {"name": "api-0"}
    broken = {"type": "mcp_tool_call", "metadata": {"arguments": "not json"}}
    assert expect(timeline_event(broken), MCPToolCallEvent).arguments == {"raw": "not json"}


def test_a_cluster_scoped_subject_stored_as_text_has_no_namespace() -> None:
    document = {"type": "detection", "metadata": {"subject": "Node worker-1"}}
    subject = expect(timeline_event(document), DetectionEvent).subject
    assert subject == EventSubject(kind="Node", name="worker-1") and str(subject) == "Node worker-1"


@pytest.mark.parametrize(
    "kind", [k for k in TimelineEventType if k is not TimelineEventType.DETECTION]
)
def test_a_stored_event_keeps_the_document_shape_it_was_read_from(kind: TimelineEventType) -> None:
    old = OLD_DOCUMENTS[kind]
    stored = timeline_event(old).model_dump()
    assert set(stored) == {"type", "content", "created_at", "metadata"}
    # Older spellings are written in seed 003's; keys no model knows are dropped.
    renamed = {"tool": "tool_name", "server": "server_name"}
    expected = {renamed.get(k, k): v for k, v in old["metadata"].items()}
    expected.pop("a_key_no_model_knows", None)
    assert stored["metadata"] == expected
    assert timeline_event(stored) == timeline_event(old)


def test_a_detection_is_stored_with_its_subject_as_kind_name_and_namespace() -> None:
    stored = timeline_event(OLD_DOCUMENTS[TimelineEventType.DETECTION]).model_dump(mode="json")
    assert stored["metadata"]["subject"] == {"kind": "Pod", "name": "api-0", "namespace": "shop"}
    assert stored["metadata"]["severity"] == 1


def test_tool_events_are_stored_with_the_keys_they_always_had() -> None:
    call = ToolCall(id="c1", name="kubernetes.pods_get", arguments='{"name": "api-0"}')
    result = ToolResult(
        call_id="c1", name="kubernetes.pods_get", arguments={"name": "api-0"},
        content="ok", full_content="ok", duration_ms=3.14159,
    )  # fmt: skip
    asked, answered = (e.model_dump(mode="json") for e in tool_events([call], [result]))
    assert asked["metadata"] == {
        "call_id": "c1", "tool_name": "pods_get", "server_name": "kubernetes",
        "arguments": '{"name": "api-0"}',
    }  # fmt: skip
    assert answered["metadata"] == {
        "call_id": "c1", "tool_name": "pods_get", "server_name": "kubernetes",
        "arguments": {"name": "api-0"}, "is_error": False, "duration_ms": 3.1,
        "shown_as": "full",
    }  # fmt: skip


# ─── decide is pure ───────────────────────────────────────────────────────────

SID = "0b7e5c1a-1111-4222-8333-444455556666"
CONFIG = load_config(Settings())


class FixedOutcome(SingleCallStrategy):
    """A strategy whose verdict is always the same outcome object (so a change to it shows)."""

    def __init__(self, outcome: IterationOutcome) -> None:
        self.outcome = outcome

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        return self.outcome


def test_decide_notes_the_setup_on_a_copy_and_changes_no_event_it_was_given() -> None:
    first = LLMThinkingEvent(content="hmm", iteration=1)
    outcome = IterationOutcome(next="complete", timeline=[first, FinalAnalysisEvent(content="x")])
    execution = AgentExecution(
        execution_id=execution_id_for(SID, 0, 0), session_id=SID, stage=0, agent="investigator",
        strategy="single-call", provider="default", step=1, iteration=0, max_iterations=1,
    )  # fmt: skip
    resolved = CONFIG.resolve("default", 0, 0)
    listing = ToolListing(unavailable={"prometheus": "connection refused"})
    state = IterationState(execution=execution, config=resolved, messages=[], tools=listing)
    session = Session(
        session_id=SID, alert_type="t", alert_data="d", chain_id="default", status="active",
        runbook_error="HTTP 404 from github.com",
    )  # fmt: skip
    strategy = FixedOutcome(outcome)
    turn = Turn(
        execution=execution, session=session, config=resolved, strategy=strategy,
        state=state, request=strategy.build_request(state), budget=0.0,
    )  # fmt: skip
    call = ModelCall(
        interaction=LLMInteraction(step=1, model="m", provider="p", request={}),
        result=LLMResult(text="x"),
    )
    decided = decide(turn, call, ToolRun())
    noted = decided.timeline[0]
    assert noted.unavailable_servers == {"prometheus": "connection refused"}
    assert noted.runbook_error == "HTTP 404 from github.com"
    assert decided.timeline[1:] == outcome.timeline[1:]
    # What the strategy returned is as it was: deciding again gives the same verdict.
    assert (first.unavailable_servers, first.runbook_error) == (None, None)
    assert outcome.timeline[0] is first
    assert decide(turn, call, ToolRun()) == decided


def test_the_cli_styles_every_event_type_by_its_own_rule() -> None:
    """``event_style`` matches on the models and ends in ``assert_never`` (mypy's check)."""
    styles = {kind: event_style(timeline_event(doc)) for kind, doc in OLD_DOCUMENTS.items()}
    assert set(styles) == set(TimelineEventType)
    assert styles[TimelineEventType.DETECTION] == "bold red"
    assert styles[TimelineEventType.FINAL_ANALYSIS] == "bold green"

"""The schema-actions strategy as pure functions: the schema per tool listing, and replies."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.native_thinking import NativeToolsStrategy
from tarsy.agent.strategies.schema_actions import (
    FINAL_VARIANT,
    SchemaActionsStrategy,
    action_schema,
    call_id_for,
    parse_action,
)
from tarsy.config.schema import LLMProviderConfig, ResolvedAgentConfig
from tarsy.engine.sub_agents import message_agent_tool
from tarsy.llm.base import LLMResult, ToolDefinition
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    LLMResponseEvent,
    LLMToolCallEvent,
    TimelineEventType,
    ToolCall,
)
from tarsy.tools.base import ToolListing, ToolResult
from tests.unit.timeline_events import expect

POD_LOG = ToolDefinition(
    name="cluster.pods_log",
    description="Read a pod's log",
    parameters={
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "previous": {"type": "boolean", "default": False},
        },
        "required": ["name"],
    },
)
EVENTS = ToolDefinition(
    name="cluster.events_list",
    description="List events",
    parameters={"type": "object", "properties": {"namespace": {"type": "string"}}},
)
STRATEGY = SchemaActionsStrategy()


def state(
    *,
    iteration: int = 0,
    max_iterations: int = 5,
    tool_choice: str = "auto",
    messages: list[ConversationMessage] | None = None,
) -> IterationState:
    execution = AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="investigator",
        strategy="schema-actions", provider="local", step=iteration + 1, iteration=iteration,
        max_iterations=max_iterations,
    )  # fmt: skip
    config = ResolvedAgentConfig(
        agent="investigator", instructions="Investigate.", custom_instructions="",
        iteration_strategy="schema-actions", provider_name="local",
        provider=LLMProviderConfig(
            type="openai-compatible", model="qwen", base_url="http://127.0.0.1:1/v1"
        ),
        max_iterations=max_iterations, mcp_servers=["cluster"], tool_choice=tool_choice,
    )  # fmt: skip
    return IterationState(
        execution=execution,
        config=config,
        messages=messages
        or [
            ConversationMessage(role="system", content="You are investigator."),
            ConversationMessage(role="user", content="Pod api-0 crash loops."),
        ],
        tools=ToolListing(tools=[POD_LOG, EVENTS]),
    )


def reply(**fields: Any) -> LLMResult:
    return LLMResult(text=json.dumps({"thought": "t", **fields}))


def ran(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(
        call_id=call.id, name=call.name, arguments=json.loads(call.arguments),
        content=content, full_content=content,
    )  # fmt: skip


# ─── the schema ───────────────────────────────────────────────────────────────


def test_the_schema_allows_each_offered_tool_with_its_own_arguments_or_the_final_answer() -> None:
    schema = action_schema([POD_LOG, EVENTS])
    assert len(schema["anyOf"]) == 3
    call_log = {"thought": "", "action": "call_tool", "tool": "cluster.pods_log",
                "arguments": {"name": "api-0"}}  # fmt: skip
    jsonschema.validate(call_log, schema)
    jsonschema.validate({"thought": "", "action": "final_answer", "answer": "done"}, schema)
    # The arguments of one tool are checked against that tool's schema.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**call_log, "arguments": {}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**call_log, "tool": "cluster.secrets_get"}, schema)


def test_the_schema_drops_annotations_that_say_nothing_about_arguments() -> None:
    [variant, _final] = action_schema([POD_LOG])["anyOf"]
    assert "$schema" not in variant["properties"]["arguments"]


def test_without_tools_the_schema_is_the_final_answer_alone() -> None:
    assert action_schema([]) == FINAL_VARIANT


def test_a_required_tool_choice_leaves_out_the_final_answer() -> None:
    request = STRATEGY.build_request(state(tool_choice="required"))
    assert request.response_schema is not None
    actions = {v["properties"]["action"]["enum"][0] for v in request.response_schema["anyOf"]}
    assert actions == {"call_tool"}


def test_a_named_tool_choice_offers_that_tool_only() -> None:
    request = STRATEGY.build_request(state(tool_choice="cluster.events_list"))
    assert request.response_schema == action_schema([EVENTS], final=False)


def test_the_request_offers_no_native_tools_and_lists_them_as_text() -> None:
    request = STRATEGY.build_request(state())
    assert request.tools == []
    assert request.response_schema == action_schema([POD_LOG, EVENTS])
    assert "cluster.pods_log" in request.messages[0].content
    assert '"action": "final_answer"' in request.messages[0].content


def test_the_conclusion_call_allows_only_the_final_answer() -> None:
    request = STRATEGY.build_request(state(iteration=5, max_iterations=5))
    assert request.response_schema == FINAL_VARIANT
    assert "last iteration" in request.messages[0].content


# ─── replies ──────────────────────────────────────────────────────────────────


def test_a_tool_call_reply_runs_that_tool_and_the_observation_joins_the_conversation() -> None:
    st = state()
    llm = reply(action="call_tool", tool="cluster.pods_log", arguments={"name": "api-0"})
    [call] = STRATEGY.tool_calls(st, llm)
    assert (call.id, call.name, json.loads(call.arguments)) == (
        call_id_for(st), "cluster.pods_log", {"name": "api-0"},
    )  # fmt: skip
    outcome = STRATEGY.on_result(st, llm, [ran(call, "FATAL: password authentication failed")])
    assert outcome.next == "continue"
    assert [m.role for m in outcome.messages] == ["assistant", "user"]
    assert "FATAL: password authentication failed" in outcome.messages[1].content
    types = [e.type for e in outcome.timeline]
    assert types == [
        TimelineEventType.LLM_THINKING, TimelineEventType.LLM_TOOL_CALL,
        TimelineEventType.MCP_TOOL_CALL,
    ]  # fmt: skip


def test_a_final_answer_reply_concludes_with_its_answer() -> None:
    outcome = STRATEGY.on_result(state(), reply(action="final_answer", answer="DB password"), [])
    assert (outcome.next, outcome.final_analysis) == ("complete", "DB password")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I think the database is down.", "not one JSON object"),
        ('{"action": "call_tool", "tool": "cluster.pods_log"', "not one JSON object"),
        ('{"thought": "", "action": "call_tool", "tool": "cluster.nodes_top", "arguments": {}}',
         "does not match the reply schema"),
        ('{"thought": "", "action": "call_tool", "tool": "cluster.pods_log", "arguments": {}}',
         "does not match the reply schema"),
    ],
)  # fmt: skip
def test_a_reply_that_breaks_the_schema_is_recorded_and_answered_with_feedback(
    text: str, problem: str
) -> None:
    st = state()
    llm = LLMResult(text=text)
    assert STRATEGY.tool_calls(st, llm) == []
    outcome = STRATEGY.on_result(st, llm, [])
    assert outcome.next == "continue"
    assert outcome.final_analysis is None
    [event] = outcome.timeline
    assert problem in (expect(event, LLMResponseEvent).schema_error or "")
    assert event.content == text
    assert outcome.messages[1].role == "user"
    assert "Reply again with exactly one JSON object" in outcome.messages[1].content


def test_a_fenced_json_reply_is_read() -> None:
    parsed = parse_action(
        '```json\n{"thought": "", "action": "final_answer", "answer": "x"}\n```',
        action_schema([POD_LOG]),
    )
    assert not isinstance(parsed, str) and parsed.answer == "x"


def test_a_repeated_call_with_default_arguments_is_a_loop_and_is_not_run() -> None:
    earlier = [
        ConversationMessage(role="system", content="You are investigator."),
        ConversationMessage(role="user", content="Pod api-0 crash loops."),
    ]
    for n, arguments in enumerate([{"name": "api-0"}, {"name": "api-0", "previous": False}]):
        action = {"thought": "", "action": "call_tool", "tool": "cluster.pods_log"}
        content = json.dumps({**action, "arguments": arguments})
        earlier.append(ConversationMessage(role="assistant", content=content))
        earlier.append(ConversationMessage(role="user", content=f"Observation {n}"))
    st = state(iteration=2, messages=earlier)
    llm = reply(action="call_tool", tool="cluster.pods_log", arguments={"name": "api-0"})
    assert STRATEGY.tool_calls(st, llm) == []
    outcome = STRATEGY.on_result(st, llm, [])
    assert "Not run" in outcome.messages[1].content
    assert expect(outcome.timeline[-1], LLMToolCallEvent).loop_detected is True


def test_native_tools_needs_function_calling_only() -> None:
    assert NativeToolsStrategy().requires.model_dump(exclude_defaults=True) == {
        "function_calling": True
    }


def test_message_agent_is_offered_and_called_like_any_tool() -> None:
    base = state()
    config = base.config.model_copy(update={"sub_agents": ["log-reader"]})
    tool = message_agent_tool(config, {})
    st = base.model_copy(
        update={"config": config, "tools": ToolListing(tools=[*base.tools.tools, tool])}
    )
    schema = STRATEGY.build_request(st).response_schema
    assert schema is not None
    offered = [v["properties"].get("tool", {}).get("enum", [None])[0] for v in schema["anyOf"]]
    assert "message_agent" in offered
    llm = reply(
        action="call_tool",
        tool="message_agent",
        arguments={"agent_name": "log-reader", "message": "Read api-0's previous log."},
    )
    [call] = STRATEGY.tool_calls(st, llm)
    assert call.name == "message_agent"
    answer = ran(call, "The log says: password authentication failed.")
    outcome = STRATEGY.on_result(st, llm, [answer])
    assert outcome.next == "continue"
    assert "password authentication failed" in outcome.messages[1].content


# ─── a final answer that is no analysis ───────────────────────────────────────


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("<your final analysis in Markdown>", "is the placeholder from the instructions"),
        ("  <the root cause>  ", "is the placeholder from the instructions"),
        ("", "the final answer is empty"),
        ("   ", "the final answer is empty"),
    ],
)
def test_a_final_answer_that_is_no_analysis_is_answered_with_feedback_not_concluded(
    answer: str, problem: str
) -> None:
    st = state()
    llm = reply(action="final_answer", answer=answer)
    outcome = STRATEGY.on_result(st, llm, [])
    assert outcome.next == "continue"
    assert outcome.final_analysis is None
    assert problem in (expect(outcome.timeline[-1], LLMResponseEvent).schema_error or "")
    assert outcome.timeline[-1].content == llm.text
    assert [m.role for m in outcome.messages] == ["assistant", "user"]
    assert problem in outcome.messages[1].content


def test_an_analysis_that_merely_mentions_angle_brackets_concludes() -> None:
    answer = "The probe calls <host>/healthz, which returns 503 since release 2.3.0."
    outcome = STRATEGY.on_result(state(), reply(action="final_answer", answer=answer), [])
    assert (outcome.next, outcome.final_analysis) == ("complete", answer)


def test_a_placeholder_in_the_conclusion_call_leaves_the_models_thought_as_the_analysis() -> None:
    st = state(iteration=5, max_iterations=5)
    llm = LLMResult(
        text=json.dumps(
            {
                "thought": "The pod's logs show the DB password was rejected.",
                "action": "final_answer",
                "answer": "<your final analysis in Markdown>",
            }
        )
    )
    outcome = STRATEGY.on_result(st, llm, [])
    assert outcome.next == "complete"
    assert outcome.final_analysis == "The pod's logs show the DB password was rejected."


def test_a_placeholder_and_no_thought_in_the_conclusion_call_fails_with_the_reason() -> None:
    st = state(iteration=5, max_iterations=5)
    llm = reply(action="final_answer", answer="<your final analysis in Markdown>", thought="")
    outcome = STRATEGY.on_result(st, llm, [])
    assert outcome.next == "fail"
    assert outcome.error is not None and "no final answer" in outcome.error.message

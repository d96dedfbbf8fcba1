"""Sub-agents' pure parts: config validation, planning a turn's messages, answers as results."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tarsy.agent.strategies.react_parser import parse_react
from tarsy.config import load_config
from tarsy.config.schema import ResolvedAgentConfig, sub_agent_cycles
from tarsy.engine.sub_agents import (
    MESSAGE_AGENT,
    Dispatch,
    PendingTurn,
    SubAgentAnswer,
    answer_of,
    message_agent_tool,
    offers_message_agent,
    plan_dispatch,
    split_timeline,
    sub_agent_id_for,
    turn_results,
)
from tarsy.errors import ConfigError
from tarsy.llm.base import LLMResult
from tarsy.llm.tool_names import from_function_name, is_canonical, to_function_name
from tarsy.models import (
    AgentExecution,
    ExecutionStatus,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    TimelineEvent,
    TimelineEventType,
    ToolCall,
)
from tarsy.settings import Settings
from tarsy.tools.base import ToolResult
from tests.unit.timeline_events import expect

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SETTINGS = Settings(GEMINI_API_KEY="k")


def parent(depth: int = 0) -> AgentExecution:
    return AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="coordinator",
        strategy="native-thinking", provider="default", status=ExecutionStatus.ACTIVE,
        depth=depth,
    )  # fmt: skip


def resolved(**overrides: object) -> ResolvedAgentConfig:
    config = load_config(SETTINGS).resolve("default", 0, 0)
    return config.model_copy(
        update={"sub_agents": ["logs", "metrics"], "max_concurrent_sub_agents": 2, **overrides}
    )


def call(call_id: str, **arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=MESSAGE_AGENT, arguments=json.dumps(arguments))


def conversation(status: ExecutionStatus) -> AgentExecution:
    return AgentExecution(
        execution_id="conv-1", session_id="s1", stage=0, agent="logs", role="sub_agent",
        strategy="native-thinking", provider="default", status=status,
    )  # fmt: skip


# ─── configuration ────────────────────────────────────────────────────────────


def test_cycles_are_found_once_each_with_their_path() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["d"], "e": ["a"]}
    assert sub_agent_cycles(graph) == [["a", "b", "c", "a"], ["d", "d"]]
    assert sub_agent_cycles({"a": ["b", "c"], "b": ["c"], "c": []}) == []


def test_a_circular_sub_agent_dependency_is_a_config_error() -> None:
    text = (
        "agents:\n"
        "  a: {instructions: x, sub_agents: [b]}\n"
        "  b: {instructions: y, sub_agents: [a]}\n"
    )
    with pytest.raises(ConfigError) as failure:
        load_config(SETTINGS, user_text=text)
    assert ("agents.a.sub_agents", "circular sub-agent dependency: a → b → a") in (
        failure.value.errors
    )


def test_an_unknown_sub_agent_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as failure:
        load_config(SETTINGS, user_text="agents:\n  a: {sub_agents: [nobody]}\n")
    assert ("agents.a.sub_agents.0", "unknown agent 'nobody'") in failure.value.errors


def test_a_sub_agent_resolves_from_its_definition_and_the_defaults() -> None:
    text = (
        "defaults: {max_concurrent_sub_agents: 3, sub_agent_timeout_seconds: 60}\n"
        "agents:\n"
        "  lead: {sub_agents: [helper], iteration_strategy: native-thinking}\n"
        "  helper: {instructions: help, iteration_strategy: react, max_iterations: 4}\n"
    )
    config = load_config(SETTINGS, user_text=text)
    helper = config.resolve_sub_agent("default", "helper")
    assert (helper.agent, helper.iteration_strategy, helper.max_iterations) == (
        "helper",
        "react",
        4,
    )
    assert (helper.max_concurrent_sub_agents, helper.sub_agent_timeout_seconds) == (3, 60.0)
    with pytest.raises(ConfigError, match="sub-agent 'ghost'"):
        config.resolve_sub_agent("default", "ghost")


# ─── the tool ─────────────────────────────────────────────────────────────────


def test_message_agent_keeps_its_name_on_the_wire() -> None:
    assert is_canonical(MESSAGE_AGENT)
    assert to_function_name(MESSAGE_AGENT) == from_function_name(MESSAGE_AGENT) == MESSAGE_AGENT
    assert to_function_name("kubernetes.pods_list") == "kubernetes__pods_list"


def test_the_tool_is_offered_within_the_depth_limit_and_names_the_agents() -> None:
    config = resolved()
    assert offers_message_agent(parent(depth=0), config)
    assert not offers_message_agent(parent(depth=1), config)  # default depth 1
    assert offers_message_agent(
        parent(depth=1), config.model_copy(update={"max_sub_agent_depth": 2})
    )
    assert not offers_message_agent(parent(), config.model_copy(update={"sub_agents": []}))
    agents = load_config(
        SETTINGS, user_text="agents:\n  logs: {description: Reads logs}\n  metrics: {}\n"
    ).agents
    tool = message_agent_tool(config, agents)
    assert tool.name == MESSAGE_AGENT and "- logs: Reads logs" in tool.description
    assert tool.parameters["properties"]["agent_name"]["enum"] == ["logs", "metrics"]


# ─── planning a turn's messages ───────────────────────────────────────────────


def test_new_conversations_get_ids_from_the_step_and_the_call() -> None:
    calls = [
        call("c1", agent_name="logs", message="logs?"),
        call("c2", agent_name="metrics", message="cpu?"),
    ]
    plan = plan_dispatch(parent(), resolved(), calls, 4, {})
    assert plan.refused == []
    assert [(d.call_id, d.agent_name, d.conversation_id, d.new) for d in plan.dispatches] == [
        ("c1", "logs", sub_agent_id_for("s1-s00-a00", 4, 0), True),
        ("c2", "metrics", "s1-s00-a00-sub0004-01", True),
    ]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"agent_name": "db", "message": "hi"}, "unknown agent 'db'; ask logs, metrics"),
        ({"message": "hi"}, "give either agent_name (a new conversation) or conversation_id"),
        ({"agent_name": "logs", "conversation_id": "x", "message": "hi"}, "give either"),
        ({"agent_name": "logs", "message": ""}, "message: String should have at least 1"),
        ({"conversation_id": "nope", "message": "hi"}, "no conversation 'nope'"),
    ],
)
def test_bad_calls_are_refused_with_a_reason_the_model_reads(
    arguments: dict[str, str], reason: str
) -> None:
    plan = plan_dispatch(parent(), resolved(), [call("c1", **arguments)], 1, {})
    assert plan.dispatches == []
    [refused] = plan.refused
    assert refused.is_error and refused.call_id == "c1" and reason in (refused.error or "")


def test_calls_beyond_the_concurrency_limit_are_refused() -> None:
    calls = [call(f"c{n}", agent_name="logs", message=str(n)) for n in range(3)]
    plan = plan_dispatch(parent(), resolved(), calls, 1, {})
    assert [d.call_id for d in plan.dispatches] == ["c0", "c1"]
    [refused] = plan.refused
    assert "at most 2 sub-agent messages at once" in (refused.error or "")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (ExecutionStatus.ACTIVE, "is still answering"),
        (ExecutionStatus.FAILED, "has ended (failed); start a new one"),
        (ExecutionStatus.CANCELLED, "has ended (cancelled)"),
    ],
)
def test_a_follow_up_goes_only_to_a_conversation_that_answered(
    status: ExecutionStatus, reason: str
) -> None:
    follow_up = call("c1", conversation_id="conv-1", message="and then?")
    plan = plan_dispatch(parent(), resolved(), [follow_up], 2, {"conv-1": conversation(status)})
    assert reason in (plan.refused[0].error or "")


def test_a_follow_up_continues_the_conversation_once_per_turn() -> None:
    calls = [
        call("c1", conversation_id="conv-1", message="which pod?"),
        call("c2", conversation_id="conv-1", message="and the node?"),
    ]
    plan = plan_dispatch(
        parent(), resolved(), calls, 2, {"conv-1": conversation(ExecutionStatus.COMPLETED)}
    )
    [sent] = plan.dispatches
    assert (sent.call_id, sent.agent_name, sent.conversation_id, sent.new) == (
        "c1",
        "logs",
        "conv-1",
        False,
    )
    assert "still answering" in (plan.refused[0].error or "")


# ─── answers ──────────────────────────────────────────────────────────────────


def dispatch(call_id: str) -> Dispatch:
    return Dispatch(
        call_id=call_id, agent_name="logs", conversation_id=f"conv-{call_id}", message="?", new=True
    )


def test_a_waiting_turn_gets_every_result_in_call_order() -> None:
    mcp = ToolResult(call_id="t1", name="k8s.pods", content="3 pods", full_content="3 pods")
    result = LLMResult(
        tool_calls=[
            ToolCall(
                id="c1", name=MESSAGE_AGENT, arguments='{"agent_name": "logs", "message": "?"}'
            ),
            ToolCall(id="t1", name="k8s.pods"),
            ToolCall(
                id="c2", name=MESSAGE_AGENT, arguments='{"agent_name": "logs", "message": "?"}'
            ),
        ]
    )
    pending = PendingTurn(
        step=3, result=result, tool_results=[mcp], dispatches=[dispatch("c1"), dispatch("c2")]
    )
    answered = SubAgentAnswer(
        call_id="c1", conversation_id="conv-c1", agent_name="logs",
        status=ExecutionStatus.COMPLETED, response="OOMKilled", answered_at=NOW,
    )  # fmt: skip
    results = turn_results(pending, {"c1": answered}, timeout=30)
    assert [r.call_id for r in results] == ["c1", "t1", "c2"]
    assert json.loads(results[0].content) == {
        "conversation_id": "conv-c1",
        "agent_name": "logs",
        "response": "OOMKilled",
        "is_complete": False,
    }
    assert results[0].arguments == {"agent_name": "logs", "message": "?"}
    silent = json.loads(results[2].content)
    assert results[2].is_error and silent["is_complete"] is True
    assert silent["error"] == "logs did not answer within 30s; the conversation was cancelled"


def test_a_failed_or_cancelled_sub_agent_answers_with_its_error() -> None:
    ended = conversation(ExecutionStatus.CANCELLED).model_copy(
        update={"parent_tool_call_id": "c9", "final_analysis": None}
    )
    answer = answer_of(ended, NOW)
    assert (answer.call_id, answer.error) == ("c9", "the sub-agent cancelled")
    pending = PendingTurn(
        step=1, result=LLMResult(tool_calls=[ToolCall(id="c9", name=MESSAGE_AGENT)]),
        dispatches=[dispatch("c9")],
    )  # fmt: skip
    [result] = turn_results(pending, {"c9": answer}, timeout=30)
    assert result.is_error and json.loads(result.content)["error"] == "the sub-agent cancelled"


def test_the_timeline_shows_the_messages_first_and_the_answers_when_they_are_in() -> None:
    events: list[TimelineEvent] = [
        LLMThinkingEvent(content="ask logs"),
        LLMToolCallEvent(call_id="c1"),
        MCPToolCallEvent(call_id="c1"),
        LLMToolCallEvent(call_id="t1"),
        MCPToolCallEvent(call_id="t1"),
    ]
    first, later = split_timeline(events, [dispatch("c1")])
    assert [(e.type, getattr(e, "call_id", None)) for e in first] == [
        (TimelineEventType.LLM_THINKING, None),
        (TimelineEventType.LLM_TOOL_CALL, "c1"),
        (TimelineEventType.LLM_TOOL_CALL, "t1"),
        (TimelineEventType.MCP_TOOL_CALL, "t1"),
    ]
    assert expect(first[1], LLMToolCallEvent).sub_agent == "logs"
    [answer] = later
    answered = expect(answer, MCPToolCallEvent)
    assert (answered.call_id, answered.sub_agent, answered.conversation_id) == (
        "c1", "logs", "conv-c1",
    )  # fmt: skip
    assert events[1] == LLMToolCallEvent(call_id="c1", created_at=events[1].created_at)


def test_a_react_agent_can_message_a_sub_agent() -> None:
    text = (
        'Thought: ask\nAction: message_agent\nAction Input: {"agent_name": "logs", "message": "hi"}'
    )
    parsed = parse_react(text, [MESSAGE_AGENT, "k8s.pods"])
    assert (parsed.kind, parsed.action, parsed.error) == ("action", MESSAGE_AGENT, None)

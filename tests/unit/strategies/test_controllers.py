"""The controllers as pure functions: (state, LLM result, tool results) → outcome."""

from __future__ import annotations

import json

import pytest

from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.native_thinking import NativeThinkingStrategy
from tarsy.agent.strategies.react import ReActStrategy, call_id_for
from tarsy.agent.strategies.single_call import SingleCallStrategy
from tarsy.config.schema import LLMProviderConfig, ResolvedAgentConfig
from tarsy.llm.base import LLMResult, ToolDefinition
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    ToolCall,
)
from tarsy.tools.base import ToolListing, ToolResult
from tests.unit.timeline_events import expect

POD_GET = ToolDefinition(
    name="cluster.pods_get",
    description="Get one pod",
    parameters={
        "type": "object",
        "properties": {"namespace": {"type": "string"}, "name": {"type": "string"}},
        "required": ["name"],
    },
)


def state(
    *,
    strategy: str,
    iteration: int = 0,
    max_iterations: int = 5,
    signatures: dict[str, str] | None = None,
) -> IterationState:
    execution = AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="investigator",
        strategy=strategy, provider="default", step=iteration + 1, iteration=iteration,
        max_iterations=max_iterations,
    )  # fmt: skip
    config = ResolvedAgentConfig(
        agent="investigator", instructions="Investigate.", custom_instructions="",
        iteration_strategy=strategy,
        provider_name="default", provider=LLMProviderConfig(backend="google-native", model="m"),
        max_iterations=max_iterations, mcp_servers=["cluster"],
    )  # fmt: skip
    return IterationState(
        execution=execution,
        config=config,
        messages=[
            ConversationMessage(role="system", content="You are investigator."),
            ConversationMessage(role="user", content="Pod api-0 crash loops."),
        ],
        provider_state=signatures or {},
        tools=ToolListing(tools=[POD_GET]),
    )


def result_for(call: ToolCall, content: str, *, error: bool = False) -> ToolResult:
    return ToolResult(
        call_id=call.id, name=call.name, arguments=json.loads(call.arguments),
        content=content, full_content=content, is_error=error,
    )  # fmt: skip


# ─── native thinking ──────────────────────────────────────────────────────────


def test_native_request_carries_tools_signatures_and_guidance() -> None:
    st = state(strategy="native-thinking", signatures={"model-turn-0000": "{}"})
    request = NativeThinkingStrategy().build_request(st)
    assert [t.name for t in request.tools] == ["cluster.pods_get"]
    assert request.thought_signatures == {"model-turn-0000": "{}"}
    assert request.messages[0].content.startswith("You are investigator.")
    assert "final analysis" in request.messages[0].content
    # Guidance is added to the request only; the stored conversation is unchanged.
    assert st.messages[0].content == "You are investigator."


def test_native_tool_calls_continue_with_tool_messages_and_events() -> None:
    call = ToolCall(id="c1", name="cluster.pods_get", arguments='{"name": "api-0"}')
    llm = LLMResult(text="", thinking="Check the pod.", tool_calls=[call])
    tool = result_for(call, "status: CrashLoopBackOff")
    outcome = NativeThinkingStrategy().on_result(state(strategy="native-thinking"), llm, [tool])

    assert outcome.next == "continue"
    assert [m.role for m in outcome.messages] == ["assistant", "tool"]
    assert outcome.messages[0].tool_calls == [call]
    assert outcome.messages[1].tool_call_id == "c1"
    assert outcome.messages[1].content == "status: CrashLoopBackOff"
    assert [e.type.value for e in outcome.timeline] == [
        "llm_thinking", "llm_tool_call", "mcp_tool_call",
    ]  # fmt: skip
    # Seed 003's metadata names: tool_name, server_name, arguments; source on thinking.
    thought, asked, answered = outcome.timeline
    assert expect(thought, LLMThinkingEvent).source == "native"
    asked, answered = expect(asked, LLMToolCallEvent), expect(answered, MCPToolCallEvent)
    for event in (asked, answered):
        assert (event.tool_name, event.server_name) == ("pods_get", "cluster")
        stored = event.model_dump()["metadata"]
        assert "tool" not in stored and "server" not in stored
    # As the model wrote them on the request, parsed on the result.
    assert asked.arguments == '{"name": "api-0"}'
    assert answered.arguments == {"name": "api-0"}


def test_native_turn_without_calls_is_the_final_analysis() -> None:
    outcome = NativeThinkingStrategy().on_result(
        state(strategy="native-thinking"), LLMResult(text=" Root cause: bad config. "), []
    )
    assert outcome.next == "complete"
    assert outcome.final_analysis == "Root cause: bad config."
    assert [e.type.value for e in outcome.timeline] == ["final_analysis"]


def test_native_conclusion_call_offers_no_tools_and_never_runs_a_call() -> None:
    conclusion = state(strategy="native-thinking", iteration=5, max_iterations=5)
    strategy = NativeThinkingStrategy()
    request = strategy.build_request(conclusion)
    assert request.tools == []
    assert request.tool_choice == "none"
    assert "last iteration" in request.messages[0].content
    call = ToolCall(id="c1", name="cluster.pods_get", arguments='{"name": "api-0"}')
    answer = LLMResult(text="Root cause: the config map.", tool_calls=[call])
    assert strategy.tool_calls(conclusion, answer) == []
    outcome = strategy.on_result(conclusion, answer, [])
    assert (outcome.next, outcome.final_analysis) == ("complete", "Root cause: the config map.")
    final = expect(outcome.timeline[-1], FinalAnalysisEvent)
    assert final.forced_conclusion == "max_iterations"
    assert final.ignored_tool_calls == ["cluster.pods_get"]
    assert [m.tool_calls for m in outcome.messages] == [[]]  # no call joins the conversation


def test_native_conclusion_call_without_any_text_fails() -> None:
    conclusion = state(strategy="native-thinking", iteration=5, max_iterations=5)
    call = ToolCall(id="c1", name="cluster.pods_get", arguments='{"name": "api-0"}')
    outcome = NativeThinkingStrategy().on_result(conclusion, LLMResult(tool_calls=[call]), [])
    assert outcome.next == "fail"
    assert outcome.error is not None and outcome.error.code == "max_iterations"


@pytest.mark.parametrize(("mode", "expected"), [("conclude", "continue"), ("pause", "pause")])
def test_native_at_the_limit_follows_on_max_iterations(mode: str, expected: str) -> None:
    at_limit = state(strategy="native-thinking", iteration=4, max_iterations=5)
    at_limit.config = at_limit.config.model_copy(update={"on_max_iterations": mode})
    call = ToolCall(id="c1", name="cluster.pods_get", arguments='{"name": "api-0"}')
    outcome = NativeThinkingStrategy().on_result(
        at_limit, LLMResult(tool_calls=[call]), [result_for(call, "x")]
    )
    assert outcome.next == expected
    assert NativeThinkingStrategy().build_request(at_limit).tools  # the limit call has tools


# ─── ReAct ────────────────────────────────────────────────────────────────────

ACTION = """Thought: I should look at the pod.
Action: cluster.pods_get
Action Input: {"namespace": "checkout", "name": "api-0"}"""


def test_react_request_lists_tools_as_text_not_functions() -> None:
    request = ReActStrategy().build_request(state(strategy="react"))
    assert request.tools == []
    system = request.messages[0].content
    assert "cluster.pods_get" in system and "Action Input:" in system


def test_react_action_becomes_one_deterministic_tool_call() -> None:
    st = state(strategy="react")
    [call] = ReActStrategy().tool_calls(st, LLMResult(text=ACTION))
    assert call.name == "cluster.pods_get"
    assert json.loads(call.arguments) == {"namespace": "checkout", "name": "api-0"}
    assert (
        call.id == call_id_for(st) == ReActStrategy().tool_calls(st, LLMResult(text=ACTION))[0].id
    )


def test_react_observation_goes_back_as_a_user_message() -> None:
    st = state(strategy="react")
    [call] = ReActStrategy().tool_calls(st, LLMResult(text=ACTION))
    outcome = ReActStrategy().on_result(
        st, LLMResult(text=ACTION), [result_for(call, "Ready: 0/1")]
    )
    assert outcome.next == "continue"
    assert [m.role for m in outcome.messages] == ["assistant", "user"]
    assert outcome.messages[1].content == "Observation: Ready: 0/1"
    assert [e.type.value for e in outcome.timeline] == [
        "llm_thinking", "llm_tool_call", "mcp_tool_call",
    ]  # fmt: skip


def test_react_final_answer_completes() -> None:
    text = "Thought: I know enough.\nFinal Answer: The DB_URL key is missing."
    outcome = ReActStrategy().on_result(state(strategy="react"), LLMResult(text=text), [])
    assert outcome.next == "complete"
    assert outcome.final_analysis == "The DB_URL key is missing."


MALFORMED = [
    ("Thought: hmm, not sure yet.", "neither an Action"),
    ("Thought: x\nAction: cluster.nodes_top\nAction Input: {}", "Unknown tool 'cluster.nodes_top'"),
    ("Thought: x\nAction: pods_get\nAction Input: {}", "'pods_get' is not a valid tool name"),
    ("Thought: x\nAction: cluster.pods_get\nAction Input: [1, 2]", "must be a JSON object"),
    ("Thought: x\nAction: cluster.pods_get", "no Action Input"),
    ("Just some prose without any sections.", "not in ReAct format"),
    ('Action Input: {"name": "a"}', "no Action, so the tool to call is unknown"),
]


@pytest.mark.parametrize(("text", "expected"), MALFORMED)
def test_react_malformed_answers_get_specific_feedback_and_recover(
    text: str, expected: str
) -> None:
    strategy = ReActStrategy()
    st = state(strategy="react")
    assert strategy.tool_calls(st, LLMResult(text=text)) == []
    outcome = strategy.on_result(st, LLMResult(text=text), [])
    assert outcome.next == "continue"
    feedback = outcome.messages[1].content
    assert feedback.startswith("Observation: Error in reasoning")
    assert expected in feedback
    assert "Action Input:" in feedback  # the format reminder
    assert expect(outcome.timeline[-1], LLMResponseEvent).error

    # The next iteration, with the feedback in the conversation, recovers.
    following = state(strategy="react", iteration=1)
    following.messages = [*st.messages, *outcome.messages]
    [call] = strategy.tool_calls(following, LLMResult(text=ACTION))
    assert call.name == "cluster.pods_get"
    done = strategy.on_result(following, LLMResult(text="Thought: done.\nFinal Answer: fixed"), [])
    assert (done.next, done.final_analysis) == ("complete", "fixed")


def test_single_call_records_the_answer_once_as_final_analysis() -> None:
    st = state(strategy="single-call")
    request = SingleCallStrategy().build_request(st)
    assert (request.tools, request.tool_choice) == ([], "none")
    outcome = SingleCallStrategy().on_result(st, LLMResult(text="All good.", thinking="t"), [])
    # Seed 003: the final answer is final_analysis alone, not also an llm_response.
    assert [e.type.value for e in outcome.timeline] == ["llm_thinking", "final_analysis"]
    assert expect(outcome.timeline[0], LLMThinkingEvent).source == "native"
    assert outcome.final_analysis == "All good."

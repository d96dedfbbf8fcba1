"""The agent loop's rules as pure functions: the conclusion call on every strategy,
tool_choice, loop detection, and code executions on the timeline."""

from __future__ import annotations

import pytest

from tarsy.agent.strategies.base import (
    IterationState,
    LoopHit,
    budget_crossed,
    call_key,
    conclusion_reason,
    detect_loops,
    looped_in,
    tool_choice_for,
)
from tarsy.agent.strategies.native_thinking import NativeThinkingStrategy, past_calls
from tarsy.agent.strategies.react import FORCED_ANSWER_NOTE, ReActStrategy
from tarsy.agent.strategies.registry import get_strategy
from tarsy.llm.base import CodeExecutionChunk, LLMResult
from tarsy.models import (
    CodeExecution,
    ConversationMessage,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    ToolCall,
)
from tests.unit.timeline_events import expect

from .test_controllers import result_for, state

GET = '{"name": "api-0", "namespace": "checkout"}'
GET_REORDERED = '{"namespace": "checkout", "name": "api-0"}'


def configured(st: IterationState, **config: object) -> IterationState:
    st.config = st.config.model_copy(update=config)
    return st


def call(n: int, arguments: str = GET, name: str = "cluster.pods_get") -> ToolCall:
    return ToolCall(id=f"c{n}", name=name, arguments=arguments)


def native_turns(calls: list[ToolCall]) -> list[ConversationMessage]:
    """Earlier native turns: one call each, with its result."""
    messages: list[ConversationMessage] = []
    for c in calls:
        messages.append(ConversationMessage(role="assistant", tool_calls=[c]))
        messages.append(
            ConversationMessage(
                role="tool", content="Ready: 0/1", tool_call_id=c.id, tool_name=c.name
            )
        )
    return messages


def native_state(history: list[ToolCall], **kwargs: object) -> IterationState:
    st = state(strategy="native-thinking", iteration=len(history), max_iterations=20)
    st.messages = [*st.messages, *native_turns(history)]
    return configured(st, **kwargs) if kwargs else st


# ─── the conclusion call, strategy by strategy ────────────────────────────────


@pytest.mark.parametrize(
    "name", ["single-call", "synthesis", "synthesis-native-thinking", "executive-summary"]
)
def test_one_call_strategies_offer_no_tools_and_say_none(name: str) -> None:
    request = get_strategy(name).build_request(state(strategy="single-call"))
    assert (request.tools, request.tool_choice) == ([], "none")


REACT_ACTION = (
    'Thought: I should look at the logs.\nAction: cluster.pods_get\nAction Input: {"name": "api-0"}'
)


def test_react_conclusion_lists_no_tools_and_asks_for_the_final_answer_only() -> None:
    strategy = ReActStrategy()
    conclusion = state(strategy="react", iteration=5, max_iterations=5)
    request = strategy.build_request(conclusion)
    system = request.messages[0].content
    assert "cluster.pods_get" not in system
    assert "Action Input" not in system and "Action:" not in system
    assert "Final Answer:" in system and "no tool will run" in system
    assert (request.tools, request.tool_choice) == ([], "none")
    # Before the conclusion, the tools are listed and the call says nothing.
    before = strategy.build_request(state(strategy="react", iteration=4, max_iterations=5))
    assert "cluster.pods_get" in before.messages[0].content
    assert before.tool_choice is None


def test_react_action_in_the_conclusion_is_a_forced_final_answer_never_a_call() -> None:
    strategy = ReActStrategy()
    conclusion = state(strategy="react", iteration=5, max_iterations=5)
    answer = LLMResult(text=REACT_ACTION)
    assert strategy.tool_calls(conclusion, answer) == []
    outcome = strategy.on_result(conclusion, answer, [])
    assert outcome.next == "complete"
    assert outcome.final_analysis is not None
    assert outcome.final_analysis.startswith(FORCED_ANSWER_NOTE)
    assert "I should look at the logs." in outcome.final_analysis
    assert "Action" not in outcome.final_analysis
    final = expect(outcome.timeline[-1], FinalAnalysisEvent)
    assert final.forced_conclusion == "max_iterations"
    assert final.ignored_tool_calls == ["cluster.pods_get"]
    assert not any(e.type.value in ("llm_tool_call", "mcp_tool_call") for e in outcome.timeline)


def test_react_final_answer_in_the_conclusion_is_taken_as_written() -> None:
    conclusion = state(strategy="react", iteration=5, max_iterations=5)
    text = "Thought: enough.\nFinal Answer: DB_URL is missing."
    outcome = ReActStrategy().on_result(conclusion, LLMResult(text=text), [])
    assert (outcome.next, outcome.final_analysis) == ("complete", "DB_URL is missing.")
    assert expect(outcome.timeline[-1], FinalAnalysisEvent).forced_conclusion == "max_iterations"


def test_react_conclusion_with_nothing_but_an_action_fails() -> None:
    conclusion = state(strategy="react", iteration=5, max_iterations=5)
    text = 'Action: cluster.pods_get\nAction Input: {"name": "api-0"}'
    outcome = ReActStrategy().on_result(conclusion, LLMResult(text=text), [])
    assert outcome.next == "fail"
    assert outcome.error is not None and outcome.error.code == "max_iterations"


# ─── tool_choice ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("configured_choice", "sent"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("cluster.pods_get", "cluster.pods_get"),
        ("cluster.pods_delete", "auto"),  # not among the listed tools
    ],
)
def test_native_sends_the_agents_tool_choice(configured_choice: str, sent: str) -> None:
    st = configured(state(strategy="native-thinking"), tool_choice=configured_choice)
    request = NativeThinkingStrategy().build_request(st)
    assert request.tool_choice == sent
    assert [t.name for t in request.tools] == ["cluster.pods_get"]  # offered for context


def test_native_under_tool_choice_none_never_runs_returned_calls() -> None:
    st = configured(state(strategy="native-thinking"), tool_choice="none")
    answer = LLMResult(text="It is the config map.", tool_calls=[call(1)])
    assert NativeThinkingStrategy().tool_calls(st, answer) == []
    outcome = NativeThinkingStrategy().on_result(st, answer, [])
    assert (outcome.next, outcome.final_analysis) == ("complete", "It is the config map.")
    final = expect(outcome.timeline[-1], FinalAnalysisEvent)
    assert final.ignored_tool_calls == ["cluster.pods_get"]
    assert final.forced_conclusion is None


def test_react_under_tool_choice_none_lists_no_tools_and_runs_nothing() -> None:
    st = configured(state(strategy="react"), tool_choice="none")
    request = ReActStrategy().build_request(st)
    assert "cluster.pods_get" not in request.messages[0].content
    assert request.tool_choice == "none"
    assert ReActStrategy().tool_calls(st, LLMResult(text=REACT_ACTION)) == []


def test_conclusion_overrides_the_agents_tool_choice() -> None:
    st = configured(
        state(strategy="native-thinking", iteration=5, max_iterations=5), tool_choice="required"
    )
    assert tool_choice_for(st, conclusion_reason(st, [])) == "none"


# ─── loop detection ───────────────────────────────────────────────────────────


def test_call_key_ignores_argument_order_and_spacing() -> None:
    assert call_key(call(1, GET)) == call_key(call(2, GET_REORDERED))
    assert call_key(call(1, GET)) != call_key(call(2, '{"name": "api-1"}'))
    assert call_key(call(1, "not json")) == ("cluster.pods_get", "not json")


def test_looped_in_counts_calls_from_the_thresholdth_repeat_on() -> None:
    history = [call(1), call(2, GET_REORDERED), call(3, '{"name": "x"}'), call(4), call(5)]
    assert looped_in(history, 3) == [3, 4]
    assert looped_in(history, 0) == []


def test_third_identical_call_is_not_run_and_gets_a_warning() -> None:
    strategy = NativeThinkingStrategy()
    st = native_state([call(1), call(2, GET_REORDERED)])
    fresh = call(4, '{"name": "api-1"}')
    answer = LLMResult(tool_calls=[call(3), fresh])
    # Only the call that does not repeat runs.
    assert strategy.tool_calls(st, answer) == [fresh]
    outcome = strategy.on_result(st, answer, [result_for(fresh, "Ready: 1/1")])
    assert outcome.next == "continue"
    assistant, looped, ran = outcome.messages
    assert assistant.tool_calls == [call(3), fresh]  # the model's turn, whole
    assert looped.tool_call_id == "c3" and looped.content.startswith("Not run:")
    assert "already called 2 times" in looped.content
    assert ran.content == "Ready: 1/1"
    asked = [e for e in outcome.timeline if isinstance(e, LLMToolCallEvent)]
    [looped_event] = [e for e in asked if e.loop_detected]
    assert (looped_event.call_id, looped_event.repeats) == ("c3", 3)
    assert looped_event.observation == looped.content
    mcp_calls = [e.call_id for e in outcome.timeline if isinstance(e, MCPToolCallEvent)]
    assert mcp_calls == ["c4"]  # the looped call never reached a server
    # One loop so far: the next call may still use tools.
    following = native_state([call(1), call(2), call(3), fresh])
    assert conclusion_reason(following, past_calls(following)) is None
    assert NativeThinkingStrategy().build_request(following).tools


def test_a_second_loop_forces_the_conclusion_on_the_next_call() -> None:
    strategy = NativeThinkingStrategy()
    history = [call(1), call(2), call(3)]  # the third got the warning
    st = native_state(history)
    outcome = strategy.on_result(st, LLMResult(tool_calls=[call(4)]), [])
    [_, stop] = outcome.messages
    assert "your next answer must be your final analysis" in stop.content
    assert outcome.next == "continue"

    conclusion = native_state([*history, call(4)])
    assert conclusion_reason(conclusion, past_calls(conclusion)) == "loop_detected"
    request = strategy.build_request(conclusion)
    assert (request.tools, request.tool_choice) == ([], "none")
    assert "repeating the same function calls" in request.messages[0].content
    answer = LLMResult(text="The pod is not ready: bad config.", tool_calls=[call(5)])
    assert strategy.tool_calls(conclusion, answer) == []
    done = strategy.on_result(conclusion, answer, [])
    assert (done.next, done.final_analysis) == ("complete", "The pod is not ready: bad config.")
    assert expect(done.timeline[-1], FinalAnalysisEvent).forced_conclusion == "loop_detected"


def test_loop_threshold_is_configurable_and_zero_turns_it_off() -> None:
    history = [call(1), call(2)]
    two = native_state(history, loop_detection_threshold=2)
    assert set(detect_loops(two, history, [call(3)])) == {"c3"}
    off = native_state(history, loop_detection_threshold=0)
    assert detect_loops(off, history, [call(3)]) == {}
    many = native_state([call(n) for n in range(10)], loop_detection_threshold=0)
    assert conclusion_reason(many, past_calls(many)) is None


def test_identical_calls_in_one_turn_count_too() -> None:
    st = native_state([])
    hits = detect_loops(st, [], [call(1), call(2), call(3), call(4)])
    assert hits == {
        "c3": LoopHit(repeats=3, final=False, observation=hits["c3"].observation),
        "c4": LoopHit(repeats=4, final=True, observation=hits["c4"].observation),
    }


def react_history(times: int) -> list[ConversationMessage]:
    turns: list[ConversationMessage] = []
    for _ in range(times):
        turns.append(ConversationMessage(role="assistant", content=REACT_ACTION))
        turns.append(ConversationMessage(role="user", content="Observation: Ready: 0/1"))
    return turns


def test_react_loops_are_detected_from_the_answers_text() -> None:
    strategy = ReActStrategy()
    st = state(strategy="react", iteration=2, max_iterations=20)
    st.messages = [*st.messages, *react_history(2)]
    answer = LLMResult(text=REACT_ACTION)
    assert strategy.tool_calls(st, answer) == []
    outcome = strategy.on_result(st, answer, [])
    assert outcome.next == "continue"
    assert outcome.messages[1].content.startswith("Observation: Not run:")
    [event] = [e for e in outcome.timeline if isinstance(e, LLMToolCallEvent)]
    assert event.loop_detected is True

    # After a second loop, the next request is the tool-less conclusion.
    st.messages = [*st.messages, *react_history(2)]
    request = strategy.build_request(st)
    assert "cluster.pods_get" not in request.messages[0].content
    assert "repeating the same tool calls" in request.messages[0].content


# ─── code executions ──────────────────────────────────────────────────────────

CODE = CodeExecutionChunk(code="print(6 * 7)", outcome="OUTCOME_OK", output="42\n")


@pytest.mark.parametrize("name", ["single-call", "native-thinking", "synthesis-native-thinking"])
def test_code_executions_are_shown_on_the_timeline(name: str) -> None:
    st = state(strategy=name)
    result = LLMResult(text="The answer is 42.", code_executions=[CODE])
    outcome = get_strategy(name).on_result(st, result, [])
    types = [e.type.value for e in outcome.timeline]
    assert types == ["llm_response", "final_analysis"]
    shown = expect(outcome.timeline[0], LLMResponseEvent)
    assert shown.source == "code_execution"
    assert shown.code_executions == [
        CodeExecution(code="print(6 * 7)", outcome="OUTCOME_OK", output="42\n")
    ]
    assert "print(6 * 7)" in shown.content and "42" in shown.content
    assert outcome.final_analysis == "The answer is 42."


# ─── budgets ──────────────────────────────────────────────────────────────────


def test_budget_crossed_names_what_was_spent() -> None:
    config = state(strategy="native-thinking").config
    assert budget_crossed(10**9, 10**6, config) is None  # no budget: unlimited
    tokens = config.model_copy(update={"max_tokens": 1000})
    assert budget_crossed(999, 0, tokens) is None
    assert budget_crossed(1000, 0, tokens) == (
        "the session used 1,000 tokens of its 1,000-token budget"
    )
    cost = config.model_copy(update={"max_cost_usd": 0.5})
    assert budget_crossed(10**9, 0.49, cost) is None
    assert budget_crossed(0, 0.5, cost) == "the session spent $0.5000 of its $0.5 budget"


@pytest.mark.parametrize("name", ["native-thinking", "react"])
def test_a_spent_budget_makes_the_call_a_conclusion_that_says_it_was_cut_short(
    name: str,
) -> None:
    strategy = get_strategy(name)
    st = state(strategy=name, iteration=1, max_iterations=20)
    st.budget_note = "the session used 120 tokens of its 100-token budget"
    request = strategy.build_request(st)
    assert (request.tools, request.tool_choice) == ([], "none")
    assert "budget is spent" in request.messages[0].content
    assert "cluster.pods_get" not in request.messages[0].content  # ReAct lists no tools
    text = (
        "Final Answer: The pod is misconfigured."
        if name == "react"
        else "The pod is misconfigured."
    )
    outcome = strategy.on_result(st, LLMResult(text=text), [])
    assert outcome.next == "complete"
    assert outcome.final_analysis == (
        "_(Cut short: the session used 120 tokens of its 100-token budget.)_\n\n"
        "The pod is misconfigured."
    )
    assert expect(outcome.timeline[-1], FinalAnalysisEvent).forced_conclusion == "budget"

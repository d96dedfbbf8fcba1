"""``compact``: the small model's path: a tool-less answer first, a bounded follow-up if asked.

Design constraint: a small model follows evidence but does not plan a search
(:mod:`tarsy.agent.compact`). Its first call after the gather step is a
conclusion call: no tools, the answer form in the system message, the output
limited to ``compact.output_tokens`` (at ten tokens a second every hundred
tokens is ten seconds). An answer that says the evidence is enough is the
final analysis. One that says it is not opens the follow-up: the agent's own
tool strategy, given at most ``compact.follow_up_calls`` tool turns and then
its conclusion call (``schema-actions`` keeps its guidance at the end of the
request, so a prefix cache keeps the opening).

The phase is read from the conversation, never stored: no follow-up message
yet means the answer phase. Strategies do no I/O.
"""

from __future__ import annotations

from tarsy.agent.compact import (
    ANSWER_SCHEMA,
    FOLLOW_UP_HEAD,
    CompactAnswer,
    follow_up_request,
    parse_answer,
)
from tarsy.agent.compact import guidance as answer_guidance
from tarsy.agent.strategies.base import (
    IterationOutcome,
    IterationState,
    Strategy,
    conclude,
    thinking_events,
    turn_notes,
)
from tarsy.agent.strategies.native_thinking import with_guidance
from tarsy.config.schema import CompactPathSettings
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import (
    ConversationMessage,
    ErrorInfo,
    LLMResponseEvent,
    TimelineEvent,
    ToolCall,
    TurnNotes,
)
from tarsy.tools.base import ToolResult

EMPTY_ANSWER = (
    "Your answer was empty or not in the form asked. Answer again, in that form, from the "
    "findings and the evidence above."
)


def follow_up_started(messages: list[ConversationMessage]) -> int | None:
    """The position of the message that opened the follow-up (None: still the answer phase)."""
    for index, message in enumerate(messages):
        if message.role == "user" and message.content.startswith(FOLLOW_UP_HEAD):
            return index
    return None


def settings_of(state: IterationState) -> CompactPathSettings:
    """The compact path's budgets of the agent (the defaults if it no longer takes the path)."""
    return state.config.compact or CompactPathSettings()


class CompactStrategy:
    """A conclusion call on the evidence; the agent's tool strategy only when it asks for more."""

    name = "compact"
    requires = Capabilities()
    uses_tools = True

    def follow_up(self, state: IterationState) -> Strategy:
        """The agent's own tool strategy for the follow-up (schema actions: guidance last)."""
        # Imported here: the registry imports this module.
        from tarsy.agent.strategies.registry import get_strategy
        from tarsy.agent.strategies.schema_actions import TrailingGuidanceActions

        if state.config.iteration_strategy == "schema-actions":
            return TrailingGuidanceActions()
        return get_strategy(state.config.iteration_strategy)

    def bounded(self, state: IterationState, started: int) -> IterationState:
        """The state the follow-up sees: its iterations end after ``follow_up_calls`` tool turns.

        Every iteration wrote one assistant message, so those before the follow-up
        count the iterations already spent; the follow-up's strategy concludes at
        its limit like at ``max_iterations`` (``on_max_iterations`` is conclude).
        """
        spent = sum(m.role == "assistant" for m in state.messages[:started])
        limit = min(state.execution.max_iterations, spent + settings_of(state).follow_up_calls)
        execution = state.execution.model_copy(update={"max_iterations": max(limit, spent)})
        config = state.config.model_copy(update={"on_max_iterations": "conclude"})
        return state.model_copy(update={"execution": execution, "config": config})

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The answer call (no tools, the answer form, a short output), or the follow-up's."""
        started = follow_up_started(state.messages)
        if started is not None:
            bounded = self.bounded(state, started)
            return self.follow_up(bounded).build_request(bounded)
        capabilities = _capabilities(state)
        form = answer_guidance(capabilities)
        messages = state.messages
        if not (messages and messages[0].role == "system" and form in messages[0].content):
            messages = with_guidance(messages, form)  # an opening written without evidence
        output = settings_of(state).output_tokens
        limit = state.config.provider.max_output_tokens
        config = state.config.provider.model_copy(
            update={"max_output_tokens": min(output, limit) if limit else output}
        )
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=messages,
            config=config,
            tool_choice="none",
            response_schema=ANSWER_SCHEMA if capabilities.structured_output else None,
        )

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """None in the answer phase; the follow-up strategy's in the follow-up."""
        started = follow_up_started(state.messages)
        if started is None:
            return []
        bounded = self.bounded(state, started)
        return self.follow_up(bounded).tool_calls(bounded, result)

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """The answer concludes, or opens the follow-up; a follow-up turn is its strategy's."""
        started = follow_up_started(state.messages)
        if started is not None:
            bounded = self.bounded(state, started)
            outcome = self.follow_up(bounded).on_result(bounded, result, tool_results)
            timeline = [
                e.model_copy(update={"compact": "follow_up"}) if hasattr(e, "compact") else e
                for e in outcome.timeline
            ]
            return outcome.model_copy(update={"timeline": timeline})
        notes = turn_notes(state, result)
        notes["compact"] = "answer"
        timeline = thinking_events(result.thinking, notes, "native")
        answer = parse_answer(result.text)
        if answer is None:
            return _unanswered(state, result, notes, timeline)
        calls = settings_of(state).follow_up_calls
        if answer.evidence_enough or calls == 0 or not state.tools.tools:
            return conclude(state, result.text, answer.analysis(), timeline, notes)
        return _follow_up(state, result, answer, calls, notes, timeline)


def _capabilities(state: IterationState) -> Capabilities:
    # Imported here: strategies import no backend at module level (config load imports them).
    from tarsy.llm.backends import capabilities_of

    return capabilities_of(state.config.provider)


def _unanswered(
    state: IterationState, result: LLMResult, notes: TurnNotes, timeline: list[TimelineEvent]
) -> IterationOutcome:
    """No answer in the reply: free text is the analysis; an empty reply is asked again once."""
    text = result.text.strip()
    if text:
        return conclude(state, result.text, text, timeline, notes)
    if any(m.role == "user" and m.content == EMPTY_ANSWER for m in state.messages):
        return IterationOutcome(
            timeline=timeline,
            next="fail",
            error=ErrorInfo(
                message="the compact path's answer was empty twice", code="empty", retryable=False
            ),
        )
    shown = notes.copy()
    shown["error"] = EMPTY_ANSWER
    timeline.append(LLMResponseEvent(content=result.text, **shown))
    exchange = [
        ConversationMessage(role="assistant", content=result.text),
        ConversationMessage(role="user", content=EMPTY_ANSWER),
    ]
    return IterationOutcome(messages=exchange, timeline=timeline, next="continue")


def _follow_up(
    state: IterationState,
    result: LLMResult,
    answer: CompactAnswer,
    calls: int,
    notes: TurnNotes,
    timeline: list[TimelineEvent],
) -> IterationOutcome:
    """Record the answer that asked for more, and open the follow-up."""
    shown = notes.copy()
    shown["compact"] = "not_enough"
    timeline.append(LLMResponseEvent(content=answer.analysis(), **shown))
    exchange = [
        ConversationMessage(role="assistant", content=result.text),
        ConversationMessage(role="user", content=follow_up_request(answer, calls)),
    ]
    return IterationOutcome(messages=exchange, timeline=timeline, next="continue")

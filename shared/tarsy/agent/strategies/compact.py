"""``compact``: the small model's path: a tool-less answer first, a bounded follow-up if asked.

Design constraint: a small model follows evidence but does not plan a search
(:mod:`tarsy.agent.compact`). Its first call after the gather step is a
conclusion call: no tools, the answer form in the system message, the output
limited to ``compact.output_tokens`` (at ten tokens a second every hundred
tokens is ten seconds). An answer that says the evidence is enough is the
final analysis. One that says it is not opens the follow-up: the agent's own
tool strategy, given at most ``compact.follow_up_calls`` tool turns (``schema-
actions`` keeps its guidance at the end of the request, so a prefix cache keeps
the opening), each result shown as the brief shows one and cut to its share of
the reading time, then one more answer in the same fixed form, which concludes.
The answer cites findings by number; the analysis quotes them (:class:`CompactAnswer`).
A model that gives its final answer during the follow-up concludes there.

The phase is read from the conversation, never stored: no follow-up message
yet means the answer phase. Strategies do no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tarsy.agent.compact import (
    FINAL_REQUEST,
    FOLLOW_UP_HEAD,
    CompactAnswer,
    answer_schema,
    follow_up_request,
    follow_up_result_chars,
    opening_findings,
    parse_answer,
    shown_to_small_model,
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
from tarsy.agent.strategies.schema_actions import TrailingGuidanceActions
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

# The answer call; a tool turn of the follow-up; the follow-up's answer in the same form.
Phase = Literal["answer", "tools", "final"]
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

    def __init__(self, strategies: Mapping[str, Strategy]) -> None:
        # The registry's strategies by name, for the follow-up (given, so that this
        # module does not import the registry that imports it).
        self._strategies = strategies

    def follow_up(self, state: IterationState) -> Strategy:
        """The agent's own tool strategy for the follow-up (schema actions: guidance last)."""
        if state.config.iteration_strategy == "schema-actions":
            return TrailingGuidanceActions()
        return self._strategies[state.config.iteration_strategy]

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

    def phase(self, state: IterationState) -> Phase:
        """Where the execution is: its answer, a follow-up tool turn, or the follow-up's answer."""
        started = follow_up_started(state.messages)
        if started is None:
            return "answer"
        if self.bounded(state, started).is_conclusion and state.budget_note is None:
            return "final"
        return "tools"

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The answer call (no tools, the answer form, a short output), or the follow-up's."""
        phase = self.phase(state)
        if phase == "tools":
            bounded = self.bounded(state, _started(state))
            return self.follow_up(bounded).build_request(bounded)
        capabilities = _capabilities(state)
        form = answer_guidance(capabilities)
        messages = state.messages
        if not (messages and messages[0].role == "system" and form in messages[0].content):
            messages = with_guidance(messages, form)  # an opening written without evidence
        if phase == "final":
            last = messages[-1]
            closing = last.model_copy(update={"content": f"{last.content}\n\n{FINAL_REQUEST}"})
            messages = [*messages[:-1], closing]
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
            response_schema=(
                answer_schema(config.max_output_tokens or output)
                if capabilities.structured_output
                else None
            ),
        )

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The follow-up strategy's in a follow-up tool turn; none otherwise."""
        if self.phase(state) != "tools":
            return []
        bounded = self.bounded(state, _started(state))
        return self.follow_up(bounded).tool_calls(bounded, result)

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """The answer concludes or opens the follow-up; a tool turn is its strategy's."""
        phase = self.phase(state)
        if phase == "tools":
            bounded = self.bounded(state, _started(state))
            limit = follow_up_result_chars(_capabilities(state), settings_of(state))
            shown = [shown_to_small_model(r, limit) for r in tool_results]
            outcome = self.follow_up(bounded).on_result(bounded, result, shown)
            timeline = [
                e.model_copy(update={"compact": "follow_up"}) if hasattr(e, "compact") else e
                for e in outcome.timeline
            ]
            return outcome.model_copy(update={"timeline": timeline})
        notes = turn_notes(state, result)
        notes["compact"] = "answer" if phase == "answer" else "follow_up"
        timeline = thinking_events(result.thinking, notes, "native")
        answer = parse_answer(result.text)
        if answer is None:
            return _unanswered(state, result, notes, timeline)
        calls = settings_of(state).follow_up_calls
        done = answer.evidence_enough or calls == 0 or not state.tools.tools
        if phase == "final" or done:
            return conclude(
                state,
                result.text,
                answer.analysis(opening_findings(state.messages)),
                timeline,
                notes,
            )
        return _follow_up(state, result, answer, calls, notes, timeline)


def _started(state: IterationState) -> int:
    started = follow_up_started(state.messages)
    assert started is not None  # only called in the follow-up
    return started


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
    analysis = answer.analysis(opening_findings(state.messages))
    timeline.append(LLMResponseEvent(content=analysis, **shown))
    exchange = [
        ConversationMessage(role="assistant", content=result.text),
        ConversationMessage(role="user", content=follow_up_request(answer, calls)),
    ]
    return IterationOutcome(messages=exchange, timeline=timeline, next="continue")

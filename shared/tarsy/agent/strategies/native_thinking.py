"""``native-thinking``: Gemini function calling with thinking (seed 000, seed 003).

Each iteration is one model turn. If the model calls functions, the calls run
(all at once) and their results join the conversation as tool messages; the
next iteration continues. A turn without calls is the final analysis.
"""

from __future__ import annotations

from tarsy.agent.strategies import answers
from tarsy.agent.strategies.base import (
    ConclusionReason,
    IterationOutcome,
    IterationState,
    code_execution_events,
    conclude,
    conclusion_reason,
    continue_or_stop,
    detect_loops,
    force_conclusion,
    thinking_events,
    tool_choice_for,
    tool_events,
    turn_notes,
)
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import (
    ConversationMessage,
    LLMResponseEvent,
    TimelineEvent,
    ToolCall,
    TurnNotes,
)
from tarsy.tools.base import ToolResult

TOOL_GUIDANCE = (
    "Investigate with the functions you are given: gather evidence before concluding, call "
    "several functions at once when they are independent, and read every result carefully. "
    "When you have enough evidence, answer without calling any function: that answer is your "
    "final analysis, in Markdown (what is happening, the root cause and its evidence, the "
    "impact, the next steps)."
)
LAST_ITERATION_NOTE = (
    "This is your last iteration: do not call any function; give your final analysis now "
    "with the evidence you have, and say what remains unverified."
)
LOOP_CONCLUSION_NOTE = (
    "The investigation kept repeating the same function calls, so no more functions will "
    "run: give your final analysis now with the evidence you have, and say what remains "
    "unverified."
)
BUDGET_CONCLUSION_NOTE = (
    "The investigation's token or cost budget is spent, so no more functions will run: give "
    "your final analysis now with the evidence you have, and say what remains unverified."
)
CONCLUSION_NOTES: dict[ConclusionReason, str] = {
    "max_iterations": LAST_ITERATION_NOTE,
    "loop_detected": LOOP_CONCLUSION_NOTE,
    "budget": BUDGET_CONCLUSION_NOTE,
}


def with_guidance(messages: list[ConversationMessage], guidance: str) -> list[ConversationMessage]:
    """The conversation with strategy guidance appended to its system message (not stored)."""
    if messages and messages[0].role == "system":
        first = messages[0].model_copy(update={"content": f"{messages[0].content}\n\n{guidance}"})
        return [first, *messages[1:]]
    return [ConversationMessage(role="system", content=guidance), *messages]


def past_calls(state: IterationState) -> list[ToolCall]:
    """The function calls of the execution so far, in order (run or not)."""
    return [call for m in state.messages if m.role == "assistant" for call in m.tool_calls]


def _nudged(
    state: IterationState,
    result: LLMResult,
    nudge: str,
    timeline: list[TimelineEvent],
    notes: TurnNotes,
) -> IterationOutcome:
    """An answer not yet accepted: recorded, and the model asked to name its evidence."""
    shown = notes.copy()
    shown["nudge"], shown["error"] = "unnamed_evidence", nudge
    timeline.append(LLMResponseEvent(content=result.text, **shown))
    exchange = [
        ConversationMessage(role="assistant", content=result.text),
        ConversationMessage(role="user", content=f"Your answer was not used yet: {nudge}."),
    ]
    return continue_or_stop(state, exchange, timeline)


class NativeThinkingStrategy:
    """Function calling with native thinking, one model turn per step.

    ``tool_choice`` is the agent's (``auto`` by default) on every call but the
    conclusion call (after ``max_iterations`` or a second detected loop), which
    offers no functions and says ``none``; calls returned under ``none`` are never
    run: that turn's text is the final analysis.
    """

    name = "native-thinking"
    requires = Capabilities(thinking=True, function_calling=True)
    uses_tools = True
    # Whether an answer that names nothing from the evidence gets one nudge first.
    nudges_unnamed_answers = False

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The conversation, the agent's tools as functions, and the thought signatures."""
        reason = conclusion_reason(state, past_calls(state))
        guidance = TOOL_GUIDANCE
        if reason is not None:
            guidance = f"{guidance}\n\n{CONCLUSION_NOTES[reason]}"
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=with_guidance(state.messages, guidance),
            config=state.config.provider,
            tools=[] if reason is not None else state.tools.tools,
            tool_choice=tool_choice_for(state, reason),
            thought_signatures=state.provider_state,
        )

    def _nudge(self, state: IterationState, answer: str) -> str | None:
        if not self.nudges_unnamed_answers or state.at_limit or not answer.strip():
            return None
        return answers.unnamed_evidence(answer, state.messages)

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The model's function calls, as they came, but those that loop; none under ``none``."""
        history = past_calls(state)
        if tool_choice_for(state, conclusion_reason(state, history)) == "none":
            return []
        loops = detect_loops(state, history, result.tool_calls)
        return [call for call in result.tool_calls if call.id not in loops]

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the turn; continue after tool calls, conclude on a turn without them."""
        history = past_calls(state)
        reason = conclusion_reason(state, history)
        notes = turn_notes(state, result)
        timeline = thinking_events(result.thinking, notes, "native")
        timeline.extend(code_execution_events(result, notes))
        if not result.tool_calls or tool_choice_for(state, reason) == "none":
            if result.tool_calls:  # asked for under "none": never run
                notes["ignored_tool_calls"] = [call.name for call in result.tool_calls]
            if reason is not None:
                return force_conclusion(state, reason, result.text, result.text, timeline, notes)
            nudge = self._nudge(state, result.text)
            if nudge is not None:
                return _nudged(state, result, nudge, timeline, notes)
            return conclude(state, result.text, result.text.strip(), timeline, notes)
        if result.text:
            timeline.append(LLMResponseEvent(content=result.text, **notes))
        loops = detect_loops(state, history, result.tool_calls)
        timeline.extend(tool_events(result.tool_calls, tool_results, loops))
        by_id = {r.call_id: r for r in tool_results}
        messages = [
            ConversationMessage(role="assistant", content=result.text, tool_calls=result.tool_calls)
        ]
        for call in result.tool_calls:
            hit, ran = loops.get(call.id), by_id.get(call.id)
            content = hit.observation if hit else ran.content if ran else "Error: no result"
            messages.append(
                ConversationMessage(
                    role="tool", content=content, tool_call_id=call.id, tool_name=call.name
                )
            )
        return continue_or_stop(state, messages, timeline)


class NativeToolsStrategy(NativeThinkingStrategy):
    """``native-tools``: the same loop on any backend with native function calling.

    Thinking is used where the model offers it and not required: OpenAI,
    Anthropic, xAI and compatible servers run this strategy too.
    """

    name = "native-tools"
    requires = Capabilities(function_calling=True)
    nudges_unnamed_answers = True


class ChatStrategy(NativeToolsStrategy):
    """``chat``: a follow-up question on a finished session, with the same tool loop.

    It needs native tool calling only, so a chat runs on every vendor that has it.
    """

    name = "chat"
    # A follow-up answer need not name a resource ("how much did it cost?").
    nudges_unnamed_answers = False

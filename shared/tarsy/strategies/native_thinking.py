"""``native-thinking``: Gemini function calling with thinking (seed 000, seed 003).

Each iteration is one model turn. If the model calls functions, the calls run
(all at once) and their results join the conversation as tool messages; the
next iteration continues. A turn without calls is the final analysis.
"""

from __future__ import annotations

from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import ConversationMessage, TimelineEvent, TimelineEventType, ToolCall
from tarsy.strategies.base import (
    IterationOutcome,
    IterationState,
    conclude,
    continue_or_stop,
    provider_notes,
    tool_events,
)
from tarsy.tools import ToolResult

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


def with_guidance(messages: list[ConversationMessage], guidance: str) -> list[ConversationMessage]:
    """The conversation with strategy guidance appended to its system message (not stored)."""
    if messages and messages[0].role == "system":
        first = messages[0].model_copy(update={"content": f"{messages[0].content}\n\n{guidance}"})
        return [first, *messages[1:]]
    return [ConversationMessage(role="system", content=guidance), *messages]


class NativeThinkingStrategy:
    """Function calling with native thinking, one model turn per step."""

    name = "native-thinking"
    requires = Capabilities(thinking=True, function_calling=True)
    uses_tools = True

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The conversation, the agent's tools as functions, and the thought signatures."""
        guidance = TOOL_GUIDANCE
        if state.is_conclusion:
            guidance = f"{guidance}\n\n{LAST_ITERATION_NOTE}"
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=with_guidance(state.messages, guidance),
            config=state.config.provider,
            tools=[] if state.is_conclusion else state.tools.tools,
            thought_signatures=state.provider_state,
        )

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The model's function calls, as they came."""
        return list(result.tool_calls)

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the turn; continue after tool calls, conclude on a turn without them."""
        notes = {"iteration": state.iteration, **provider_notes(result)}
        timeline: list[TimelineEvent] = []
        if result.thinking:
            timeline.append(
                TimelineEvent(
                    type=TimelineEventType.LLM_THINKING,
                    content=result.thinking,
                    metadata={**notes, "source": "native"},
                )
            )
        if result.text and result.tool_calls:
            timeline.append(
                TimelineEvent(type=TimelineEventType.LLM_RESPONSE, content=result.text,
                              metadata=notes)
            )  # fmt: skip
        if not result.tool_calls:
            return conclude(state, result.text, result.text.strip(), timeline, notes)
        timeline.extend(tool_events(result.tool_calls, tool_results))
        messages = [
            ConversationMessage(
                role="assistant", content=result.text, tool_calls=result.tool_calls
            ),
            *[
                ConversationMessage(
                    role="tool", content=r.content, tool_call_id=r.call_id, tool_name=r.name
                )
                for r in tool_results
            ],
        ]
        return continue_or_stop(state, messages, timeline)


class ChatStrategy(NativeThinkingStrategy):
    """``chat``: a follow-up question on a finished session, with the same tool loop."""

    name = "chat"

"""``single-call``: one LLM call, no tools; the answer is the final analysis.

Its one call is a conclusion call: no tools, ``tool_choice`` "none". The
timeline is the thinking (``source: native``), any code the model ran
(``llm_response``, ``source: code_execution``) and the ``final_analysis`` alone
(seed 003: the answer is not also an ``llm_response``).
"""

from __future__ import annotations

from tarsy.agent.strategies.base import (
    IterationOutcome,
    IterationState,
    code_execution_events,
    conclude,
    thinking_events,
    turn_notes,
)
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import ConversationMessage, ExecutiveSummaryEvent, ToolCall
from tarsy.tools.base import ToolResult


class SingleCallStrategy:
    """Ask once and conclude (seed 003's SingleCallController)."""

    name = "single-call"
    requires = Capabilities(streaming=False)
    uses_tools = False

    def build_request(self, state: IterationState) -> GenerateRequest:
        """Send the conversation as it stands, without tools."""
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=state.messages,
            config=state.config.provider,
            tool_choice="none",
            thought_signatures=state.provider_state,
        )

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """Single-call agents use no tools."""
        return []

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the answer as the final analysis (once) and complete."""
        notes = turn_notes(state, result)
        timeline = thinking_events(result.thinking, notes, "native")
        timeline.extend(code_execution_events(result, notes))
        return conclude(state, result.text, result.text.strip(), timeline, notes)


class SynthesisStrategy(SingleCallStrategy):
    """``synthesis``: one call that merges a parallel stage's results (its opening prompt)."""

    name = "synthesis"


class NativeThinkingSynthesisStrategy(SingleCallStrategy):
    """``synthesis-native-thinking``: the same, on a provider that thinks natively."""

    name = "synthesis-native-thinking"
    requires = Capabilities(thinking=True)


class ExecutiveSummaryStrategy:
    """The closing summary of a session: one call, recorded as ``executive_summary``."""

    name = "executive-summary"
    requires = Capabilities(streaming=False)
    uses_tools = False

    def build_request(self, state: IterationState) -> GenerateRequest:
        """The summary prompt, without thinking (a short rewrite needs none)."""
        return GenerateRequest(
            execution_id=state.execution.execution_id,
            messages=state.messages,
            config=state.config.provider.model_copy(update={"thinking": False, "native_tools": []}),
            tool_choice="none",
        )

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """No tools."""
        return []

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Record the summary."""
        summary = result.text.strip()
        return IterationOutcome(
            messages=[ConversationMessage(role="assistant", content=result.text)],
            timeline=[ExecutiveSummaryEvent(content=summary, agent=state.config.agent)],
            next="complete",
            final_analysis=summary,
        )

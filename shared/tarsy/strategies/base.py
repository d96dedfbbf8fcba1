"""The controller interface: one iteration as a pure function.

The step function (the I/O shell) loads state from Firestore, asks the strategy
for the LLM request, makes the call, and hands the result back to the strategy,
which decides what to record and what happens next. Strategies do no I/O.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from tarsy.config.schema import ResolvedAgentConfig
from tarsy.llm.base import Capabilities, GenerateRequest, LLMResult
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ErrorInfo,
    TimelineEvent,
    TimelineEventType,
    ToolCall,
)
from tarsy.tools import ToolListing, ToolResult

NextAction = Literal["continue", "complete", "fail", "pause"]


class IterationState(BaseModel):
    """What an iteration knows: the execution, its config and its conversation so far."""

    execution: AgentExecution
    config: ResolvedAgentConfig
    messages: list[ConversationMessage]
    provider_state: dict[str, str] = Field(default_factory=dict)
    tools: ToolListing = Field(default_factory=ToolListing)

    @property
    def iteration(self) -> int:
        """The number of this iteration (1-based)."""
        return self.execution.iteration + 1

    @property
    def is_conclusion(self) -> bool:
        """Whether this is the extra, tool-less call after ``max_iterations`` (conclude mode)."""
        return self.iteration > self.execution.max_iterations

    @property
    def at_limit(self) -> bool:
        """Whether this iteration used the last of ``max_iterations``."""
        return self.iteration >= self.execution.max_iterations


class IterationOutcome(BaseModel):
    """What an iteration produced and what happens next."""

    messages: list[ConversationMessage] = Field(default_factory=list)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    next: NextAction
    final_analysis: str | None = None
    error: ErrorInfo | None = None
    # True when the LLM call failed and the same iteration is tried again next step.
    failed_attempt: bool = False


class Strategy(Protocol):
    """An iteration strategy (controller): pure functions around one LLM call.

    The step function calls, in order: ``build_request`` → the LLM →
    ``tool_calls`` → the tool executor (all calls at once) → ``on_result``.
    """

    name: str
    requires: Capabilities
    uses_tools: bool

    def build_request(self, state: IterationState) -> GenerateRequest:
        """Return the LLM request of this iteration."""
        ...

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The tool calls the model asked for (the shell runs them before ``on_result``)."""
        ...

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Turn the model's answer and the tool results into records and the next action."""
        ...


def missing_capabilities(required: Capabilities, offered: Capabilities) -> list[str]:
    """Return the names of capabilities ``required`` asks for that ``offered`` lacks."""
    return [
        name
        for name, wanted in required.model_dump().items()
        if wanted and not getattr(offered, name)
    ]


# Provider metadata that a watcher should see on the timeline (seed 000: a suppressed
# native tool is noted where the response appears).
_TIMELINE_NOTES = ("native_tools_suppressed",)


def provider_notes(result: LLMResult) -> dict[str, Any]:
    """The part of a result's provider metadata that belongs on timeline events."""
    return {key: result.metadata[key] for key in _TIMELINE_NOTES if key in result.metadata}


def tool_events(calls: list[ToolCall], results: list[ToolResult]) -> list[TimelineEvent]:
    """``llm_tool_call`` and ``mcp_tool_call`` events for an iteration's calls, call by call."""
    events: list[TimelineEvent] = []
    by_id = {r.call_id: r for r in results}
    for call in calls:
        events.append(
            TimelineEvent(
                type=TimelineEventType.LLM_TOOL_CALL,
                content=f"{call.name} {call.arguments}",
                metadata={"call_id": call.id, "tool": call.name, "arguments": call.arguments},
            )
        )
        result = by_id.get(call.id)
        if result is None:
            continue
        events.append(
            TimelineEvent(
                type=TimelineEventType.MCP_TOOL_CALL,
                content=result.content,
                metadata={
                    "call_id": call.id,
                    "server": result.server,
                    "tool": result.tool,
                    "arguments": result.arguments,
                    "is_error": result.is_error,
                    "duration_ms": round(result.duration_ms, 1),
                    "shown_as": result.shown_as,
                },
            )
        )
    return events


def conclude(
    state: IterationState,
    answer: str,
    analysis: str,
    timeline: list[TimelineEvent],
    notes: dict[str, Any],
) -> IterationOutcome:
    """Complete the execution: ``answer`` joins the conversation, ``analysis`` is the result."""
    timeline.append(
        TimelineEvent(
            type=TimelineEventType.FINAL_ANALYSIS,
            content=analysis,
            metadata={**notes, "agent": state.config.agent},
        )
    )
    return IterationOutcome(
        messages=[ConversationMessage(role="assistant", content=answer)],
        timeline=timeline,
        next="complete",
        final_analysis=analysis,
    )


def continue_or_stop(
    state: IterationState, messages: list[ConversationMessage], timeline: list[TimelineEvent]
) -> IterationOutcome:
    """After a tool iteration: go on, or apply ``on_max_iterations`` at the limit (seed 003).

    ``conclude`` grants one more call, without tools, for the final answer;
    ``pause`` stops with status paused until ``POST /sessions/{id}/resume``.
    A model that still asks for tools in its conclusion call fails the execution.
    """
    limit = state.execution.max_iterations
    if state.is_conclusion:
        return IterationOutcome(
            messages=messages,
            timeline=timeline,
            next="fail",
            error=ErrorInfo(
                message=f"no final answer after max_iterations ({limit}) and a conclusion call",
                code="max_iterations",
                retryable=False,
            ),
        )
    if state.at_limit and state.config.on_max_iterations == "pause":
        return IterationOutcome(
            messages=messages,
            timeline=timeline,
            next="pause",
            error=ErrorInfo(
                message=f"paused at max_iterations ({limit}); resume to continue",
                code="max_iterations",
                retryable=True,
            ),
        )
    return IterationOutcome(messages=messages, timeline=timeline, next="continue")

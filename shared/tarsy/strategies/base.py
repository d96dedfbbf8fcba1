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
from tarsy.models import AgentExecution, ConversationMessage, ErrorInfo, TimelineEvent

NextAction = Literal["continue", "complete", "fail", "pause"]


class IterationState(BaseModel):
    """What an iteration knows: the execution, its config and its conversation so far."""

    execution: AgentExecution
    config: ResolvedAgentConfig
    messages: list[ConversationMessage]
    provider_state: dict[str, str] = Field(default_factory=dict)


class IterationOutcome(BaseModel):
    """What an iteration produced and what happens next."""

    messages: list[ConversationMessage] = Field(default_factory=list)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    next: NextAction
    final_analysis: str | None = None
    error: ErrorInfo | None = None


class Strategy(Protocol):
    """An iteration strategy (controller)."""

    name: str
    requires: Capabilities

    def build_request(self, state: IterationState) -> GenerateRequest:
        """Return the LLM request of this iteration."""
        ...

    def on_result(self, state: IterationState, result: LLMResult) -> IterationOutcome:
        """Turn the model's answer into records and the next action."""
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

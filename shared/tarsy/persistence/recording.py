"""A finished session's records, read back whole: what ``tarsy replay`` runs from.

Everything a step wrote, grouped by the step that wrote it (the ``{step:04d}``
prefix of the record ids; step 0 is the opening an execution was created
with). A recording is plain data: it can be saved as JSON and replayed later
without Firestore (:mod:`tarsy_dev.replay`).
"""

from __future__ import annotations

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    LLMInteraction,
    MCPInteraction,
    Session,
    TimelineEvent,
)
from tarsy.persistence.turns import SubAgentAnswer
from tarsy.tools.base import CachedToolList

OPENING_STEP = 0  # the records an execution was created with, before any step ran


class RecordedFollowUp(DeferredModel):
    """A message a sub-agent got from its parent after it had answered: the conversation goes on."""

    call_id: str
    message: ConversationMessage
    events: list[TimelineEvent] = Field(default_factory=list)


class RecordedExecution(DeferredModel):
    """One execution and everything its steps wrote, by step number."""

    execution: AgentExecution
    messages: dict[int, list[ConversationMessage]] = Field(default_factory=dict)
    timeline: dict[int, list[TimelineEvent]] = Field(default_factory=dict)
    llm_interactions: dict[int, LLMInteraction] = Field(
        default_factory=dict, description="each step's own model call"
    )
    summary_interactions: dict[int, list[LLMInteraction]] = Field(
        default_factory=dict, description="the calls that summarized a step's large tool results"
    )
    mcp_interactions: dict[int, list[MCPInteraction]] = Field(default_factory=dict)
    follow_ups: dict[int, RecordedFollowUp] = Field(
        default_factory=dict, description="follow-up messages, by the step they came before"
    )
    sub_agent_answers: dict[int, dict[str, SubAgentAnswer]] = Field(
        default_factory=dict, description="the answers each waiting step got, by call id"
    )

    @property
    def opening(self) -> list[ConversationMessage]:
        """The messages the execution was created with."""
        return self.messages.get(OPENING_STEP, [])

    @property
    def events(self) -> list[TimelineEvent]:
        """The whole timeline, in the order it was written."""
        return [event for step in sorted(self.timeline) for event in self.timeline[step]]

    @property
    def steps(self) -> list[int]:
        """The steps that ran (each wrote an LLM interaction record), in order."""
        return sorted(self.llm_interactions)


class SessionRecording(DeferredModel):
    """A session with its executions' records, and the MCP tool lists cached when read."""

    session: Session
    executions: list[RecordedExecution]
    tool_lists: dict[str, CachedToolList] = Field(
        default_factory=dict,
        description="mcp_tool_lists as cached when the recording was read (server → tools)",
    )

"""The value types of a step: what it reads, holds, and commits (no I/O).

Design constraint: pure. The engine builds and reads these and the store
applies them, so they import neither Firestore nor any other client, only the
models they carry; a step kind can be written and tested against them alone.
:mod:`tarsy.persistence.steps` writes them; :mod:`tarsy.persistence.store`
re-exports them for older callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ExecutionStatus,
    LLMInteraction,
    MCPInteraction,
    Money,
    Session,
    TimelineEvent,
    TokenUsage,
)
from tarsy.persistence.turns import PendingTurn
from tarsy.persistence.updates import ExecutionUpdate, SessionUpdate, StageUpdate
from tarsy.tools.base import CachedToolList

__all__ = [
    "FOLLOW_UP_SUFFIX",
    "Claim",
    "FollowUp",
    "NewConversation",
    "StepCommit",
    "StepState",
    "conversation_is_current",
    "follow_up_id",
]


class Claim(DeferredModel):
    """A step's hold on its execution: who, until when, and the write time to commit against."""

    owner: str
    until: datetime
    update_time: datetime


class NewConversation(DeferredModel):
    """A sub-agent execution started by a step, with its opening messages and events."""

    execution: AgentExecution
    opening: list[ConversationMessage]
    timeline: list[TimelineEvent] = Field(default_factory=list)


class FollowUp(DeferredModel):
    """A message to a sub-agent that answered before: it runs again from its next step."""

    execution_id: str
    step: int = Field(description="the sub-agent's next step")
    update: ExecutionUpdate
    # When the parent's step read the conversation: the write is conditional on it.
    read_time: datetime
    message: ConversationMessage
    event: TimelineEvent


FOLLOW_UP_SUFFIX = "-follow-up"


def follow_up_id(step: int) -> str:
    """The id of a follow-up message: after step ``step - 1``'s records, before ``step``'s."""
    return f"{step - 1:04d}{FOLLOW_UP_SUFFIX}"


class StepCommit(DeferredModel):
    """Everything one step writes, applied atomically by :meth:`Store.commit_step`."""

    execution_id: str
    session_id: str
    step: int
    next_step: int
    claim: Claim | None = None
    messages: list[ConversationMessage] = Field(default_factory=list)
    # The gather step rewrites the opening messages (step 0's) with the evidence it found.
    opening: list[ConversationMessage] = Field(default_factory=list)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    llm_interaction: LLMInteraction | None = None
    mcp_interactions: list[MCPInteraction] = Field(default_factory=list)
    # The calls that summarized large tool results: llm_interactions/{step:04d}-summary-{n:02d}.
    summary_interactions: list[LLMInteraction] = Field(default_factory=list)
    # Set when the execution ends: written as its stage's completion marker, atomically.
    finished_status: ExecutionStatus | None = None
    role: str = "agent"
    execution: ExecutionUpdate = Field(default_factory=ExecutionUpdate)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost: Money = 0  # nano-dollars: Firestore's Increment adds them exactly
    stage_index: int | None = None
    stage: StageUpdate | None = None
    session: SessionUpdate | None = None
    provider_state: dict[str, str] = Field(default_factory=dict)
    provider_state_expire_at: datetime | None = None
    # The execution that follows this one (e.g. the executive summary), created with it.
    create_execution: AgentExecution | None = None
    create_opening: list[ConversationMessage] = Field(default_factory=list)
    # A turn that messaged sub-agents: what it waits with, the conversations it
    # starts, and those it continues (see tarsy.engine.sub_agents).
    pending_turn: PendingTurn | None = None
    new_conversations: list[NewConversation] = Field(default_factory=list)
    follow_ups: list[FollowUp] = Field(default_factory=list)


@dataclass
class StepState:
    """What a step reads before it runs, in one round trip.

    The execution (with its update time, for the claim's precondition), its
    session, its provider state, the cached tool lists of the MCP servers the
    step may use, and (when asked) its conversation.
    """

    execution: AgentExecution | None = None
    update_time: datetime | None = None
    session: Session | None = None
    provider_state: dict[str, str] = field(default_factory=dict)
    tool_lists: dict[str, CachedToolList] = field(default_factory=dict)
    # The conversation as it stands under a claim made with ``update_time``; None when
    # not asked for, or when the execution was written after the conversation was read
    # (the step then reads it again once claimed).
    conversation: list[ConversationMessage] | None = None


def conversation_is_current(execution_written: datetime, conversation_read: datetime) -> bool:
    """Whether a conversation read at ``conversation_read`` is the one a claim will hold.

    Every write of an execution's messages writes the execution document in the
    same batch, and the claim is conditional on the execution's update time
    (``execution_written``): if that write is no later than the conversation's
    read time, no message changed between the read and the claim.
    """
    return execution_written <= conversation_read

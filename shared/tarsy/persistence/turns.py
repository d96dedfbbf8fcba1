"""A turn that waits for its sub-agents, and their answers (persistence's vocabulary).

Design constraint: persistence sits below the engine. :mod:`tarsy.engine.sub_agents`
plans the ``message_agent`` calls of a turn and turns answers into tool results;
what it stores between steps (the waiting turn under the parent, each
sub-agent's answer) is defined here, so that the store reads and writes it
without importing the engine.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.llm.base import LLMResult
from tarsy.models import ExecutionStatus
from tarsy.tools.base import ToolResult

__all__ = ["Dispatch", "PendingTurn", "SubAgentAnswer"]


class Dispatch(DeferredModel):
    """One ``message_agent`` call that goes to a sub-agent."""

    call_id: str
    agent_name: str
    conversation_id: str = Field(description="the sub-agent execution's id")
    message: str
    new: bool = Field(description="starts the conversation (else a follow-up)")


class PendingTurn(DeferredModel):
    """``executions/{eid}/sub_agent_turns/{step}``: a turn that waits for its sub-agents.

    Holds what the turn's next step needs to finish it as if every tool had
    returned at once: the model's answer and the results of the other calls.
    """

    step: int
    result: LLMResult
    tool_results: list[ToolResult] = Field(default_factory=list)
    dispatches: list[Dispatch] = Field(default_factory=list)


class SubAgentAnswer(DeferredModel):
    """``.../sub_agent_turns/{step}/answers/{call_id}``: a sub-agent's answer to one call."""

    call_id: str
    conversation_id: str
    agent_name: str
    status: ExecutionStatus
    response: str | None = None
    error: str | None = None
    answered_at: datetime

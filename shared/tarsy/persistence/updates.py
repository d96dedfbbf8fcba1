"""The typed partial updates of a session, a stage and an execution (persistence's vocabulary).

Design constraint: persistence sits below the engine. The engine's transitions
(:mod:`tarsy.engine.transitions`) decide every status change and return one of
these; only :class:`tarsy.persistence.store.Store` turns them into Firestore
fields, and only the fields an update sets are written. Defining them here lets
the store take them without importing the engine.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict

from tarsy._pydantic import DeferredModel
from tarsy.models import (
    ErrorInfo,
    ExecutionStatus,
    Feedback,
    GatherSummary,
    RecalledSession,
    SubAgentWait,
    Verdict,
)

__all__ = ["ExecutionUpdate", "SessionUpdate", "StageUpdate"]


class _Update(DeferredModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def written(self) -> set[str]:
        """The names of the fields this update writes (those given explicitly)."""
        return set(self.model_fields_set)


class ExecutionUpdate(_Update):
    """A partial update of ``executions/{eid}``. ``release_lease`` clears the step lease."""

    status: ExecutionStatus | None = None
    final_analysis: str | None = None
    error: ErrorInfo | None = None
    completed_at: datetime | None = None
    iteration: int | None = None
    consecutive_failures: int | None = None
    max_iterations: int | None = None
    cancel_requested: bool | None = None
    due_at: datetime | None = None
    awaiting: SubAgentWait | None = None
    parent_tool_call_id: str | None = None
    parent_step: int | None = None
    gather_pending: bool | None = None
    release_lease: bool = False


class StageUpdate(_Update):
    """A partial update of ``sessions/{sid}/stages/{index}``."""

    status: ExecutionStatus | None = None
    completed_at: datetime | None = None
    finished_executions: dict[str, str] | None = None
    synthesis_execution_id: str | None = None


class SessionUpdate(_Update):
    """A partial update of ``sessions/{sid}``."""

    status: ExecutionStatus | None = None
    current_stage: int | None = None
    final_analysis: str | None = None
    executive_summary: str | None = None
    findings: list[str] | None = None
    gather: GatherSummary | None = None
    error: ErrorInfo | None = None
    cancel_requested: bool | None = None
    score: int | None = None
    score_report: dict[str, Any] | None = None
    score_error: str | None = None
    deadline: datetime | None = None
    awaiting_stage: int | None = None
    due_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    completion_reason: Literal["budget"] | None = None
    runbook_url: str | None = None
    runbook_text: str | None = None
    runbook_error: str | None = None
    feedback: Feedback | None = None
    verdict: Verdict | None = None
    memory_keys: list[str] | None = None
    recalled: list[RecalledSession] | None = None
    retention_due: datetime | None = None

"""Narrow views of the store, one per caller's need, so each depends on what it uses.

Design constraint: :class:`~tarsy.persistence.store.Store` is the one adapter
that turns typed updates into Firestore fields, and it serves every aggregate
(sessions, stages, executions, their records, alert claims, caches). A caller
that needs two of its methods names a Protocol here instead of the class, so a
test can hand it a small fake and a reader sees at once what it touches. The
Store satisfies every Protocol structurally; mypy checks it where Deps is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from tarsy.models import AgentExecution, AuditEvent, Session, Stage, TimelineEvent
from tarsy.persistence.progress import ProgressSnapshot, ProgressStore
from tarsy.persistence.store import Claim
from tarsy.tools.base import CachedToolList

__all__ = ["LeaseRenewal", "ProgressStore", "SessionReader", "ToolListCache"]


class LeaseRenewal(Protocol):
    """What a running step's heartbeat writes (its lease, under its claim) and reads."""

    async def renew(self, execution_id: str, claim: Claim, until: datetime) -> Claim | None:
        """Extend the lease; None when the execution changed since the claim."""
        ...

    async def get_execution(self, execution_id: str) -> AgentExecution | None:
        """The execution as it is now (a cancel marks it)."""
        ...


class SessionReader(Protocol):
    """What a view of one session reads."""

    async def get_session(self, session_id: str) -> Session | None:
        """The session, or None."""
        ...

    async def list_stages(self, session_id: str) -> list[Stage]:
        """Its stages in order."""
        ...

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        """Its executions by stage and creation."""
        ...

    async def list_timeline(self, execution_id: str) -> list[TimelineEvent]:
        """An execution's timeline in order."""
        ...

    async def live_progress(self, execution_ids: Sequence[str]) -> dict[str, ProgressSnapshot]:
        """The live text of the calls streaming now."""
        ...

    async def list_audit(self, session_id: str) -> list[AuditEvent]:
        """What people did to the session, oldest first."""
        ...


class ToolListCache(Protocol):
    """The MCP tool lists cached across steps."""

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        """The cached lists of ``servers`` that exist."""
        ...

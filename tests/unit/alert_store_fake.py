"""An in-memory stand-in for the Store methods the alert routes use, with Firestore's rules.

Faithful where the outcomes depend on it: a claim is created only if absent
(``create()``), replaced only under the update time it was read with (a
``last_update_time`` precondition), and the session with its claim are
written together or not at all. Every method yields to the event loop first,
so concurrent deliveries interleave between their reads and their writes as
they would against Firestore. The integration tests run the same outcomes
against the real Store and the emulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from tarsy.engine.transitions import ExecutionUpdate, SessionUpdate
from tarsy.models import AgentExecution, AlertFingerprint, Session
from tarsy.persistence.audit_log import ActionWrites
from tarsy.tools.base import CachedToolList

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class MemoryAlertStore:
    """Sessions, executions and fingerprint claims in dictionaries."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.claims: dict[str, tuple[AlertFingerprint, datetime]] = {}
        self.executions: dict[str, AgentExecution] = {}
        self.deleted: list[str] = []
        self._writes = 0

    def _update_time(self) -> datetime:
        self._writes += 1
        return EPOCH + timedelta(microseconds=self._writes)

    async def create_alert_session(
        self,
        session: Session,
        dedup_key: str,
        fingerprint: AlertFingerprint,
        *,
        replacing: datetime | None = None,
    ) -> bool:
        await asyncio.sleep(0)
        existing = self.claims.get(dedup_key)
        if replacing is None and existing is not None:
            return False
        if replacing is not None and (existing is None or existing[1] != replacing):
            return False
        if session.session_id in self.sessions:
            return False
        self.sessions[session.session_id] = session
        self.claims[dedup_key] = (fingerprint, self._update_time())
        return True

    async def create_session(self, session: Session) -> None:
        await asyncio.sleep(0)
        if session.session_id in self.sessions:
            raise ValueError(f"session {session.session_id!r} exists")  # Firestore's AlreadyExists
        self.sessions[session.session_id] = session

    async def delete_session(self, session_id: str) -> None:
        await asyncio.sleep(0)
        self.sessions.pop(session_id, None)
        self.deleted.append(session_id)

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        await asyncio.sleep(0)
        return {}

    async def get_alert_fingerprint(
        self, dedup_key: str
    ) -> tuple[AlertFingerprint, datetime] | None:
        await asyncio.sleep(0)
        return self.claims.get(dedup_key)

    async def alert_fingerprints_for(
        self, resolve_key: str, limit: int = 50
    ) -> list[AlertFingerprint]:
        await asyncio.sleep(0)
        claims = [c for c, _ in self.claims.values() if c.resolve_key == resolve_key][:limit]
        return sorted(claims, key=lambda c: c.created_at, reverse=True)

    async def record_alert_resolution(self, session_id: str, resolved_at: datetime) -> bool:
        await asyncio.sleep(0)
        session = self.sessions.get(session_id)
        if session is None:
            return False
        self.sessions[session_id] = session.model_copy(update={"resolved_at": resolved_at})
        return True

    async def delete_alert_session(self, session_id: str, dedup_key: str) -> None:
        await asyncio.sleep(0)
        self.deleted.append(session_id)
        self.sessions.pop(session_id, None)
        self.claims.pop(dedup_key, None)

    async def get_session(self, session_id: str) -> Session | None:
        await asyncio.sleep(0)
        return self.sessions.get(session_id)

    # What tarsy.commands.sessions.cancel uses (cancel_on_resolve).

    async def update_session(self, session_id: str, update: SessionUpdate) -> None:
        session = self.sessions[session_id]
        changes = {name: getattr(update, name) for name in update.written()}
        self.sessions[session_id] = session.model_copy(update=changes)

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        return [e for e in self.executions.values() if e.session_id == session_id]

    async def update_execution(self, execution_id: str, update: ExecutionUpdate) -> None:
        execution = self.executions[execution_id]
        changes = {name: getattr(update, name) for name in update.written() - {"release_lease"}}
        self.executions[execution_id] = execution.model_copy(update=changes)

    async def commit_action(self, writes: ActionWrites) -> None:
        """A cancel's session and execution updates (one commit in the real store)."""
        if writes.session is not None:
            await self.update_session(writes.session_id, writes.session)
        for execution_id, update in writes.executions:
            await self.update_execution(execution_id, update)

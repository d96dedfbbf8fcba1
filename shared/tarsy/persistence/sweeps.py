"""The sweeper's queries: what is overdue, and what is past its deadline."""

from __future__ import annotations

from datetime import datetime

from google.cloud import firestore

from tarsy.models import (
    AgentExecution,
    ExecutionStatus,
    Session,
)
from tarsy.persistence._firestore import (
    EXECUTIONS,
    SESSIONS,
    FirestoreBase,
)


class SweepQueries(FirestoreBase):
    """What the sweeper looks for."""

    async def due_executions(self, now: datetime, limit: int = 100) -> list[AgentExecution]:
        """Executions whose next step (or fan-in) should have been claimed by now.

        A dead step, a lost publish, a push that gave up: whatever the reason,
        the execution's ``due_at`` has passed. Documents whose ``due_at`` is
        null never match an inequality on timestamps.
        """
        self.round_trips.add("query")
        query = (
            self._db.collection(EXECUTIONS)
            .where(filter=firestore.FieldFilter("due_at", "<", now))
            .limit(limit)
        )
        return [AgentExecution.model_validate(s.to_dict()) async for s in query.stream()]

    async def due_sessions(self, now: datetime, limit: int = 100) -> list[Session]:
        """Sessions whose awaited stage start should have run by now."""
        self.round_trips.add("query")
        query = (
            self._db.collection(SESSIONS)
            .where(filter=firestore.FieldFilter("due_at", "<", now))
            .limit(limit)
        )
        return [Session.model_validate(await self._read(s)) async for s in query.stream()]

    async def overdue_sessions(self, now: datetime, limit: int = 100) -> list[Session]:
        """Unfinished sessions past their deadline."""
        overdue: list[Session] = []
        for status in (ExecutionStatus.PENDING, ExecutionStatus.ACTIVE, ExecutionStatus.PAUSED):
            self.round_trips.add("query")
            query = (
                self._db.collection(SESSIONS)
                .where(filter=firestore.FieldFilter("status", "==", status.value))
                .where(filter=firestore.FieldFilter("deadline", "<", now))
                .limit(limit)
            )
            overdue.extend(
                [Session.model_validate(await self._read(s)) async for s in query.stream()]
            )
        return overdue

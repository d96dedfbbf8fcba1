"""The sweeper's queries: what is overdue, and what is past its deadline.

And the one write that makes re-publishing safe under a backlog: whoever
re-publishes an overdue step or stage start (the sweeper, a duplicate's heal)
first moves its due time on, under a precondition on the document's update
time (:meth:`SweepQueries.postpone_execution`). However many try at once, and
however long the queue, one of them wins per due interval, so copies of a
message never multiply.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
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
    with_cost,
)


@dataclass(frozen=True)
class DueExecution:
    """An overdue execution, and when it was last written (the postpone's precondition)."""

    execution: AgentExecution
    update_time: datetime


@dataclass(frozen=True)
class DueSession:
    """A session whose awaited stage start is overdue, and when it was last written."""

    session: Session
    update_time: datetime


class SweepQueries(FirestoreBase):
    """What the sweeper looks for, and the postpone that gates every re-publish."""

    async def due_executions(self, now: datetime, limit: int = 100) -> list[DueExecution]:
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
        return [
            DueExecution(AgentExecution.model_validate(with_cost(s.to_dict() or {})), s.update_time)
            async for s in query.stream()
        ]

    async def due_sessions(self, now: datetime, limit: int = 100) -> list[DueSession]:
        """Sessions whose awaited stage start should have run by now."""
        self.round_trips.add("query")
        query = (
            self._db.collection(SESSIONS)
            .where(filter=firestore.FieldFilter("due_at", "<", now))
            .limit(limit)
        )
        return [
            DueSession(Session.model_validate(await self._read(s)), s.update_time)
            async for s in query.stream()
        ]

    async def postpone_execution(
        self, execution_id: str, *, read_time: datetime, until: datetime
    ) -> bool:
        """Move an overdue execution's due time to ``until``; False if it was written since.

        Call it before re-publishing the execution's step: only the caller
        whose write wins publishes. A step that claims the execution meanwhile
        voids the postpone (nothing is owed), and a postpone that wins voids a
        claim made on an older read (Pub/Sub redelivers that message). The
        execution's ``republished`` count goes up by one (a claim resets it).
        """
        return await self._postpone(
            self._execution(execution_id), read_time, until, republished=True
        )

    async def postpone_session(
        self, session_id: str, *, read_time: datetime, until: datetime
    ) -> bool:
        """Move an overdue stage start's due time to ``until``; False if written since."""
        return await self._postpone(self._session(session_id), read_time, until)

    async def _postpone(
        self, ref: Any, read_time: datetime, until: datetime, *, republished: bool = False
    ) -> bool:
        fields: dict[str, Any] = {"due_at": until}
        if republished:
            fields["republished"] = firestore.Increment(1)
        self.round_trips.add("update")
        try:
            await ref.update(fields, option=self._db.write_option(last_update_time=read_time))
        except gexc.FailedPrecondition:
            return False
        return True

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

"""Sessions and their stages: create, read, update, list, and a stage's fan-in markers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import (
    AgentExecution,
    AuditEvent,
    ConversationMessage,
    Session,
    Stage,
    utcnow,
)
from tarsy.persistence._firestore import (
    AUDIT,
    COST_FIELD,
    DONE,
    MARKERS,
    MESSAGES,
    SESSIONS,
    STAGES,
    FirestoreBase,
    document_of,
    firestore_fields,
    record_id,
    with_cost,
)
from tarsy.persistence.updates import SessionUpdate, StageUpdate

if TYPE_CHECKING:
    from tarsy.persistence.session_list import SessionPage, SessionQuery


class SessionRecords(FirestoreBase):
    """The records of sessions and stages."""

    async def create_session(self, session: Session) -> None:
        """Create the session document (fails if it already exists)."""
        batch = self._db.batch()
        self._write(batch, self._session(session.session_id), document_of(session), create=True)
        self.round_trips.add("commit")
        await batch.commit()

    async def delete_session(self, session_id: str) -> None:
        """Delete a session document, and its chunks, that nothing else refers to yet."""
        batch = self._db.batch()
        await self._delete_with_chunks(batch, self._session(session_id))
        self.round_trips.add("commit")
        await batch.commit()

    async def get_session(self, session_id: str) -> Session | None:
        """Return a session, or None."""
        self.round_trips.add("get")
        snap = await self._session(session_id).get()
        return Session.model_validate(await self._read(snap)) if snap.exists else None

    async def update_session(self, session_id: str, update: SessionUpdate) -> None:
        """Apply a typed session update."""
        self.round_trips.add("update")
        await self._session(session_id).update(firestore_fields(update))

    async def list_sessions(self, query: SessionQuery) -> SessionPage:
        """One page of sessions, newest first, filtered (see :mod:`tarsy.persistence.session_list`).

        Reads only the summary fields (a projection), one more row than the page
        holds to know whether a next page exists. Each equality filter has a
        composite index ``(field, created_at DESC)``; Firestore merges them.
        """
        # Imported here: only the api lists sessions (ingest and step never import it).
        from tarsy.persistence.session_list import SUMMARY_FIELDS, SessionSummary, page_of

        self.round_trips.add("query")
        listing = self._db.collection(SESSIONS).select((*SUMMARY_FIELDS, COST_FIELD))
        filters = query.equality_filters()
        if "status" in filters:
            listing = listing.where(filter=firestore.FieldFilter("status", "==", filters["status"]))
        if "alert_type" in filters:
            listing = listing.where(
                filter=firestore.FieldFilter("alert_type", "==", filters["alert_type"])
            )
        if "source" in filters:
            listing = listing.where(filter=firestore.FieldFilter("source", "==", filters["source"]))
        if "verdict" in filters:
            listing = listing.where(
                filter=firestore.FieldFilter("verdict", "==", filters["verdict"])
            )
        if query.audit_key is not None:
            listing = listing.where(
                filter=firestore.FieldFilter("audit_keys", "array_contains", query.audit_key)
            )
        if query.since is not None:
            listing = listing.where(filter=firestore.FieldFilter("created_at", ">=", query.since))
        if query.until is not None:
            listing = listing.where(filter=firestore.FieldFilter("created_at", "<", query.until))
        listing = listing.order_by("created_at", direction=firestore.Query.DESCENDING).order_by(
            "__name__", direction=firestore.Query.DESCENDING
        )
        if query.cursor is not None:
            listing = listing.start_after(
                {"created_at": query.cursor.created_at, "__name__": query.cursor.session_id}
            )
        rows = [
            SessionSummary.model_validate(
                {**with_cost(snap.to_dict() or {}), "session_id": snap.id}
            )
            async for snap in listing.limit(query.limit + 1).stream()
        ]
        return page_of(rows, query.limit)

    async def earlier_sessions(
        self, keys: Sequence[str], before: datetime, limit: int
    ) -> list[Session]:
        """Sessions created before ``before`` that share a memory key, newest first.

        One query: array-contains-any on ``memory_keys`` (at most 30 keys), ordered by
        ``created_at``; its composite index is in ``infra/firestore.tf``.
        """
        if not keys:
            return []
        self.round_trips.add("query")
        query = (
            self._db.collection(SESSIONS)
            .where(filter=firestore.FieldFilter("memory_keys", "array_contains_any", list(keys)))
            .where(filter=firestore.FieldFilter("created_at", "<", before))
            .order_by("created_at", direction=firestore.Query.DESCENDING)
            .limit(limit)
        )
        return [Session.model_validate(await self._read(snap)) async for snap in query.stream()]

    async def create_reinvestigation(self, session: Session) -> None:
        """Create a session that investigates another's alert again, and link the two at once.

        The new session names the first (``investigation_of``); the first lists it
        (``investigated_again_as``). One batch: neither link exists without the other.
        """
        assert session.investigation_of is not None
        batch = self._db.batch()
        self._write(batch, self._session(session.session_id), document_of(session), create=True)
        batch.update(
            self._session(session.investigation_of),
            {"investigated_again_as": firestore.ArrayUnion([session.session_id])},
        )
        self.round_trips.add("commit")
        await batch.commit()

    async def delete_reinvestigation(self, session: Session) -> None:
        """Undo :meth:`create_reinvestigation` (its start could not be published)."""
        assert session.investigation_of is not None
        batch = self._db.batch()
        await self._delete_with_chunks(batch, self._session(session.session_id))
        batch.update(
            self._session(session.investigation_of),
            {"investigated_again_as": firestore.ArrayRemove([session.session_id])},
        )
        self.round_trips.add("commit")
        await batch.commit()

    async def list_audit(self, session_id: str) -> list[AuditEvent]:
        """What people did to a session, oldest first."""
        self.round_trips.add("query")
        query = self._session(session_id).collection(AUDIT).order_by("__name__")
        return [AuditEvent.model_validate(s.to_dict()) async for s in query.stream()]

    async def list_stages(self, session_id: str) -> list[Stage]:
        """Return a session's stages in order."""
        self.round_trips.add("query")
        query = self._session(session_id).collection(STAGES).order_by("__name__")
        return [Stage.model_validate(s.to_dict()) async for s in query.stream()]

    async def get_stage(self, session_id: str, index: int) -> Stage | None:
        """Return one stage, or None."""
        self.round_trips.add("get")
        snap = await self._stage(session_id, index).get()
        return Stage.model_validate(snap.to_dict()) if snap.exists else None

    async def update_stage(self, session_id: str, index: int, update: StageUpdate) -> None:
        """Apply a typed stage update."""
        self.round_trips.add("update")
        await self._stage(session_id, index).update(firestore_fields(update))

    async def start_stage(
        self,
        session_id: str,
        stage: Stage,
        executions: Sequence[AgentExecution],
        initial_messages: dict[str, list[ConversationMessage]],
        session: SessionUpdate,
    ) -> bool:
        """Create a stage with its executions and their first messages, atomically.

        Returns False when the stage already exists (a redelivered start).
        """
        batch = self._db.batch()
        batch.create(self._stage(session_id, stage.index), document_of(stage))
        for execution in executions:
            ref = self._execution(execution.execution_id)
            batch.create(ref, document_of(execution))
            for n, message in enumerate(initial_messages.get(execution.execution_id, [])):
                self._write(
                    batch, ref.collection(MESSAGES).document(record_id(0, n)), document_of(message)
                )
        batch.update(self._session(session_id), firestore_fields(session))
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except gexc.AlreadyExists:
            return False
        return True

    async def finished_agents(self, session_id: str, index: int) -> dict[str, str]:
        """``{execution_id: status}`` of the stage's agent executions that have finished."""
        self.round_trips.add("query")
        query = self._stage(session_id, index).collection(DONE)
        finished: dict[str, str] = {}
        async for snap in query.stream():
            data = snap.to_dict() or {}
            if data.get("role", "agent") == "agent":
                finished[snap.id] = str(data.get("status"))
        return finished

    async def claim_marker(self, session_id: str, index: int, name: str) -> bool:
        """Create a stage marker; True only for the one caller that created it."""
        self.round_trips.add("create")
        ref = self._stage(session_id, index).collection(MARKERS).document(name)
        try:
            await ref.create({"name": name, "at": utcnow()})
        except gexc.AlreadyExists:
            return False
        return True

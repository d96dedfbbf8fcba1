"""Audited actions, the audit across sessions, and erasure (Firestore I/O).

Design constraint: an action's state change and its audit record are one
commit (issue 42): every write here adds the ``sessions/{sid}/audit/{id}``
document and the session's ``audit_keys`` to the batch that changes the
state, so a crash or a failed write leaves both or neither. The pure parts
(the writes, the query, the page) are :mod:`tarsy.persistence.audit_log`.

Erasure deletes a session's whole subtree (its stages, audit, notification
ledger entries and their subcollections; its memory keys are fields of the
session document), its executions' subtrees, their thought signatures and
the alert fingerprints naming it, and the investigate-again links other
sessions hold to it, then keeps one record: the erasure's, at ``audit/{id}``
(the collection-group query of the audit reads it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import AgentExecution, AuditEvent, ConversationMessage, TimelineEvent, utcnow
from tarsy.persistence._firestore import (
    ALERT_FINGERPRINTS,
    AUDIT,
    DONE,
    EXECUTIONS,
    SESSIONS,
    THOUGHT_SIGNATURES,
    TIMELINE,
    FirestoreBase,
    document_of,
    firestore_fields,
    record_id,
)
from tarsy.persistence.audit_log import (
    ActionRecord,
    ActionWrites,
    AuditEntry,
    AuditPage,
    AuditQuery,
    audit_page_of,
)
from tarsy.persistence.updates import ExecutionUpdate


class AuditRecords(FirestoreBase):
    """Actions committed with their audit record; the audit read across sessions; erasure."""

    def _add_record(self, batch: Any, record: ActionRecord) -> None:
        """Add an action's audit document and the list's keys to ``batch``."""
        session = self._session(record.session_id)
        batch.create(
            session.collection(AUDIT).document(record.audit_id),
            record.event.model_dump(mode="python"),
        )
        batch.update(session, {"audit_keys": firestore.ArrayUnion(list(record.keys))})

    async def commit_action(self, writes: ActionWrites) -> None:
        """Commit an action's state change and its audit record in one batch."""
        batch = self._db.batch()
        session_id = writes.session_id
        if writes.new_session is not None:
            new = writes.new_session
            self._write(batch, self._session(new.session_id), document_of(new), create=True)
            batch.update(
                self._session(session_id),
                {"investigated_again_as": firestore.ArrayUnion([new.session_id])},
            )
        for execution_id, update in writes.executions:
            batch.update(self._execution(execution_id), firestore_fields(update))
        for index, stage in writes.stages:
            batch.update(self._stage(session_id, index), firestore_fields(stage))
        if writes.session is not None:
            batch.update(self._session(session_id), firestore_fields(writes.session))
        if writes.record is not None:
            self._add_record(batch, writes.record)
        self.round_trips.add("commit")
        await batch.commit()

    async def undo_reinvestigation(self, writes: ActionWrites) -> None:
        """Undo a committed investigate-again whose start could not be published, record too."""
        assert writes.new_session is not None
        first = self._session(writes.session_id)
        batch = self._db.batch()
        await self._delete_with_chunks(batch, self._session(writes.new_session.session_id))
        batch.update(
            first, {"investigated_again_as": firestore.ArrayRemove([writes.new_session.session_id])}
        )
        if writes.record is not None:
            batch.delete(first.collection(AUDIT).document(writes.record.audit_id))
        self.round_trips.add("commit")
        await batch.commit()

    async def create_recorded_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent],
        record: ActionRecord,
    ) -> bool:
        """``create_execution`` with the action's audit record in its batch; False if it exists."""
        batch = self._db.batch()
        ref = self._add_execution(batch, execution, opening)
        for n, event in enumerate(timeline):
            self._write(
                batch, ref.collection(TIMELINE).document(record_id(0, n)), document_of(event)
            )
        self._add_record(batch, record)
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except gexc.AlreadyExists:
            return False
        return True

    async def end_recorded_execution(
        self, execution: AgentExecution, update: ExecutionUpdate, record: ActionRecord
    ) -> None:
        """``end_execution`` (the update and its fan-in marker) with the audit record, at once."""
        assert update.status is not None and update.status.is_terminal
        batch = self._db.batch()
        batch.update(self._execution(execution.execution_id), firestore_fields(update))
        if execution.stage >= 0:
            marker = self._stage(execution.session_id, execution.stage).collection(DONE)
            batch.set(
                marker.document(execution.execution_id),
                {"status": update.status.value, "role": execution.role, "at": utcnow()},
            )
        self._add_record(batch, record)
        self.round_trips.add("commit")
        await batch.commit()

    async def list_all_audit(self, query: AuditQuery) -> AuditPage:
        """One page of the audit across sessions, newest first (a collection-group query).

        Each equality filter with the time order needs a composite index on the
        ``audit`` collection group (``actor``/``action``, ``at`` DESC).
        """
        self.round_trips.add("query")
        listing: Any = self._db.collection_group(AUDIT)
        if query.actor is not None:
            listing = listing.where(filter=firestore.FieldFilter("actor", "==", query.actor))
        if query.action is not None:
            listing = listing.where(filter=firestore.FieldFilter("action", "==", query.action))
        if query.since is not None:
            listing = listing.where(filter=firestore.FieldFilter("at", ">=", query.since))
        if query.until is not None:
            listing = listing.where(filter=firestore.FieldFilter("at", "<", query.until))
        listing = listing.order_by("at", direction=firestore.Query.DESCENDING).order_by(
            "__name__", direction=firestore.Query.DESCENDING
        )
        if query.cursor is not None:
            after = self._db.document(query.cursor.path)
            listing = listing.start_after({"at": query.cursor.at, "__name__": after})
        rows: list[AuditEntry] = []
        async for snap in listing.limit(query.limit + 1).stream():
            event = AuditEvent.model_validate(snap.to_dict() or {})
            owner = snap.reference.parent.parent
            rows.append(
                AuditEntry(
                    **event.model_dump(),
                    session_id=owner.id if owner is not None else event.target,
                    path=snap.reference.path,
                )
            )
        return audit_page_of(rows, query.limit)

    async def erase_session(self, record: ActionRecord) -> bool:
        """Delete every record of a session, then keep its erasure's record alone.

        The erasure's record is written first (``audit/{id}``, outside the
        session), so an erasure that dies half-way is recorded and can be run
        again; it names the session in ``target``. Returns False: no such session.
        """
        session_id = record.session_id
        session = self._session(session_id)
        self.round_trips.add("get")
        snapshot = await session.get()
        if not snapshot.exists:
            return False
        first = (snapshot.to_dict() or {}).get("investigation_of")
        self.round_trips.add("create")
        await (
            self._db.collection(AUDIT)
            .document(record.audit_id)
            .create(record.event.model_dump(mode="python"))
        )
        self.round_trips.add("query")
        executions = self._db.collection(EXECUTIONS).where(
            filter=firestore.FieldFilter("session_id", "==", session_id)
        )
        async for snap in executions.stream():
            await self._db.recursive_delete(snap.reference)
            await self._db.collection(THOUGHT_SIGNATURES).document(snap.id).delete()
        fingerprints = self._db.collection(ALERT_FINGERPRINTS).where(
            filter=firestore.FieldFilter("session_id", "==", session_id)
        )
        async for snap in fingerprints.stream():
            await snap.reference.delete()
        # Before the session itself: a rerun after a crash here still finds the session.
        await self._unlink_investigations(session_id, first if isinstance(first, str) else None)
        # Last: the session's own subtree (stages, audit, notification ledger, chunks).
        await self._db.recursive_delete(session)
        return True

    async def _unlink_investigations(self, session_id: str, first: str | None) -> None:
        """Clear the links other sessions hold to an erased session, in one batch.

        Design constraint: nothing outside the erasure's record names an erased
        session. Investigating again links two sessions both ways (the new one's
        ``investigation_of``, the first's ``investigated_again_as``); left behind,
        a link would keep the id (an erasure may be for a person's request) and
        lead the pages and the CLI to a 404. The sessions naming it are found by
        query, not from its own list, so a link written by an older version is
        cleared too.

        Args:
            session_id: The session being erased.
            first: The session it investigated again, if any (its ``investigation_of``).
        """
        batch = self._db.batch()
        writes = 0
        if first is not None:
            self.round_trips.add("get")
            if (await self._session(first).get()).exists:
                batch.update(
                    self._session(first),
                    {"investigated_again_as": firestore.ArrayRemove([session_id])},
                )
                writes += 1
        self.round_trips.add("query")
        again = self._db.collection(SESSIONS).where(
            filter=firestore.FieldFilter("investigation_of", "==", session_id)
        )
        async for snap in again.stream():
            batch.update(snap.reference, {"investigation_of": None})
            writes += 1
        if writes:
            self.round_trips.add("commit")
            await batch.commit()

"""Executions and their records: conversation, timeline, interactions, live progress."""

from __future__ import annotations

from collections.abc import Sequence

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    LLMInteraction,
    MCPInteraction,
    TimelineEvent,
    timeline_event,
    utcnow,
)
from tarsy.persistence._firestore import (
    DONE,
    EXECUTIONS,
    LLM_INTERACTIONS,
    MCP_INTERACTIONS,
    PROGRESS,
    TIMELINE,
    FirestoreBase,
    document_of,
    firestore_fields,
    llm_interaction_of,
    record_id,
    with_cost,
)
from tarsy.persistence.progress import ProgressSnapshot
from tarsy.persistence.updates import ExecutionUpdate


class ExecutionRecords(FirestoreBase):
    """The records of executions."""

    async def get_execution(self, execution_id: str) -> AgentExecution | None:
        """Return an execution, or None."""
        self.round_trips.add("get")
        snap = await self._execution(execution_id).get()
        return (
            AgentExecution.model_validate(with_cost(snap.to_dict() or {})) if snap.exists else None
        )

    async def create_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent] = (),
    ) -> bool:
        """Create an execution with its opening messages (and events); False if it exists."""
        batch = self._db.batch()
        ref = self._add_execution(batch, execution, opening)
        for n, event in enumerate(timeline):
            self._write(
                batch, ref.collection(TIMELINE).document(record_id(0, n)), document_of(event)
            )
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except gexc.AlreadyExists:
            return False
        return True

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        """Return a session's executions ordered by stage and creation."""
        self.round_trips.add("query")
        query = self._db.collection(EXECUTIONS).where(
            filter=firestore.FieldFilter("session_id", "==", session_id)
        )
        executions = [
            AgentExecution.model_validate(with_cost(s.to_dict() or {}))
            async for s in query.stream()
        ]
        # Stage order; the executive summary (stage -1, no stage) comes last.
        return sorted(
            executions,
            key=lambda e: (e.stage < 0, e.stage, e.created_at, e.execution_id),
        )

    async def update_execution(self, execution_id: str, update: ExecutionUpdate) -> None:
        """Apply a typed execution update."""
        self.round_trips.add("update")
        await self._execution(execution_id).update(firestore_fields(update))

    async def update_executions(
        self, execution_ids: Sequence[str], update: ExecutionUpdate
    ) -> None:
        """Apply one typed update to several executions in one batch."""
        if not execution_ids:
            return
        batch = self._db.batch()
        for execution_id in execution_ids:
            batch.update(self._execution(execution_id), firestore_fields(update))
        self.round_trips.add("commit")
        await batch.commit()

    async def end_execution(self, execution: AgentExecution, update: ExecutionUpdate) -> None:
        """Apply a terminal update and write the execution's completion marker, atomically.

        For an execution ended outside its own steps (cancelled on its own): its
        stage's fan-in counts the marker as it counts those of finished steps.
        """
        assert update.status is not None and update.status.is_terminal
        batch = self._db.batch()
        batch.update(self._execution(execution.execution_id), firestore_fields(update))
        if execution.stage >= 0:
            marker = self._stage(execution.session_id, execution.stage).collection(DONE)
            batch.set(
                marker.document(execution.execution_id),
                {"status": update.status.value, "role": execution.role, "at": utcnow()},
            )
        self.round_trips.add("commit")
        await batch.commit()

    async def load_messages(self, execution_id: str) -> list[ConversationMessage]:
        """Return the conversation of an execution, in order."""
        self.round_trips.add("query")
        messages, _ = await self._conversation(execution_id)
        return messages

    async def list_timeline(self, execution_id: str) -> list[TimelineEvent]:
        """Return an execution's timeline in order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(TIMELINE).order_by("__name__")
        return [timeline_event(await self._read(s)) async for s in query.stream()]

    async def list_timeline_records(self, execution_id: str) -> list[tuple[str, TimelineEvent]]:
        """Return an execution's timeline in order, each event with its document id."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(TIMELINE).order_by("__name__")
        return [(s.id, timeline_event(await self._read(s))) async for s in query.stream()]

    async def list_llm_interactions(self, execution_id: str) -> list[LLMInteraction]:
        """Return an execution's LLM interaction records in step order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(LLM_INTERACTIONS).order_by("__name__")
        return [llm_interaction_of(await self._read(s)) async for s in query.stream()]

    async def list_mcp_interactions(self, execution_id: str) -> list[MCPInteraction]:
        """Return an execution's MCP interaction records in order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(MCP_INTERACTIONS).order_by("__name__")
        return [MCPInteraction.model_validate(await self._read(s)) async for s in query.stream()]

    async def write_progress(self, execution_id: str, progress: ProgressSnapshot) -> None:
        """Overwrite the live progress of the call that is streaming."""
        self.round_trips.add("set")
        ref = self._execution(execution_id).collection(PROGRESS).document("current")
        await ref.set({**document_of(progress), "updated_at": utcnow()})

    async def live_progress(self, execution_ids: Sequence[str]) -> dict[str, ProgressSnapshot]:
        """The live progress of each execution whose call is streaming now (one round trip)."""
        if not execution_ids:
            return {}
        self.round_trips.add("get_all")
        refs = {
            self._execution(eid).collection(PROGRESS).document("current").path: eid
            for eid in execution_ids
        }
        found: dict[str, ProgressSnapshot] = {}
        current = [self._db.document(path) for path in refs]
        async for snap in self._db.get_all(current):
            if snap.exists:
                found[refs[snap.reference.path]] = ProgressSnapshot.model_validate(snap.to_dict())
        return found

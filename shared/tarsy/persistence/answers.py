"""Sub-agent turns: a parent's waiting turn, its answers, its conversations."""

from __future__ import annotations

from datetime import datetime

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import (
    AgentExecution,
    utcnow,
)
from tarsy.persistence._firestore import (
    ANSWERED_MARKER,
    ANSWERS,
    EXECUTIONS,
    MARKERS,
    FirestoreBase,
    document_of,
    with_cost,
)
from tarsy.persistence.turns import PendingTurn, SubAgentAnswer


class SubAgentRecords(FirestoreBase):
    """The records of sub-agent conversations."""

    async def get_pending_turn(self, execution_id: str, step: int) -> PendingTurn | None:
        """The turn of ``step`` that waits for sub-agents, or None."""
        self.round_trips.add("get")
        snap = await self._sub_agent_turn(execution_id, step).get()
        return PendingTurn.model_validate(await self._read(snap)) if snap.exists else None

    async def record_answer(self, execution_id: str, step: int, answer: SubAgentAnswer) -> None:
        """Write a sub-agent's answer to call ``answer.call_id`` of the parent's ``step``."""
        self.round_trips.add("set")
        ref = self._sub_agent_turn(execution_id, step).collection(ANSWERS)
        batch = self._db.batch()
        self._write(batch, ref.document(answer.call_id), document_of(answer))
        await batch.commit()

    async def list_answers(self, execution_id: str, step: int) -> dict[str, SubAgentAnswer]:
        """The answers the parent's ``step`` has received, by call id."""
        self.round_trips.add("query")
        query = self._sub_agent_turn(execution_id, step).collection(ANSWERS)
        answers = [SubAgentAnswer.model_validate(await self._read(s)) async for s in query.stream()]
        return {answer.call_id: answer for answer in answers}

    async def claim_answered(self, execution_id: str, step: int) -> bool:
        """Create the marker that every answer is in; True only for the one who created it."""
        self.round_trips.add("create")
        ref = self._sub_agent_turn(execution_id, step).collection(MARKERS).document(ANSWERED_MARKER)
        try:
            await ref.create({"name": ANSWERED_MARKER, "at": utcnow()})
        except gexc.AlreadyExists:
            return False
        return True

    async def list_sub_agents(
        self, execution_id: str
    ) -> dict[str, tuple[AgentExecution, datetime]]:
        """The sub-agent conversations an execution started, with their update times."""
        self.round_trips.add("query")
        query = self._db.collection(EXECUTIONS).where(
            filter=firestore.FieldFilter("parent_execution_id", "==", execution_id)
        )
        return {
            s.id: (AgentExecution.model_validate(with_cost(s.to_dict() or {})), s.update_time)
            async for s in query.stream()
        }

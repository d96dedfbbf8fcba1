"""A step's records: its claim and lease, its one atomic commit, its published message.

A step is claimed with a lease written under a ``last_update_time`` precondition and
committed as ONE atomic batch whose execution update carries the claim's update time
as its precondition: if any other invocation touched the execution since the claim,
nothing is written. Contention-free: no transaction holds locks while the LLM runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.errors import LeaseHeldError
from tarsy.models import (
    AgentExecution,
    ExecutionStatus,
    Session,
    StepMessage,
    utcnow,
)
from tarsy.persistence._firestore import (
    COST_FIELD,
    DONE,
    LLM_INTERACTIONS,
    MCP_INTERACTIONS,
    MESSAGES,
    PROGRESS,
    PUBLISHED,
    SUB_AGENT_TURNS,
    THOUGHT_SIGNATURES,
    TIMELINE,
    TOOL_LISTS,
    FirestoreBase,
    document_of,
    firestore_fields,
    llm_interaction_document,
    record_id,
    usage_increments,
    with_cost,
)
from tarsy.persistence.step_values import (
    Claim,
    StepCommit,
    StepState,
    conversation_is_current,
    follow_up_id,
)
from tarsy.persistence.tool_lists import tool_list_of
from tarsy.persistence.updates import ExecutionUpdate

logger = logging.getLogger(__name__)


class StepRecords(FirestoreBase):
    """A step's claim, lease, commit and publish records."""

    async def get_step_state(
        self,
        execution_id: str,
        session_id: str,
        tool_servers: Sequence[str] = (),
        *,
        conversation: bool = False,
    ) -> StepState:
        """Read an execution, its session, its provider state and cached tool lists.

        One round trip for all the documents (``tool_servers`` names the lists).
        With ``conversation``, the execution's messages are queried alongside, in
        the same round trip (a second RPC sent at once), and kept when they are
        current (:func:`conversation_is_current`): the step then makes no query
        of its own after its claim.
        """
        self.round_trips.add("get_all")
        documents = self._step_documents(execution_id, session_id, tool_servers)
        if not conversation:
            return await documents
        self.round_trips.add("query", alongside=True)
        state, (messages, read_at) = await asyncio.gather(
            documents, self._conversation(execution_id)
        )
        if (
            state.update_time is not None
            and read_at is not None
            and conversation_is_current(state.update_time, read_at)
        ):
            state.conversation = messages
        return state

    async def _step_documents(
        self, execution_id: str, session_id: str, tool_servers: Sequence[str]
    ) -> StepState:
        exec_ref, session_ref = self._execution(execution_id), self._session(session_id)
        state_ref = self._db.collection(THOUGHT_SIGNATURES).document(execution_id)
        list_refs = [self._db.collection(TOOL_LISTS).document(s) for s in tool_servers]
        result = StepState()
        async for snap in self._db.get_all([exec_ref, session_ref, state_ref, *list_refs]):
            if not snap.exists:
                continue
            if snap.reference.path == exec_ref.path:
                result.execution = AgentExecution.model_validate(with_cost(snap.to_dict() or {}))
                result.update_time = snap.update_time
            elif snap.reference.path == session_ref.path:
                result.session = Session.model_validate(await self._read(snap))
            elif snap.reference.path == state_ref.path:
                stored = (snap.to_dict() or {}).get("state", {})
                result.provider_state = {str(k): str(v) for k, v in stored.items()}
            else:
                cached = tool_list_of(await self._read(snap))
                result.tool_lists[cached.server] = cached
        return result

    async def claim(
        self,
        execution_id: str,
        *,
        owner: str,
        until: datetime,
        read_time: datetime,
        step: int,
    ) -> Claim:
        """Take the lease on an execution for ``step``, unless someone wrote it since we read it.

        Receiving the message for ``step`` proves it was published, so the claim
        also records ``published_step``.
        """
        option = self._db.write_option(last_update_time=read_time)
        self.round_trips.add("update")
        try:
            result = await self._execution(execution_id).update(
                {
                    "lease_owner": owner,
                    "lease_until": until,
                    # While the step runs, it is due again when its lease runs out.
                    "due_at": until,
                    "status": ExecutionStatus.ACTIVE.value,
                    "published_step": step,
                    "republished": 0,
                },
                option=option,
            )
        except gexc.FailedPrecondition as e:
            raise LeaseHeldError(f"execution {execution_id!r} changed while claiming") from e
        return Claim(owner=owner, until=until, update_time=result.update_time)

    async def renew(self, execution_id: str, claim: Claim, until: datetime) -> Claim | None:
        """Extend a running step's lease (its heartbeat); None if the execution changed.

        The write carries the claim's precondition and yields the new update time
        that the step's commit must then present: a cancel or a takeover in
        between voids both the renewal and the commit.
        """
        option = self._db.write_option(last_update_time=claim.update_time)
        self.round_trips.add("update")
        try:
            result = await self._execution(execution_id).update(
                {"lease_until": until, "due_at": until}, option=option
            )
        except gexc.FailedPrecondition:
            return None
        return Claim(owner=claim.owner, until=until, update_time=result.update_time)

    async def mark_published(self, execution_ids: Sequence[str], step: int) -> None:
        """Record that the messages for ``step`` of these executions went out (one batch).

        The record is a document of its own (``executions/{eid}/published/{step}``):
        a write to the execution document itself would race with the step's claim
        and void the claim's precondition.
        """
        if not execution_ids:
            return
        batch = self._db.batch()
        for execution_id in execution_ids:
            ref = self._execution(execution_id).collection(PUBLISHED).document(f"{step:04d}")
            batch.set(ref, {"step": step, "at": utcnow()})
        self.round_trips.add("commit")
        await batch.commit()

    async def settle_advance(self, execution_id: str, published: StepMessage) -> None:
        """After a finished execution's advance went out: record it, and clear its due time.

        Until then the finished execution stays due, so a redelivery of its last
        step or the sweeper re-runs the advance if its message was lost.
        """
        batch = self._db.batch()
        if published.runs_step:
            ref = self._execution(published.execution_id).collection(PUBLISHED)
            batch.set(
                ref.document(f"{published.step:04d}"), {"step": published.step, "at": utcnow()}
            )
        batch.update(self._execution(execution_id), firestore_fields(ExecutionUpdate(due_at=None)))
        self.round_trips.add("commit")
        await batch.commit()

    async def was_published(self, execution_id: str, step: int) -> bool:
        """Whether the message for ``step`` is known to have gone out."""
        self.round_trips.add("get")
        ref = self._execution(execution_id).collection(PUBLISHED).document(f"{step:04d}")
        return bool((await ref.get()).exists)

    async def commit_step(self, commit: StepCommit) -> bool:
        """Apply one step's writes atomically. Returns False if the claim was lost."""
        batch = self._db.batch()
        exec_ref = self._execution(commit.execution_id)
        for n, message in enumerate(commit.messages):
            ref = exec_ref.collection(MESSAGES).document(record_id(commit.step, n))
            self._write(batch, ref, document_of(message))
        for n, message in enumerate(commit.opening):
            ref = exec_ref.collection(MESSAGES).document(record_id(0, n))
            self._write(batch, ref, document_of(message))
        for n, event in enumerate(commit.timeline):
            ref = exec_ref.collection(TIMELINE).document(record_id(commit.step, n))
            self._write(batch, ref, document_of(event))
        if commit.llm_interaction is not None:
            ref = exec_ref.collection(LLM_INTERACTIONS).document(f"{commit.step:04d}")
            self._write(batch, ref, llm_interaction_document(commit.llm_interaction))
        for n, summary in enumerate(commit.summary_interactions):
            summary_id = f"{commit.step:04d}-summary-{n:02d}"
            ref = exec_ref.collection(LLM_INTERACTIONS).document(summary_id)
            self._write(batch, ref, llm_interaction_document(summary))
        # The real records replace the live progress of the call.
        batch.delete(exec_ref.collection(PROGRESS).document("current"))
        if commit.finished_status is not None and commit.stage_index is not None:
            marker = self._stage(commit.session_id, commit.stage_index).collection(DONE)
            batch.set(
                marker.document(commit.execution_id),
                {"status": commit.finished_status.value, "role": commit.role, "at": utcnow()},
            )
        for n, record in enumerate(commit.mcp_interactions):
            ref = exec_ref.collection(MCP_INTERACTIONS).document(record_id(commit.step, n))
            self._write(batch, ref, document_of(record))
        if commit.provider_state:
            batch.set(
                self._db.collection(THOUGHT_SIGNATURES).document(commit.execution_id),
                {
                    "execution_id": commit.execution_id,
                    "state": commit.provider_state,
                    "expire_at": commit.provider_state_expire_at,
                },
                merge=True,
            )
        execution_update: dict[str, Any] = {
            **firestore_fields(commit.execution),
            "step": commit.next_step,
            "lease_owner": None,
            "lease_until": None,
            **usage_increments("tokens", commit.usage),
        }
        if commit.cost:
            execution_update[COST_FIELD] = firestore.Increment(commit.cost)
        option = (
            self._db.write_option(last_update_time=commit.claim.update_time)
            if commit.claim is not None
            else None
        )
        batch.update(exec_ref, execution_update, option=option)
        if commit.stage_index is not None and commit.stage is not None:
            batch.update(
                self._stage(commit.session_id, commit.stage_index), firestore_fields(commit.stage)
            )
        session_update = {
            **(firestore_fields(commit.session) if commit.session else {}),
            **usage_increments("tokens", commit.usage),
        }
        if commit.cost:
            session_update[COST_FIELD] = firestore.Increment(commit.cost)
        if session_update:
            batch.update(self._session(commit.session_id), session_update)
        if commit.create_execution is not None:
            self._add_execution(batch, commit.create_execution, commit.create_opening)
        self._add_sub_agent_writes(batch, commit)
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except (gexc.FailedPrecondition, gexc.AlreadyExists):
            logger.warning(
                "step %s of %s lost its lease; nothing written", commit.step, commit.execution_id
            )
            return False
        return True

    def _add_sub_agent_writes(self, batch: Any, commit: StepCommit) -> None:
        """A waiting turn, the conversations it starts and the follow-ups it sends."""
        if commit.pending_turn is not None:
            ref = self._execution(commit.execution_id).collection(SUB_AGENT_TURNS)
            self._write(batch, ref.document(f"{commit.pending_turn.step:04d}"),
                        document_of(commit.pending_turn))  # fmt: skip
        for new in commit.new_conversations:
            ref = self._add_execution(batch, new.execution, new.opening)
            for n, event in enumerate(new.timeline):
                self._write(
                    batch, ref.collection(TIMELINE).document(record_id(0, n)), document_of(event)
                )
        for follow_up in commit.follow_ups:
            ref = self._execution(follow_up.execution_id)
            # Only a conversation untouched since the step read it: a cancel in between
            # voids the whole commit, and the sweeper re-runs the step on fresh state.
            option = self._db.write_option(last_update_time=follow_up.read_time)
            batch.update(ref, firestore_fields(follow_up.update), option=option)
            doc_id = follow_up_id(follow_up.step)
            self._write(
                batch, ref.collection(MESSAGES).document(doc_id), document_of(follow_up.message)
            )
            self._write(
                batch, ref.collection(TIMELINE).document(doc_id), document_of(follow_up.event)
            )

"""Firestore persistence, in the layout of the design brief.

::

    sessions/{session_id}                     Session
      stages/{index:02d}                      Stage
    executions/{execution_id}                 AgentExecution
      messages/{step:04d}-{n:03d}             ConversationMessage
      timeline/{step:04d}-{n:03d}             TimelineEvent
      llm_interactions/{step:04d}             LLMInteraction
    thought_signatures/{execution_id}         provider state, with expire_at for TTL

Ids are deterministic, so a redelivered step overwrites what it wrote before
instead of adding a second copy. A step is claimed with a lease written under a
``last_update_time`` precondition and committed as ONE atomic batch whose
execution update carries the claim's update time as its precondition: if any
other invocation touched the execution since the claim, nothing is written.
These are contention-free (no transaction holds locks while the LLM runs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from google.api_core import exceptions as gexc
from google.cloud import firestore
from pydantic import BaseModel, Field

from tarsy.chunking import CHUNKED_FIELD, CHUNKS, chunk_id, restore, spill
from tarsy.errors import LeaseHeldError
from tarsy.llm.base import ToolDefinition
from tarsy.models import (
    AgentExecution,
    AlertFingerprint,
    ConversationMessage,
    ExecutionStatus,
    LLMInteraction,
    MCPInteraction,
    Session,
    Stage,
    StepMessage,
    TimelineEvent,
    TokenUsage,
    utcnow,
)
from tarsy.progress import ProgressSnapshot
from tarsy.recording import RecordedExecution, SessionRecording
from tarsy.session_list import SUMMARY_FIELDS, SessionPage, SessionQuery, SessionSummary, page_of
from tarsy.settings import Settings
from tarsy.sub_agents import PendingTurn, SubAgentAnswer
from tarsy.tools import CachedToolList
from tarsy.transitions import ExecutionUpdate, SessionUpdate, StageUpdate

logger = logging.getLogger(__name__)

_Record = TypeVar("_Record", bound=BaseModel)

SESSIONS = "sessions"
STAGES = "stages"
EXECUTIONS = "executions"
MESSAGES = "messages"
TIMELINE = "timeline"
LLM_INTERACTIONS = "llm_interactions"
MCP_INTERACTIONS = "mcp_interactions"
THOUGHT_SIGNATURES = "thought_signatures"
TOOL_LISTS = "mcp_tool_lists"
DONE = "done"  # sessions/{sid}/stages/{NN}/done/{execution_id}: one per finished execution
MARKERS = "markers"  # sessions/{sid}/stages/{NN}/markers/{name}: claimed once, by create()
PROGRESS = "progress"  # executions/{eid}/progress/current: the call streaming right now
PUBLISHED = "published"  # executions/{eid}/published/{step}: that step's message went out
ALERT_FINGERPRINTS = "alert_fingerprints"  # {dedup_key}: the session an alert started
# executions/{eid}/sub_agent_turns/{step:04d}: a turn waiting for its sub-agents, with
# answers/{call_id} (one per message) and markers/answered (claimed once, by create()).
SUB_AGENT_TURNS = "sub_agent_turns"
ANSWERS = "answers"
ANSWERED_MARKER = "answered"


def record_id(step: int, n: int) -> str:
    """Return the deterministic id of the ``n``-th record written by ``step``."""
    return f"{step:04d}-{n:03d}"


def stage_id(index: int) -> str:
    """Return the document id of a stage."""
    return f"{index:02d}"


def _doc(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="python")


def firestore_fields(update: ExecutionUpdate | SessionUpdate | StageUpdate) -> dict[str, Any]:
    """The Firestore fields of a typed update: exactly the fields it sets."""
    written = update.written() - {"release_lease"}
    fields: dict[str, Any] = {}
    for name in written:
        value = getattr(update, name)
        if isinstance(value, StrEnum):
            value = value.value
        elif isinstance(value, BaseModel):
            value = value.model_dump()
        fields[name] = value
    if isinstance(update, ExecutionUpdate) and update.release_lease:
        fields.update(lease_owner=None, lease_until=None)
    return fields


def _usage_increments(prefix: str, usage: TokenUsage) -> dict[str, Any]:
    return {
        f"{prefix}.{name}": firestore.Increment(value)
        for name, value in usage.model_dump().items()
        if value
    }


class Claim(BaseModel):
    """A step's hold on its execution: who, until when, and the write time to commit against."""

    owner: str
    until: datetime
    update_time: datetime


class NewConversation(BaseModel):
    """A sub-agent execution started by a step, with its opening messages and events."""

    execution: AgentExecution
    opening: list[ConversationMessage]
    timeline: list[TimelineEvent] = Field(default_factory=list)


class FollowUp(BaseModel):
    """A message to a sub-agent that answered before: it runs again from its next step."""

    execution_id: str
    step: int = Field(description="the sub-agent's next step")
    update: ExecutionUpdate
    # When the parent's step read the conversation: the write is conditional on it.
    read_time: datetime
    message: ConversationMessage
    event: TimelineEvent


def follow_up_id(step: int) -> str:
    """The id of a follow-up message: after step ``step - 1``'s records, before ``step``'s."""
    return f"{step - 1:04d}-follow-up"


class StepCommit(BaseModel):
    """Everything one step writes, applied atomically by :meth:`Store.commit_step`."""

    execution_id: str
    session_id: str
    step: int
    next_step: int
    claim: Claim | None = None
    messages: list[ConversationMessage] = Field(default_factory=list)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    llm_interaction: LLMInteraction | None = None
    mcp_interactions: list[MCPInteraction] = Field(default_factory=list)
    # The calls that summarized large tool results: llm_interactions/{step:04d}-summary-{n:02d}.
    summary_interactions: list[LLMInteraction] = Field(default_factory=list)
    # Set when the execution ends: written as its stage's completion marker, atomically.
    finished_status: ExecutionStatus | None = None
    role: str = "agent"
    execution: ExecutionUpdate = Field(default_factory=ExecutionUpdate)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost: float = 0.0
    stage_index: int | None = None
    stage: StageUpdate | None = None
    session: SessionUpdate | None = None
    provider_state: dict[str, str] = Field(default_factory=dict)
    provider_state_expire_at: datetime | None = None
    # The execution that follows this one (e.g. the executive summary), created with it.
    create_execution: AgentExecution | None = None
    create_opening: list[ConversationMessage] = Field(default_factory=list)
    # A turn that messaged sub-agents: what it waits with, the conversations it
    # starts, and those it continues (see tarsy.sub_agents).
    pending_turn: PendingTurn | None = None
    new_conversations: list[NewConversation] = Field(default_factory=list)
    follow_ups: list[FollowUp] = Field(default_factory=list)


@dataclass
class StepState:
    """What a step reads before it runs, in one round trip.

    The execution (with its update time, for the claim's precondition), its
    session, its provider state, and the cached tool lists of the MCP servers
    the step may use.
    """

    execution: AgentExecution | None = None
    update_time: datetime | None = None
    session: Session | None = None
    provider_state: dict[str, str] = field(default_factory=dict)
    tool_lists: dict[str, CachedToolList] = field(default_factory=dict)


@dataclass
class RoundTrips:
    """Counts Firestore RPCs made by this process (the benchmark reads it)."""

    count: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        """Count one round trip of ``kind``."""
        self.count += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


class Store:
    """Typed access to the Firestore layout."""

    def __init__(self, client: firestore.AsyncClient) -> None:
        self._db = client
        self.round_trips = RoundTrips()

    # ─── references ──────────────────────────────────────────────────────────

    def _session(self, session_id: str) -> Any:
        return self._db.collection(SESSIONS).document(session_id)

    def _stage(self, session_id: str, index: int) -> Any:
        return self._session(session_id).collection(STAGES).document(stage_id(index))

    def _execution(self, execution_id: str) -> Any:
        return self._db.collection(EXECUTIONS).document(execution_id)

    # ─── large documents ─────────────────────────────────────────────────────

    @staticmethod
    def _write(batch: Any, ref: Any, data: dict[str, Any], *, create: bool = False) -> None:
        """Add a document to ``batch``, its long strings spilled into chunk documents."""
        document, spilled = spill(data)
        if create:
            batch.create(ref, document)
        else:
            batch.set(ref, document)
        for field_name, pieces in spilled.items():
            for index, text in enumerate(pieces):
                batch.set(
                    ref.collection(CHUNKS).document(chunk_id(field_name, index)),
                    {"field": field_name, "index": index, "text": text},
                )

    async def _read(self, snap: Any) -> dict[str, Any]:
        """A document's data with its chunked strings reassembled (one query if any)."""
        data: dict[str, Any] = snap.to_dict() or {}
        if CHUNKED_FIELD not in data:
            return data
        self.round_trips.add("query")
        chunks = {
            chunk.id: str((chunk.to_dict() or {}).get("text", ""))
            async for chunk in snap.reference.collection(CHUNKS).stream()
        }
        return restore(data, chunks)

    # ─── sessions ────────────────────────────────────────────────────────────

    async def create_session(self, session: Session) -> None:
        """Create the session document (fails if it already exists)."""
        batch = self._db.batch()
        self._write(batch, self._session(session.session_id), _doc(session), create=True)
        self.round_trips.add("commit")
        await batch.commit()

    async def delete_session(self, session_id: str) -> None:
        """Delete a session document, and its chunks, that nothing else refers to yet."""
        ref = self._session(session_id)
        self.round_trips.add("query")
        batch = self._db.batch()
        async for chunk in ref.collection(CHUNKS).stream():
            batch.delete(chunk.reference)
        batch.delete(ref)
        self.round_trips.add("commit")
        await batch.commit()

    async def get_session(self, session_id: str) -> Session | None:
        """Return a session, or None."""
        self.round_trips.add("get")
        snap = await self._session(session_id).get()
        return Session.model_validate(await self._read(snap)) if snap.exists else None

    async def get_execution(self, execution_id: str) -> AgentExecution | None:
        """Return an execution, or None."""
        self.round_trips.add("get")
        snap = await self._execution(execution_id).get()
        return AgentExecution.model_validate(snap.to_dict()) if snap.exists else None

    async def get_step_state(
        self, execution_id: str, session_id: str, tool_servers: Sequence[str] = ()
    ) -> StepState:
        """Read an execution, its session, its provider state and cached tool lists.

        One round trip for all the documents (``tool_servers`` names the lists).
        """
        self.round_trips.add("get_all")
        exec_ref, session_ref = self._execution(execution_id), self._session(session_id)
        state_ref = self._db.collection(THOUGHT_SIGNATURES).document(execution_id)
        list_refs = [self._db.collection(TOOL_LISTS).document(s) for s in tool_servers]
        result = StepState()
        async for snap in self._db.get_all([exec_ref, session_ref, state_ref, *list_refs]):
            if not snap.exists:
                continue
            if snap.reference.path == exec_ref.path:
                result.execution = AgentExecution.model_validate(snap.to_dict())
                result.update_time = snap.update_time
            elif snap.reference.path == session_ref.path:
                result.session = Session.model_validate(await self._read(snap))
            elif snap.reference.path == state_ref.path:
                stored = (snap.to_dict() or {}).get("state", {})
                result.provider_state = {str(k): str(v) for k, v in stored.items()}
            else:
                cached = CachedToolList.model_validate(await self._read(snap))
                result.tool_lists[cached.server] = cached
        return result

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
        batch.create(self._stage(session_id, stage.index), _doc(stage))
        for execution in executions:
            ref = self._execution(execution.execution_id)
            batch.create(ref, _doc(execution))
            for n, message in enumerate(initial_messages.get(execution.execution_id, [])):
                self._write(
                    batch, ref.collection(MESSAGES).document(record_id(0, n)), _doc(message)
                )
        batch.update(self._session(session_id), firestore_fields(session))
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except gexc.AlreadyExists:
            return False
        return True

    # ─── steps ───────────────────────────────────────────────────────────────

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
        if published.kind == "iterate":
            ref = self._execution(published.execution_id).collection(PUBLISHED)
            batch.set(
                ref.document(f"{published.step:04d}"), {"step": published.step, "at": utcnow()}
            )
        batch.update(self._execution(execution_id), firestore_fields(ExecutionUpdate(due_at=None)))
        self.round_trips.add("commit")
        await batch.commit()

    async def write_progress(self, execution_id: str, progress: ProgressSnapshot) -> None:
        """Overwrite the live progress of the call that is streaming."""
        self.round_trips.add("set")
        ref = self._execution(execution_id).collection(PROGRESS).document("current")
        await ref.set({**_doc(progress), "updated_at": utcnow()})

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

    async def was_published(self, execution_id: str, step: int) -> bool:
        """Whether the message for ``step`` is known to have gone out."""
        self.round_trips.add("get")
        ref = self._execution(execution_id).collection(PUBLISHED).document(f"{step:04d}")
        return bool((await ref.get()).exists)

    async def load_messages(self, execution_id: str) -> list[ConversationMessage]:
        """Return the conversation of an execution, in order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(MESSAGES).order_by("__name__")
        return [
            ConversationMessage.model_validate(await self._read(s)) async for s in query.stream()
        ]

    async def commit_step(self, commit: StepCommit) -> bool:
        """Apply one step's writes atomically. Returns False if the claim was lost."""
        batch = self._db.batch()
        exec_ref = self._execution(commit.execution_id)
        for n, message in enumerate(commit.messages):
            ref = exec_ref.collection(MESSAGES).document(record_id(commit.step, n))
            self._write(batch, ref, _doc(message))
        for n, event in enumerate(commit.timeline):
            ref = exec_ref.collection(TIMELINE).document(record_id(commit.step, n))
            self._write(batch, ref, _doc(event))
        if commit.llm_interaction is not None:
            ref = exec_ref.collection(LLM_INTERACTIONS).document(f"{commit.step:04d}")
            self._write(batch, ref, _doc(commit.llm_interaction))
        for n, summary in enumerate(commit.summary_interactions):
            summary_id = f"{commit.step:04d}-summary-{n:02d}"
            ref = exec_ref.collection(LLM_INTERACTIONS).document(summary_id)
            self._write(batch, ref, _doc(summary))
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
            self._write(batch, ref, _doc(record))
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
            **_usage_increments("tokens", commit.usage),
        }
        if commit.cost:
            execution_update["cost"] = firestore.Increment(commit.cost)
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
            **_usage_increments("tokens", commit.usage),
        }
        if commit.cost:
            session_update["cost"] = firestore.Increment(commit.cost)
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
                        _doc(commit.pending_turn))  # fmt: skip
        for new in commit.new_conversations:
            ref = self._add_execution(batch, new.execution, new.opening)
            for n, event in enumerate(new.timeline):
                self._write(batch, ref.collection(TIMELINE).document(record_id(0, n)), _doc(event))
        for follow_up in commit.follow_ups:
            ref = self._execution(follow_up.execution_id)
            # Only a conversation untouched since the step read it: a cancel in between
            # voids the whole commit, and the sweeper re-runs the step on fresh state.
            option = self._db.write_option(last_update_time=follow_up.read_time)
            batch.update(ref, firestore_fields(follow_up.update), option=option)
            doc_id = follow_up_id(follow_up.step)
            self._write(batch, ref.collection(MESSAGES).document(doc_id), _doc(follow_up.message))
            self._write(batch, ref.collection(TIMELINE).document(doc_id), _doc(follow_up.event))

    # ─── sub-agent answers ───────────────────────────────────────────────────

    def _sub_agent_turn(self, execution_id: str, step: int) -> Any:
        return self._execution(execution_id).collection(SUB_AGENT_TURNS).document(f"{step:04d}")

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
        self._write(batch, ref.document(answer.call_id), _doc(answer))
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
            s.id: (AgentExecution.model_validate(s.to_dict()), s.update_time)
            async for s in query.stream()
        }

    # ─── executions and stages ───────────────────────────────────────────────

    def _add_execution(
        self, batch: Any, execution: AgentExecution, opening: Sequence[ConversationMessage]
    ) -> Any:
        """Add the creation of an execution and its opening messages to ``batch``."""
        ref = self._execution(execution.execution_id)
        batch.create(ref, _doc(execution))
        for n, message in enumerate(opening):
            self._write(batch, ref.collection(MESSAGES).document(record_id(0, n)), _doc(message))
        return ref

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
            self._write(batch, ref.collection(TIMELINE).document(record_id(0, n)), _doc(event))
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except gexc.AlreadyExists:
            return False
        return True

    async def get_stage(self, session_id: str, index: int) -> Stage | None:
        """Return one stage, or None."""
        self.round_trips.add("get")
        snap = await self._stage(session_id, index).get()
        return Stage.model_validate(snap.to_dict()) if snap.exists else None

    async def update_stage(self, session_id: str, index: int, update: StageUpdate) -> None:
        """Apply a typed stage update."""
        self.round_trips.add("update")
        await self._stage(session_id, index).update(firestore_fields(update))

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

    # ─── MCP tool lists ──────────────────────────────────────────────────────

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        """The cached tool lists of ``servers`` that exist, in one round trip."""
        if not servers:
            return {}
        self.round_trips.add("get_all")
        refs = [self._db.collection(TOOL_LISTS).document(s) for s in servers]
        lists: dict[str, CachedToolList] = {}
        async for snap in self._db.get_all(refs):
            if snap.exists:
                cached = CachedToolList.model_validate(await self._read(snap))
                lists[cached.server] = cached
        return lists

    async def save_tool_list(self, server: str, tools: Sequence[ToolDefinition]) -> None:
        """Cache a server's tools."""
        cached = CachedToolList(server=server, tools=list(tools), fetched_at=utcnow())
        batch = self._db.batch()
        self._write(batch, self._db.collection(TOOL_LISTS).document(server), _doc(cached))
        self.round_trips.add("commit")
        await batch.commit()

    # ─── the sweeper's queries ───────────────────────────────────────────────

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

    async def list_mcp_interactions(self, execution_id: str) -> list[MCPInteraction]:
        """Return an execution's MCP interaction records in order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(MCP_INTERACTIONS).order_by("__name__")
        return [MCPInteraction.model_validate(await self._read(s)) async for s in query.stream()]

    # ─── reading a whole session ─────────────────────────────────────────────

    async def list_stages(self, session_id: str) -> list[Stage]:
        """Return a session's stages in order."""
        self.round_trips.add("query")
        query = self._session(session_id).collection(STAGES).order_by("__name__")
        return [Stage.model_validate(s.to_dict()) async for s in query.stream()]

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        """Return a session's executions ordered by stage and creation."""
        self.round_trips.add("query")
        query = self._db.collection(EXECUTIONS).where(
            filter=firestore.FieldFilter("session_id", "==", session_id)
        )
        executions = [AgentExecution.model_validate(s.to_dict()) async for s in query.stream()]
        # Stage order; the executive summary (stage -1, no stage) comes last.
        return sorted(
            executions,
            key=lambda e: (e.stage < 0, e.stage, e.created_at, e.execution_id),
        )

    async def list_timeline(self, execution_id: str) -> list[TimelineEvent]:
        """Return an execution's timeline in order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(TIMELINE).order_by("__name__")
        return [TimelineEvent.model_validate(await self._read(s)) async for s in query.stream()]

    async def list_timeline_records(self, execution_id: str) -> list[tuple[str, TimelineEvent]]:
        """Return an execution's timeline in order, each event with its document id."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(TIMELINE).order_by("__name__")
        return [
            (s.id, TimelineEvent.model_validate(await self._read(s))) async for s in query.stream()
        ]

    async def list_llm_interactions(self, execution_id: str) -> list[LLMInteraction]:
        """Return an execution's LLM interaction records in step order."""
        self.round_trips.add("query")
        query = self._execution(execution_id).collection(LLM_INTERACTIONS).order_by("__name__")
        return [LLMInteraction.model_validate(await self._read(s)) async for s in query.stream()]

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

    async def update_execution(self, execution_id: str, update: ExecutionUpdate) -> None:
        """Apply a typed execution update."""
        self.round_trips.add("update")
        await self._execution(execution_id).update(firestore_fields(update))

    async def update_session(self, session_id: str, update: SessionUpdate) -> None:
        """Apply a typed session update."""
        self.round_trips.add("update")
        await self._session(session_id).update(firestore_fields(update))

    # ─── listing sessions ────────────────────────────────────────────────────

    async def list_sessions(self, query: SessionQuery) -> SessionPage:
        """One page of sessions, newest first, filtered (see :mod:`tarsy.session_list`).

        Reads only the summary fields (a projection), one more row than the page
        holds to know whether a next page exists. Each equality filter has a
        composite index ``(field, created_at DESC)``; Firestore merges them.
        """
        self.round_trips.add("query")
        listing = self._db.collection(SESSIONS).select(SUMMARY_FIELDS)
        filters = query.equality_filters()
        if "status" in filters:
            listing = listing.where(filter=firestore.FieldFilter("status", "==", filters["status"]))
        if "alert_type" in filters:
            listing = listing.where(
                filter=firestore.FieldFilter("alert_type", "==", filters["alert_type"])
            )
        if "source" in filters:
            listing = listing.where(filter=firestore.FieldFilter("source", "==", filters["source"]))
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
            SessionSummary.model_validate({**(snap.to_dict() or {}), "session_id": snap.id})
            async for snap in listing.limit(query.limit + 1).stream()
        ]
        return page_of(rows, query.limit)

    # ─── reading a session back (replay) ─────────────────────────────────────

    async def _step_records(
        self, collection: Any, model: type[_Record]
    ) -> list[tuple[str, _Record]]:
        """A subcollection of step records (ids ``{step:04d}...``), as ``(id, record)`` in order."""
        self.round_trips.add("query")
        return [
            (snap.id, model.model_validate(await self._read(snap)))
            async for snap in collection.order_by("__name__").stream()
        ]

    @staticmethod
    def _by_step(records: Sequence[tuple[str, _Record]]) -> dict[int, list[_Record]]:
        """Records grouped by the step their id starts with."""
        grouped: dict[int, list[_Record]] = {}
        for record_id_, record in records:
            grouped.setdefault(int(record_id_.split("-", 1)[0]), []).append(record)
        return grouped

    async def load_recording(
        self, session_id: str, tool_servers: Sequence[str] = ()
    ) -> SessionRecording | None:
        """A session with everything its executions wrote, by step; None if there is none.

        A step's own LLM call is ``llm_interactions/{step:04d}``; the calls that
        summarized its tool results carry a suffix and are kept apart.

        Args:
            session_id: The session.
            tool_servers: MCP servers whose cached tool lists to include.

        Returns:
            The recording, or None when the session does not exist.
        """
        session = await self.get_session(session_id)
        if session is None:
            return None
        executions: list[RecordedExecution] = []
        for execution in await self.list_executions(session_id):
            ref = self._execution(execution.execution_id)
            calls = await self._step_records(ref.collection(LLM_INTERACTIONS), LLMInteraction)
            own = [(i, call) for i, call in calls if "-" not in i]
            executions.append(
                RecordedExecution(
                    execution=execution,
                    messages=self._by_step(
                        await self._step_records(ref.collection(MESSAGES), ConversationMessage)
                    ),
                    timeline=self._by_step(
                        await self._step_records(ref.collection(TIMELINE), TimelineEvent)
                    ),
                    llm_interactions={int(i): call for i, call in own},
                    summary_interactions=self._by_step([(i, c) for i, c in calls if "-" in i]),
                    mcp_interactions=self._by_step(
                        await self._step_records(ref.collection(MCP_INTERACTIONS), MCPInteraction)
                    ),
                )
            )
        return SessionRecording(
            session=session,
            executions=executions,
            tool_lists=await self.get_tool_lists(list(tool_servers)),
        )

    # ─── alert fingerprints (dedup and resolution) ───────────────────────────

    def _alert_fingerprint(self, dedup_key: str) -> Any:
        return self._db.collection(ALERT_FINGERPRINTS).document(dedup_key)

    async def create_alert_session(
        self,
        session: Session,
        dedup_key: str,
        fingerprint: AlertFingerprint,
        *,
        replacing: datetime | None = None,
    ) -> bool:
        """Create a session and the fingerprint claim that names it, in one batch.

        The claim is ``create()``d, so of concurrent deliveries of one alert
        occurrence exactly one batch commits; the others write nothing. An
        expired claim is replaced instead, under a ``last_update_time``
        precondition (``replacing``, the update time it was read with): of
        concurrent replacements, again only one commits. No transaction, no lock.

        Args:
            session: The new session.
            dedup_key: The claim's document id (``NormalizedAlert.dedup_key``).
            fingerprint: The claim.
            replacing: The update time of the expired claim to replace; None to create.

        Returns:
            True if this call created the session; False if the claim was taken
            (or changed, or vanished) since the caller looked.
        """
        batch = self._db.batch()
        self._write(batch, self._session(session.session_id), _doc(session), create=True)
        ref = self._alert_fingerprint(dedup_key)
        if replacing is None:
            batch.create(ref, _doc(fingerprint))
        else:
            option = self._db.write_option(last_update_time=replacing)
            batch.update(ref, _doc(fingerprint), option=option)
        self.round_trips.add("commit")
        try:
            await batch.commit()
        except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.NotFound):
            return False
        return True

    async def get_alert_fingerprint(
        self, dedup_key: str
    ) -> tuple[AlertFingerprint, datetime] | None:
        """Return a fingerprint claim and its update time (to replace it), or None."""
        self.round_trips.add("get")
        snap = await self._alert_fingerprint(dedup_key).get()
        if not snap.exists:
            return None
        return AlertFingerprint.model_validate(snap.to_dict()), snap.update_time

    async def alert_fingerprints_for(
        self, resolve_key: str, limit: int = 50
    ) -> list[AlertFingerprint]:
        """The claims of one alert across its firings (``resolve_key``), newest first.

        An equality filter on one field: Firestore's single-field index serves it.
        """
        self.round_trips.add("query")
        query = (
            self._db.collection(ALERT_FINGERPRINTS)
            .where(filter=firestore.FieldFilter("resolve_key", "==", resolve_key))
            .limit(limit)
        )
        claims = [AlertFingerprint.model_validate(s.to_dict()) async for s in query.stream()]
        return sorted(claims, key=lambda c: c.created_at, reverse=True)

    async def record_alert_resolution(self, session_id: str, resolved_at: datetime) -> bool:
        """Set a session's ``resolved_at``; False if the session does not exist.

        One field is written, so it never conflicts with the steps' own writes.
        """
        self.round_trips.add("update")
        try:
            await self._session(session_id).update({"resolved_at": resolved_at})
        except gexc.NotFound:
            return False
        return True

    async def delete_alert_session(self, session_id: str, dedup_key: str) -> None:
        """Delete a session nothing refers to yet, its chunks and its claim, in one batch.

        For a session whose start could not be published: the sender's retry
        then finds no claim and creates the session again.
        """
        ref = self._session(session_id)
        self.round_trips.add("query")
        batch = self._db.batch()
        async for chunk in ref.collection(CHUNKS).stream():
            batch.delete(chunk.reference)
        batch.delete(ref)
        batch.delete(self._alert_fingerprint(dedup_key))
        self.round_trips.add("commit")
        await batch.commit()


_store: Store | None = None


def get_store(settings: Settings) -> Store:
    """Return the process-wide store; must be called on the process event loop."""
    global _store
    if _store is None:
        client = firestore.AsyncClient(
            project=settings.project_id, database=settings.firestore_database
        )
        _store = Store(client)
    return _store

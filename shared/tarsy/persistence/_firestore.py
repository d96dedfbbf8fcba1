"""Firestore persistence: what every aggregate's records share (internal).

The collection names, deterministic ids, typed updates turned into fields,
and :class:`FirestoreBase`: the client, document references, and the writing
and reading of large documents (long strings spilled into chunk documents).
Each aggregate's records are a mixin of their own module; the one
:class:`~tarsy.persistence.store.Store` is all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from google.cloud import firestore
from pydantic import BaseModel

from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    LLMInteraction,
    Session,
    TokenUsage,
)
from tarsy.money import money_of
from tarsy.persistence.chunking import CHUNKED_FIELD, CHUNKS, chunk_id, restore, spill
from tarsy.persistence.updates import ExecutionUpdate, SessionUpdate, StageUpdate

Record = TypeVar("Record", bound=BaseModel)

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
AUDIT = "audit"  # sessions/{sid}/audit/{id}: who did what to the session, and when
NOTIFICATIONS = "notifications"  # sessions/{sid}/notifications/{notifier}: the leased claim
ANSWERED_MARKER = "answered"
# A session's and an execution's cost, integer nano-dollars added to by Increment. Not
# ``cost``: an older deploy wrote float dollars there and, during a rolling deploy, would
# read an int as dollars (or add float dollars to nano-dollars). ``cost`` is still read.
COST_FIELD = "cost_nanos"
LEGACY_COST_FIELD = "cost"


def record_id(step: int, n: int) -> str:
    """Return the deterministic id of the ``n``-th record written by ``step``."""
    return f"{step:04d}-{n:03d}"


def stage_id(index: int) -> str:
    """Return the document id of a stage."""
    return f"{index:02d}"


def document_of(model: BaseModel) -> dict[str, Any]:
    """``model`` as stored: a session's or an execution's cost under :data:`COST_FIELD`."""
    document = model.model_dump(mode="python")
    if isinstance(model, Session | AgentExecution):
        document[COST_FIELD] = document.pop(LEGACY_COST_FIELD)
    return document


def with_cost(data: dict[str, Any]) -> dict[str, Any]:
    """A stored session or execution with its cost read back into the model's ``cost``.

    The cost is :data:`COST_FIELD` plus whatever sits in the legacy field: float
    dollars an older deploy wrote or added (also during a rolling deploy, after
    this one created the document), or int nano-dollars written before the split.
    The two fields are disjoint increments, so their sum is the cost. Without
    :data:`COST_FIELD` the legacy field is left to the model's ``Money`` type.
    """
    if COST_FIELD not in data:
        return data
    legacy = data.get(LEGACY_COST_FIELD)
    nanos = int(data.pop(COST_FIELD) or 0) + (money_of(legacy) if legacy else 0)
    return {**data, LEGACY_COST_FIELD: nanos}


def with_json_text(model: BaseModel, field: str) -> dict[str, Any]:
    """``model``'s document with one large nested field stored as one JSON string.

    Firestore's client encodes and decodes a nested map value by value: for an
    LLM call's request (the conversation and every tool's schema, 16 KB and more)
    that was a step's largest CPU cost, about 5 ms. As a string it is one value,
    and past the inline limit it is spilled into chunks like any long text (as a
    map, it could only fail the write at Firestore's 1 MiB).
    """
    document = model.model_dump(mode="python", exclude={field})
    value = model.model_dump(mode="json", include={field})[field]
    document[field] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return document


def from_json_text(document: dict[str, Any], field: str) -> dict[str, Any]:
    """A document read back: ``field`` parsed if it is JSON text (a map or list if older)."""
    value = document.get(field)
    return {**document, field: json.loads(value)} if isinstance(value, str) else document


def llm_interaction_document(interaction: LLMInteraction) -> dict[str, Any]:
    """An LLM call's record as stored: its request as one JSON string."""
    return with_json_text(interaction, "request")


def llm_interaction_of(document: dict[str, Any]) -> LLMInteraction:
    """Read an LLM call's record (its request JSON text, or a map if written earlier)."""
    return LLMInteraction.model_validate(from_json_text(document, "request"))


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
        elif isinstance(value, list):
            value = [v.model_dump() if isinstance(v, BaseModel) else v for v in value]
        fields[name] = value
    if isinstance(update, ExecutionUpdate) and update.release_lease:
        fields.update(lease_owner=None, lease_until=None)
    return fields


def usage_increments(prefix: str, usage: TokenUsage) -> dict[str, Any]:
    return {
        f"{prefix}.{name}": firestore.Increment(value)
        for name, value in usage.model_dump().items()
        if value
    }


@dataclass
class RoundTrips:
    """Counts the Firestore round trips and RPCs made by this process (the benchmark reads it).

    A round trip is one wait for Firestore; RPCs sent together (``alongside``) share
    one. ``by_kind`` counts RPCs.
    """

    count: int = 0
    rpcs: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, *, alongside: bool = False) -> None:
        """Count one RPC of ``kind``; a new round trip unless sent alongside the previous one."""
        if not alongside:
            self.count += 1
        self.rpcs += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


class FirestoreBase:
    """The client, references and large-document I/O every aggregate's records share."""

    def __init__(self, client: firestore.AsyncClient) -> None:
        self._db = client
        self.round_trips = RoundTrips()

    @property
    def client(self) -> firestore.AsyncClient:
        """The Firestore client (tarsy.persistence.retention walks whole subtrees with it)."""
        return self._db

    def _session(self, session_id: str) -> Any:
        return self._db.collection(SESSIONS).document(session_id)

    def _stage(self, session_id: str, index: int) -> Any:
        return self._session(session_id).collection(STAGES).document(stage_id(index))

    def _execution(self, execution_id: str) -> Any:
        return self._db.collection(EXECUTIONS).document(execution_id)

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

    async def _delete_with_chunks(self, batch: Any, ref: Any) -> None:
        """Add the deletion of a document and of its chunk documents to ``batch``."""
        self.round_trips.add("query")
        async for chunk in ref.collection(CHUNKS).stream():
            batch.delete(chunk.reference)
        batch.delete(ref)

    async def _conversation(
        self, execution_id: str
    ) -> tuple[list[ConversationMessage], datetime | None]:
        """An execution's messages in order, and when they were read (None: no message)."""
        query = self._execution(execution_id).collection(MESSAGES).order_by("__name__")
        messages: list[ConversationMessage] = []
        read_at: datetime | None = None
        async for snap in query.stream():
            read_at = snap.read_time if read_at is None else read_at
            messages.append(ConversationMessage.model_validate(await self._read(snap)))
        return messages, read_at

    async def _read(self, snap: Any) -> dict[str, Any]:
        """A document's data with its chunked strings reassembled (one query if any)."""
        data: dict[str, Any] = with_cost(snap.to_dict() or {})
        if CHUNKED_FIELD not in data:
            return data
        self.round_trips.add("query")
        chunks = {
            chunk.id: str((chunk.to_dict() or {}).get("text", ""))
            async for chunk in snap.reference.collection(CHUNKS).stream()
        }
        return restore(data, chunks)

    def _add_execution(
        self, batch: Any, execution: AgentExecution, opening: Sequence[ConversationMessage]
    ) -> Any:
        """Add the creation of an execution and its opening messages to ``batch``."""
        ref = self._execution(execution.execution_id)
        batch.create(ref, document_of(execution))
        for n, message in enumerate(opening):
            self._write(
                batch, ref.collection(MESSAGES).document(record_id(0, n)), document_of(message)
            )
        return ref

    def _sub_agent_turn(self, execution_id: str, step: int) -> Any:
        return self._execution(execution_id).collection(SUB_AGENT_TURNS).document(f"{step:04d}")

    def _alert_fingerprint(self, dedup_key: str) -> Any:
        return self._db.collection(ALERT_FINGERPRINTS).document(dedup_key)

"""Narrow views of the store, one per caller, so each depends on what it uses.

Design constraint: :class:`~tarsy.persistence.store.Store` is the one adapter
that turns typed updates into Firestore fields, and it serves every aggregate.
A caller names the Protocol of its own need instead of the class, so a test can
hand it a small fake and a reader sees at once what it touches; nothing here
names Firestore (no client, no field names). The Store satisfies every
Protocol structurally; mypy checks it where Deps is built.

Who uses which:

* :class:`StepStore`: a step (``engine/steps``, ``engine/step_kinds``,
  ``engine/gathering``, ``engine/iteration``); :class:`LeaseRenewal`: its heartbeat.
* :class:`ChainStore`: a chain's progression and an execution's lifecycle
  (``engine/chains``, ``engine/lifecycle``, ``memory``).
* :class:`SweepStore`: the sweeper and the retention job.
* :class:`SessionReader` (one session) and :class:`SessionPages` (the list and
  the audit too): the api's GET routes and the pages.
* :class:`AlertIntake`: intake (sessions with their fingerprint claims).
* :class:`AuditedActions`: the session commands that write their audit record.
* :class:`ToolListCache`, :class:`~tarsy.persistence.progress.ProgressStore`:
  the MCP client and the streaming call.
* The ledger's port is :class:`tarsy.notify.ledger.NotificationLedger`.

:class:`Persistence` is all of them: ``Deps.store``, built by the entry points.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from tarsy.models import (
    AgentExecution,
    AlertFingerprint,
    AuditEvent,
    ConversationMessage,
    Session,
    Stage,
    StepMessage,
    TimelineEvent,
)
from tarsy.persistence.progress import ProgressSnapshot, ProgressStore
from tarsy.persistence.step_values import Claim, StepCommit, StepState
from tarsy.persistence.sweeps import DueExecution, DueSession
from tarsy.persistence.turns import PendingTurn, SubAgentAnswer
from tarsy.persistence.updates import ExecutionUpdate, SessionUpdate, StageUpdate
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList

if TYPE_CHECKING:  # annotations only: ingest lists no sessions and calls no model
    from tarsy.llm.base import ToolDefinition
    from tarsy.persistence.audit_log import ActionRecord, ActionWrites, AuditPage, AuditQuery
    from tarsy.persistence.retention import RetentionReport
    from tarsy.persistence.session_list import SessionPage, SessionQuery

__all__ = [
    "AlertIntake",
    "AuditedActions",
    "ChainStore",
    "LeaseRenewal",
    "Persistence",
    "ProgressStore",
    "SessionPages",
    "SessionReader",
    "StepStore",
    "SweepStore",
    "ToolListCache",
]


class LeaseRenewal(Protocol):
    """What a running step's heartbeat writes (its lease, under its claim) and reads."""

    async def renew(self, execution_id: str, claim: Claim, until: datetime) -> Claim | None:
        """Extend the lease; None when the execution changed since the claim."""
        ...

    async def get_execution(self, execution_id: str) -> AgentExecution | None:
        """The execution as it is now (a cancel marks it)."""
        ...


class SessionReader(Protocol):
    """What a view of one session reads."""

    async def get_session(self, session_id: str) -> Session | None:
        """The session, or None."""
        ...

    async def list_stages(self, session_id: str) -> list[Stage]:
        """Its stages in order."""
        ...

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        """Its executions by stage and creation."""
        ...

    async def list_timeline(self, execution_id: str) -> list[TimelineEvent]:
        """An execution's timeline in order."""
        ...

    async def live_progress(self, execution_ids: Sequence[str]) -> dict[str, ProgressSnapshot]:
        """The live text of the calls streaming now."""
        ...

    async def list_audit(self, session_id: str) -> list[AuditEvent]:
        """What people did to the session, oldest first."""
        ...


class ToolListCache(Protocol):
    """The MCP tool lists cached across steps."""

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        """The cached lists of ``servers`` that exist."""
        ...

    async def save_tool_list(self, server: str, tools: Sequence[ToolDefinition]) -> None:
        """Cache a server's tools."""
        ...


class AlertIntake(Protocol):
    """What intake writes: sessions, with the fingerprint claims that deduplicate alerts."""

    async def create_session(self, session: Session) -> None:
        """Create the session document (fails if it already exists)."""
        ...

    async def delete_session(self, session_id: str) -> None:
        """Delete a session document, and its chunks, that nothing else refers to yet."""
        ...

    async def create_alert_session(
        self,
        session: Session,
        dedup_key: str,
        fingerprint: AlertFingerprint,
        *,
        replacing: datetime | None = None,
    ) -> bool:
        """Create a session and the fingerprint claim that names it, in one batch."""
        ...

    async def delete_alert_session(self, session_id: str, dedup_key: str) -> None:
        """Delete a session nothing refers to yet, its chunks and its claim, in one batch."""
        ...

    async def alert_fingerprints_for(
        self, resolve_key: str, limit: int = 50
    ) -> list[AlertFingerprint]:
        """The claims of one alert across its firings (``resolve_key``), newest first."""
        ...

    async def get_alert_fingerprint(
        self, dedup_key: str
    ) -> tuple[AlertFingerprint, datetime] | None:
        """Return a fingerprint claim and its update time (to replace it), or None."""
        ...

    async def record_alert_resolution(self, session_id: str, resolved_at: datetime) -> bool:
        """Set a session's ``resolved_at``; False if the session does not exist."""
        ...

    async def list_timeline_records(self, execution_id: str) -> list[tuple[str, TimelineEvent]]:
        """Return an execution's timeline in order, each event with its document id."""
        ...


class AuditedActions(Protocol):
    """Actions written with their audit record in one commit; the audit read; erasure."""

    async def commit_action(self, writes: ActionWrites) -> None:
        """Commit an action's state change and its audit record in one batch."""
        ...

    async def undo_reinvestigation(self, writes: ActionWrites) -> None:
        """Undo a committed investigate-again (its start could not be published)."""
        ...

    async def create_recorded_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent],
        record: ActionRecord,
    ) -> bool:
        """Create an execution with the action's audit record at once; False if it exists."""
        ...

    async def end_recorded_execution(
        self, execution: AgentExecution, update: ExecutionUpdate, record: ActionRecord
    ) -> None:
        """End an execution (and mark it done for fan-in) with the audit record at once."""
        ...

    async def list_all_audit(self, query: AuditQuery) -> AuditPage:
        """One page of the audit across sessions, newest first."""
        ...

    async def erase_session(self, record: ActionRecord) -> bool:
        """Delete every record of a session but its erasure's; False: no such session."""
        ...


class StepStore(LeaseRenewal, Protocol):
    """What a step does (the engine's steps, step kinds and gathering): claim, read, commit.

    Claim the execution under a precondition, read its state and conversation in
    one round trip, commit its writes as one batch, settle what it published.
    """

    async def get_session(self, session_id: str) -> Session | None:
        """The session, or None."""
        ...

    async def claim(
        self,
        execution_id: str,
        *,
        owner: str,
        until: datetime,
        read_time: datetime,
        step: int,
    ) -> Claim:
        """Take the lease on an execution for ``step``, unless someone wrote it since we read it."""
        ...

    async def get_step_state(
        self,
        execution_id: str,
        session_id: str,
        tool_servers: Sequence[str] = (),
        *,
        conversation: bool = False,
    ) -> StepState:
        """Read an execution, its session, its provider state and cached tool lists.

        With ``conversation``, its messages too, in the same round trip.
        """
        ...

    async def load_messages(self, execution_id: str) -> list[ConversationMessage]:
        """Return the conversation of an execution, in order."""
        ...

    async def commit_step(self, commit: StepCommit) -> bool:
        """Apply one step's writes atomically. Returns False if the claim was lost."""
        ...

    async def settle_advance(self, execution_id: str, published: StepMessage) -> None:
        """After a finished execution's advance went out: record it, and clear its due time."""
        ...

    async def postpone_execution(
        self, execution_id: str, *, read_time: datetime, until: datetime
    ) -> bool:
        """Move an overdue execution's due time on, unless written since; True if this won."""
        ...

    async def start_stage(
        self,
        session_id: str,
        stage: Stage,
        executions: Sequence[AgentExecution],
        initial_messages: dict[str, list[ConversationMessage]],
        session: SessionUpdate,
    ) -> bool:
        """Create a stage with its executions and their first messages, atomically."""
        ...

    async def get_pending_turn(self, execution_id: str, step: int) -> PendingTurn | None:
        """The turn of ``step`` that waits for sub-agents, or None."""
        ...

    async def list_answers(self, execution_id: str, step: int) -> dict[str, SubAgentAnswer]:
        """The answers the parent's ``step`` has received, by call id."""
        ...

    async def list_sub_agents(
        self, execution_id: str
    ) -> dict[str, tuple[AgentExecution, datetime]]:
        """The sub-agent conversations an execution started, with their update times."""
        ...


class ChainStore(Protocol):
    """What a chain's progression and an execution's lifecycle write (engine/chains, lifecycle).

    Stages and their markers, executions created and ended, fan-in, sub-agent
    answers, what went out, and the earlier sessions memory reads.
    """

    async def get_session(self, session_id: str) -> Session | None:
        """The session, or None."""
        ...

    async def get_execution(self, execution_id: str) -> AgentExecution | None:
        """The execution as it is now (a cancel marks it)."""
        ...

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        """The session's executions by stage and creation."""
        ...

    async def list_timeline(self, execution_id: str) -> list[TimelineEvent]:
        """An execution's timeline in order."""
        ...

    async def get_stage(self, session_id: str, index: int) -> Stage | None:
        """Return one stage, or None."""
        ...

    async def start_stage(
        self,
        session_id: str,
        stage: Stage,
        executions: Sequence[AgentExecution],
        initial_messages: dict[str, list[ConversationMessage]],
        session: SessionUpdate,
    ) -> bool:
        """Create a stage with its executions and their first messages, atomically."""
        ...

    async def update_stage(self, session_id: str, index: int, update: StageUpdate) -> None:
        """Apply a typed stage update."""
        ...

    async def claim_marker(self, session_id: str, index: int, name: str) -> bool:
        """Create a stage marker; True only for the one caller that created it."""
        ...

    async def finished_agents(self, session_id: str, index: int) -> dict[str, str]:
        """``{execution_id: status}`` of the stage's agent executions that have finished."""
        ...

    async def create_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent] = (),
    ) -> bool:
        """Create an execution with its opening messages (and events); False if it exists."""
        ...

    async def end_execution(self, execution: AgentExecution, update: ExecutionUpdate) -> None:
        """Apply a terminal update and write the execution's completion marker, atomically."""
        ...

    async def update_execution(self, execution_id: str, update: ExecutionUpdate) -> None:
        """Apply a typed execution update."""
        ...

    async def update_executions(
        self, execution_ids: Sequence[str], update: ExecutionUpdate
    ) -> None:
        """Apply one typed update to several executions in one batch."""
        ...

    async def update_session(self, session_id: str, update: SessionUpdate) -> None:
        """Apply a typed session update."""
        ...

    async def claim_answered(self, execution_id: str, step: int) -> bool:
        """Create the marker that every answer is in; True only for the one who created it."""
        ...

    async def record_answer(self, execution_id: str, step: int, answer: SubAgentAnswer) -> None:
        """Write a sub-agent's answer to call ``answer.call_id`` of the parent's ``step``."""
        ...

    async def list_answers(self, execution_id: str, step: int) -> dict[str, SubAgentAnswer]:
        """The answers the parent's ``step`` has received, by call id."""
        ...

    async def list_sub_agents(
        self, execution_id: str
    ) -> dict[str, tuple[AgentExecution, datetime]]:
        """The sub-agent conversations an execution started, with their update times."""
        ...

    async def mark_published(self, execution_ids: Sequence[str], step: int) -> None:
        """Record that the messages for ``step`` of these executions went out (one batch)."""
        ...

    async def was_published(self, execution_id: str, step: int) -> bool:
        """Whether the message for ``step`` is known to have gone out."""
        ...

    async def earlier_sessions(
        self, keys: Sequence[str], before: datetime, limit: int
    ) -> list[Session]:
        """Sessions created before ``before`` sharing one of the memory ``keys``, newest first."""
        ...


class SweepStore(Protocol):
    """What the sweeper and the retention job read and write (engine/sweeper, the scheduled job).

    Overdue executions, stage starts and sessions, each moved on under a
    precondition, and the retention stamps.
    """

    async def get_session(self, session_id: str) -> Session | None:
        """The session, or None."""
        ...

    async def due_executions(self, now: datetime, limit: int = 100) -> list[DueExecution]:
        """Executions whose next step (or fan-in) should have been claimed by now."""
        ...

    async def due_sessions(self, now: datetime, limit: int = 100) -> list[DueSession]:
        """Sessions whose awaited stage start should have run by now."""
        ...

    async def overdue_sessions(self, now: datetime, limit: int = 100) -> list[Session]:
        """Unfinished sessions past their deadline."""
        ...

    async def postpone_execution(
        self, execution_id: str, *, read_time: datetime, until: datetime
    ) -> bool:
        """Move an overdue execution's due time on, unless written since; True if this won."""
        ...

    async def postpone_session(
        self, session_id: str, *, read_time: datetime, until: datetime
    ) -> bool:
        """Move an overdue stage start's due time on, unless written since; True if this won."""
        ...

    async def stamp_retention(
        self, settings: Settings, now: datetime | None = None
    ) -> RetentionReport:
        """Stamp ``expire_at`` on finished sessions due for it (the retention job)."""
        ...


class SessionPages(SessionReader, Protocol):
    """What the api and the pages read: one session (:class:`SessionReader`), the list, the audit.

    Reads only: a page or a GET route typed by this cannot change a session.
    """

    async def list_sessions(self, query: SessionQuery) -> SessionPage:
        """One page of sessions, newest first, filtered (:mod:`.session_list`)."""
        ...

    async def list_all_audit(self, query: AuditQuery) -> AuditPage:
        """One page of the audit across sessions, newest first."""
        ...

    async def list_timeline_records(self, execution_id: str) -> list[tuple[str, TimelineEvent]]:
        """Return an execution's timeline in order, each event with its document id."""
        ...


class Persistence(
    StepStore,
    ChainStore,
    SweepStore,
    SessionPages,
    AlertIntake,
    AuditedActions,
    ToolListCache,
    ProgressStore,
    Protocol,
):
    """Every port at once: what ``Deps.store`` holds, for the entry points that build Deps.

    A function that needs part of it names the narrow port instead; this adds no
    method of its own.
    """

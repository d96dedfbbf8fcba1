"""A session's page as it grows: what changed since the page's last poll.

Design constraint: the page polls a stateless function, so the page carries
its own place in the timeline, a cursor, and every poll answers "what is new
after it". Each execution's timeline only grows, under deterministic document
ids (``{step:04d}-{n:03d}``), so the cursor keeps, per execution, the last id
and the count shown. A poll whose answer was lost is simply asked again with
the same cursor (the page drops events it already shows, by id), so nothing is
lost or repeated; if an execution's events ever disagree with the count (an
event written under an earlier id), its section is sent whole again.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from tarsy._pydantic import DeferredModel
from tarsy.errors import InputError, NotFoundError
from tarsy.models import AgentExecution, ExecutionStatus, Session, Stage, TimelineEvent
from tarsy.persistence.ports import Persistence
from tarsy.persistence.progress import ProgressSnapshot

# How the page names the executions that belong to no stage (tarsy.engine.chains' sentinels).
# Between a sub-agent's parents and itself: a single right-pointing angle quotation mark.
PATH_SEPARATOR = " \u203a "
STAGE_LABELS = {-1: "executive summary", -2: "chat", -3: "scoring"}


class CursorEntry(DeferredModel):
    """Where the page is in one execution's timeline."""

    model_config = ConfigDict(frozen=True)

    last: str = Field(description="the id of the last event shown ('' before the first)")
    count: int = Field(ge=0, description="how many events are shown")
    final: bool = Field(description="the execution had ended: nothing more will come")


class TimelineCursor(DeferredModel):
    """The page's place in every execution's timeline, as an opaque token."""

    executions: dict[str, CursorEntry] = Field(default_factory=dict)

    def encode(self) -> str:
        """The cursor as a URL-safe token."""
        raw = self.model_dump_json(exclude_defaults=False).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> TimelineCursor:
        """Read a token made by :meth:`encode` ('' is the start).

        Raises:
            InputError: 422, the token was not made by :meth:`encode`.
        """
        if not token:
            return cls()
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            return cls.model_validate_json(raw)
        except (binascii.Error, ValueError, ValidationError) as e:
            raise InputError("invalid timeline cursor", status=422) from e


class ShownEvent(DeferredModel):
    """An event the page does not show yet."""

    execution_id: str
    event_id: str
    event: TimelineEvent


class ExecutionNode(DeferredModel):
    """An execution in the page's tree, with the sub-agents it messaged."""

    execution: AgentExecution
    path: str = Field(description="the agent's name, after its parents' for a sub-agent")
    children: list[ExecutionNode] = Field(default_factory=list)


class SessionUpdate(DeferredModel):
    """Everything a poll tells the page."""

    session: Session
    stages: list[Stage]
    # Stage index (chain stages in order, then summary, chat, scoring) -> top-level nodes.
    tree: list[tuple[int, list[ExecutionNode]]]
    executions: list[AgentExecution] = Field(description="in the order the page shows them")
    paths: dict[str, str]
    progress: dict[str, ProgressSnapshot]
    events: list[ShownEvent]
    resets: list[str] = Field(description="executions whose sections are sent whole again")
    cursor: TimelineCursor

    @property
    def finished(self) -> bool:
        """Nothing more happens until someone acts (a chat, a resume, a re-score)."""
        settled = self.session.status.is_terminal or self.session.status is ExecutionStatus.PAUSED
        return settled and all(
            e.status.is_terminal or e.status is ExecutionStatus.PAUSED for e in self.executions
        )


def stage_label(index: int, stages: list[Stage]) -> str:
    """``stage 0 · triage``, ``executive summary``, ``chat``, ``scoring``."""
    if index in STAGE_LABELS:
        return STAGE_LABELS[index]
    name = next((s.name for s in stages if s.index == index), "")
    return f"stage {index}" + (f" · {name}" if name else "")


def _stage_order(index: int) -> tuple[int, int]:
    # Chain stages first, then the executive summary (-1), chats (-2) and scoring (-3).
    return (index < 0, abs(index))


def build_tree(
    executions: list[AgentExecution],
) -> tuple[list[tuple[int, list[ExecutionNode]]], dict[str, str]]:
    """The executions as trees per stage (agent above its sub-agents) and each one's path."""
    by_id = {e.execution_id: e for e in executions}
    ordered = sorted(executions, key=lambda e: (e.created_at, e.agent_index, e.execution_id))
    children: dict[str, list[AgentExecution]] = {}
    roots: list[AgentExecution] = []
    for execution in ordered:
        parent = execution.parent_execution_id
        if parent is not None and parent in by_id and parent != execution.execution_id:
            children.setdefault(parent, []).append(execution)
        else:
            roots.append(execution)
    paths: dict[str, str] = {}
    placed: set[str] = set()

    def node(execution: AgentExecution, prefix: str) -> ExecutionNode:
        placed.add(execution.execution_id)
        path = f"{prefix}{PATH_SEPARATOR}{execution.agent}" if prefix else execution.agent
        paths[execution.execution_id] = path
        below = [
            c for c in children.get(execution.execution_id, []) if c.execution_id not in placed
        ]
        return ExecutionNode(
            execution=execution, path=path, children=[node(c, path) for c in below]
        )

    trees = [node(e, "") for e in roots]
    # A damaged view whose parents form a loop still shows every execution.
    trees += [node(e, "") for e in ordered if e.execution_id not in placed]
    stages: dict[int, list[ExecutionNode]] = {}
    for tree in trees:
        stages.setdefault(tree.execution.stage, []).append(tree)
    return [(i, stages[i]) for i in sorted(stages, key=_stage_order)], paths


def _flatten(tree: list[tuple[int, list[ExecutionNode]]]) -> list[AgentExecution]:
    shown: list[AgentExecution] = []

    def walk(node: ExecutionNode) -> None:
        shown.append(node.execution)
        for child in node.children:
            walk(child)

    for _index, nodes in tree:
        for top in nodes:
            walk(top)
    return shown


def new_events(
    execution_id: str,
    records: list[tuple[str, TimelineEvent]],
    seen: CursorEntry | None,
) -> tuple[list[ShownEvent], bool]:
    """The events after the cursor's place, and whether the section must be sent whole.

    Args:
        execution_id: The execution.
        records: Its whole timeline, in id order.
        seen: Where the page is in it (None: nothing shown yet).

    Returns:
        ``(events, reset)``: with ``reset`` the events are the whole timeline.
    """
    shown = [ShownEvent(execution_id=execution_id, event_id=i, event=e) for i, e in records]
    if seen is None:
        return shown, False
    before = [s for s in shown if s.event_id <= seen.last]
    if len(before) != seen.count:
        return shown, True
    return [s for s in shown if s.event_id > seen.last], False


async def session_update(store: Persistence, session_id: str, token: str) -> SessionUpdate:
    """Read a session and what its page has not shown yet.

    Args:
        store: The store.
        session_id: The session.
        token: The cursor the page's previous poll returned ('' on the first).

    Returns:
        The update; its ``cursor`` is the page's next token.

    Raises:
        NotFoundError: No such session.
        InputError: The cursor was not made here.
    """
    cursor = TimelineCursor.decode(token)
    session = await store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    stages = await store.list_stages(session_id)
    executions = await store.list_executions(session_id)
    tree, paths = build_tree(executions)
    ordered = _flatten(tree)
    progress = await store.live_progress(
        [e.execution_id for e in ordered if not e.status.is_terminal]
    )
    events: list[ShownEvent] = []
    resets: list[str] = []
    entries: dict[str, CursorEntry] = {}
    for execution in ordered:
        eid = execution.execution_id
        seen = cursor.executions.get(eid)
        if seen is not None and seen.final:
            entries[eid] = seen  # ended before the last poll: nothing new to read
            continue
        records = await store.list_timeline_records(eid)
        fresh, reset = new_events(eid, records, seen)
        events.extend(fresh)
        if reset:
            resets.append(eid)
        entries[eid] = CursorEntry(
            last=records[-1][0] if records else "",
            count=len(records),
            # Read after the execution's document said it had ended: its timeline is whole.
            final=execution.status.is_terminal,
        )
    return SessionUpdate(
        session=session,
        stages=stages,
        tree=tree,
        executions=ordered,
        paths=paths,
        progress=progress,
        events=events,
        resets=resets,
        cursor=TimelineCursor(executions=entries),
    )


def score_view(session: Session) -> dict[str, Any] | None:
    """The judge's verdict as the page shows it, or None when there is none yet."""
    report = session.score_report or {}
    if session.score is None and not session.score_error:
        return None
    categories = report.get("categories") or {}
    missing = report.get("missing_tools") or []
    return {
        "score": session.score,
        "error": session.score_error,
        "categories": [
            {"name": str(name), "score": c.get("score"), "reason": str(c.get("reason", ""))}
            for name, c in categories.items()
            if isinstance(c, dict)
        ],
        "missing_tools": [
            {"name": str(t.get("name", "")), "rationale": str(t.get("rationale", ""))}
            for t in missing
            if isinstance(t, dict)
        ],
    }


def dumps(value: object) -> str:
    """JSON for a fragment response (compact)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

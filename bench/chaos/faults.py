"""Crash injection: THE list of crash points, and the store, bus and tools that fire them.

A :class:`Crash` is the process dying at a named point. It is a
``BaseException``, so no ``except Exception`` in the engine can catch it: the
handler stops exactly where the process would have, with whatever it had
written and published until then. The suite builds its own :class:`FaultyStore`
(a :class:`tarsy.persistence.store.Store` on its own client), :class:`FaultyBus` and
:class:`FaultyTools` and hands them to the engine in ``Deps``; production code
has no test-only branch.

:data:`POINTS` is the one place the crash points are named.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from tarsy import models
from tarsy.engine.transitions import SessionUpdate
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    Session,
    Stage,
    StepMessage,
    TimelineEvent,
    utcnow,
)
from tarsy.persistence.store import Claim, StepCommit, Store
from tarsy.tools.base import CachedToolList, ToolExecutor, ToolListing, ToolResult

Phase = Literal["before", "after"]
# Which pipeline a point's session runs: the default chain (one call + executive
# summary), the kubernetes chain (tool calls on the demo cluster), or a parallel
# stage of two agents merged by a synthesis.
Chain = Literal["default", "tools", "parallel"]
# What is going on when the process dies: handling a Pub/Sub message (which Pub/Sub
# may redeliver), or serving an HTTP request (ingest, chat) or a sweep (no redelivery).
Scene = Literal["message", "ingest", "chat", "sweeper"]


class Crash(BaseException):
    """The process dies here."""

    def __init__(self, point: str) -> None:
        super().__init__(f"crash injected at {point}")
        self.point = point


@dataclass(frozen=True)
class Call:
    """One call through a hooked site, as a predicate sees it."""

    site: str
    phase: Phase
    args: tuple[Any, ...]
    result: Any = None
    n: int = 0  # how many calls this site has seen so far, this one included

    def first(self, kind: type[Any]) -> Any:
        """The first argument of type ``kind`` (None if there is none)."""
        return next((a for a in self.args if isinstance(a, kind)), None)


def _commit(call: Call) -> StepCommit:
    commit = call.first(StepCommit)
    assert isinstance(commit, StepCommit)
    return commit


def _gathered(commit: StepCommit) -> bool:
    """Whether a commit is a gather step's (evidence first: it clears ``gather_pending``)."""
    return commit.execution.gather_pending is False


def _execution(call: Call) -> AgentExecution:
    execution = call.first(AgentExecution)
    assert isinstance(execution, AgentExecution)
    return execution


@dataclass(frozen=True)
class CrashPoint:
    """Where the process dies: a hooked site, before or after it runs, and which call."""

    name: str
    where: str
    chain: Chain
    scene: Scene
    site: str
    phase: Phase
    when: Callable[[Call], bool] = lambda call: True


POINTS: tuple[CrashPoint, ...] = (
    CrashPoint(
        "ingest after write", "ingest: session written, start_session not yet published",
        "default", "ingest", "store.create_session", "after",
    ),
    CrashPoint(
        "start_session", "stage and executions created, first step not yet published",
        "default", "message", "store.start_stage", "after",
    ),
    CrashPoint(
        "claim", "step claimed (lease taken), before the model call",
        "default", "message", "store.claim", "after",
    ),
    CrashPoint(
        "after the model call", "the model asked for tools; before they run",
        "tools", "message", "tools.call_tools", "before",
        lambda c: not any(str(call.id).startswith("gather-") for call in c.args[0]),
    ),
    CrashPoint(
        "gather, before commit", "evidence gathered and read; before the gather step's commit",
        "tools", "message", "store.commit_step", "before",
        lambda c: _gathered(_commit(c)),
    ),
    CrashPoint(
        "gather, after commit", "the gather step committed; the first model step not published",
        "tools", "message", "store.commit_step", "after",
        lambda c: _gathered(_commit(c)),
    ),
    CrashPoint(
        "after tools", "tools ran; before the step's commit",
        "tools", "message", "store.commit_step", "before",
        lambda c: bool(_commit(c).mcp_interactions) and not _gathered(_commit(c)),
    ),
    CrashPoint(
        "after commit, before publish", "a middle step committed; its next step not published",
        "tools", "message", "store.commit_step", "after",
        lambda c: bool(_commit(c).mcp_interactions) and not _gathered(_commit(c)),
    ),
    CrashPoint(
        "last commit, before publish",
        "agent's last commit (creates the summary); summary step not published",
        "default", "message", "store.commit_step", "after",
        lambda c: _commit(c).role == "agent" and _commit(c).finished_status is not None,
    ),
    CrashPoint(
        "after a fan-in marker", "the stage's advance marker claimed; synthesis not started",
        "parallel", "message", "store.claim_marker", "after",
        lambda c: c.result is True and "advance" in c.args,
    ),
    CrashPoint(
        "synthesis start", "synthesis execution created; its first step not published",
        "parallel", "message", "store.create_execution", "after",
        lambda c: _execution(c).role == "synthesis",
    ),
    CrashPoint(
        "synthesis commit", "synthesis committed (stage end, summary created); summary unpublished",
        "parallel", "message", "store.commit_step", "after",
        lambda c: _commit(c).role == "synthesis",
    ),
    CrashPoint(
        "executive summary", "the summary's model call answered; before its commit",
        "default", "message", "store.commit_step", "before",
        lambda c: _commit(c).role == "summary",
    ),
    CrashPoint(
        "chat", "api: chat execution and question written; its first step not published",
        "default", "chat", "store.create_execution", "after",
        lambda c: _execution(c).role == "chat",
    ),
    CrashPoint(
        "sweeper mid-run", "the sweeper re-published the first of two overdue starts, then died",
        "default", "sweeper", "sweeper.publish", "before",
        lambda c: c.n == 2,
    ),
)  # fmt: skip


@dataclass
class FaultPlan:
    """Arms one crash point; the first matching call raises :class:`Crash`, once."""

    point: CrashPoint | None = None
    fired_at: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)
    clock: Callable[[], datetime] = utcnow

    def arm(self, point: CrashPoint | None) -> None:
        """Arm ``point`` (None: no crash) and forget the previous run."""
        self.point, self.fired_at, self.counts = point, None, {}

    def hit(self, site: str, phase: Phase, *args: Any, result: Any = None) -> None:
        """Raise :class:`Crash` if this call is the armed point's."""
        if phase == "before":
            self.counts[site] = self.counts.get(site, 0) + 1
        point = self.point
        if point is None or self.fired_at is not None:
            return
        if point.site != site or point.phase != phase:
            return
        if point.when(Call(site, phase, args, result, self.counts.get(site, 0))):
            self.fired_at = self.clock()
            raise Crash(point.name)


class FaultyStore(Store):
    """The real store on its own client, with the plan's hooks around the commit points."""

    def __init__(self, client: Any, plan: FaultPlan) -> None:
        super().__init__(client)
        self.plan = plan
        self.created_sessions: list[str] = []

    async def create_session(self, session: Session) -> None:
        self.plan.hit("store.create_session", "before", session)
        await super().create_session(session)
        self.created_sessions.append(session.session_id)
        self.plan.hit("store.create_session", "after", session)

    async def start_stage(
        self,
        session_id: str,
        stage: Stage,
        executions: Sequence[AgentExecution],
        initial_messages: dict[str, list[ConversationMessage]],
        session: SessionUpdate,
    ) -> bool:
        self.plan.hit("store.start_stage", "before", session_id, stage)
        created = await super().start_stage(
            session_id, stage, executions, initial_messages, session
        )
        self.plan.hit("store.start_stage", "after", session_id, stage, result=created)
        return created

    async def claim(
        self, execution_id: str, *, owner: str, until: datetime, read_time: datetime, step: int
    ) -> Claim:
        self.plan.hit("store.claim", "before", execution_id, step)
        claim = await super().claim(
            execution_id, owner=owner, until=until, read_time=read_time, step=step
        )
        self.plan.hit("store.claim", "after", execution_id, step, result=claim)
        return claim

    async def commit_step(self, commit: StepCommit) -> bool:
        self.plan.hit("store.commit_step", "before", commit)
        committed = await super().commit_step(commit)
        if committed:
            self.plan.hit("store.commit_step", "after", commit, result=committed)
        return committed

    async def claim_marker(self, session_id: str, index: int, name: str) -> bool:
        self.plan.hit("store.claim_marker", "before", session_id, index, name)
        claimed = await super().claim_marker(session_id, index, name)
        self.plan.hit("store.claim_marker", "after", session_id, index, name, result=claimed)
        return claimed

    async def create_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent] = (),
    ) -> bool:
        self.plan.hit("store.create_execution", "before", execution)
        created = await super().create_execution(execution, opening, timeline)
        self.plan.hit("store.create_execution", "after", execution, result=created)
        return created


class FaultyBus:
    """Records what is published (the suite delivers it); the plan may kill a publish."""

    def __init__(self, plan: FaultPlan, site: str = "bus.publish") -> None:
        self.plan = plan
        self.site = site
        self.published: list[StepMessage] = []

    async def publish(self, message: StepMessage) -> str:
        self.plan.hit(self.site, "before", message)
        self.published.append(message)
        return str(len(self.published))

    def take(self) -> list[StepMessage]:
        """What was published since the last take."""
        taken, self.published = self.published, []
        return taken


class FaultyTools:
    """A tool executor whose calls the plan may kill (before or after they run)."""

    def __init__(self, inner: ToolExecutor, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
    ) -> ToolListing:
        return await self.inner.list_tools(servers, cached, budget=budget)

    async def call_tools(
        self, calls: Sequence[Any], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        self.plan.hit("tools.call_tools", "before", calls)
        results = await self.inner.call_tools(calls, listing, budget=budget)
        self.plan.hit("tools.call_tools", "after", calls, result=results)
        return results


class VirtualClock:
    """The suite's clock for in-process runs: real time plus a jump the suite chooses.

    Leases and due times are compared with ``tarsy.models.utcnow`` inside the
    engine. Replacing that name in this process's tarsy modules (as a
    freezegun-style patch would) lets the suite jump past a 60 s lease or due
    time at once, with production settings, instead of waiting for it; the
    functions of the stack keep the real clock.
    """

    def __init__(self) -> None:
        self.offset = timedelta(0)
        self._saved: list[tuple[Any, Any]] = []

    def now(self) -> datetime:
        return utcnow() + self.offset

    def advance_to(self, moment: datetime) -> None:
        """Jump forward to ``moment`` (never back)."""
        ahead = moment - self.now()
        if ahead > timedelta(0):
            self.offset += ahead

    def install(self) -> None:
        original = models.utcnow
        for name, module in list(sys.modules.items()):
            if (name == "tarsy" or name.startswith("tarsy.")) and getattr(
                module, "utcnow", None
            ) is original:
                self._saved.append((module, original))
                setattr(module, "utcnow", self.now)  # noqa: B010

    def uninstall(self) -> None:
        for module, original in self._saved:
            setattr(module, "utcnow", original)  # noqa: B010
        self._saved.clear()

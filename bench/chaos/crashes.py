"""A crash at every commit point, in process, on a virtual clock, with production timings.

The engine runs in this process (``tarsy.engine.steps.handle``, ``tarsy.intake.ingest.handle``,
``tarsy.commands.sessions.chat``, ``tarsy.engine.sweeper.sweep``) against the stack's emulators, the
demo cluster and the fake model, with the suite's :class:`~bench.chaos.faults.FaultyStore`,
bus and tools. This module plays Pub/Sub and Cloud Scheduler:

* a published message is delivered at once; a delivery that raises is
  redelivered with the production retry policy (``infra/variables.tf``: 10 s
  doubling to 600 s, 10 attempts, then the dead-letter function runs);
* the sweeper runs every 60 s (Cloud Scheduler), the first time 60 s after the
  session started, which is the worst phase for a crash that follows at once.

Each crash point is run twice: the crashed message **redelivered** (the usual
case), and **lost** (the push gave up for good; only the sweeper can heal it).
HTTP scenes (ingest, chat) and the sweeper have no redelivery: only the second
applies. Times are virtual: the clock jumps to the next delivery or sweep, so
a lease costs nothing to wait for, and recovery times are those the
production settings give (lease 45 s, due 45 s) plus the real processing time.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel

from bench.chaos.common import (
    Difference,
    Facts,
    alert,
    deterministic,
    difference,
    session_facts,
)
from bench.chaos.faults import (
    POINTS,
    Chain,
    Crash,
    CrashPoint,
    FaultPlan,
    FaultyBus,
    FaultyStore,
    Scene,
    VirtualClock,
)
from tarsy.app import Deps
from tarsy.commands import sessions as api
from tarsy.engine.steps import handle, handle_dead_letter
from tarsy.engine.sweeper import sweep
from tarsy.errors import TransientError
from tarsy.http.request import HttpRequest
from tarsy.intake import ingest as ingest_endpoint
from tarsy.models import StepMessage
from tarsy_dev.fakes.fake_gemini import FakeGemini

REDELIVERY_MIN = timedelta(seconds=10)  # infra/variables.tf: retry_minimum_backoff
REDELIVERY_MAX = timedelta(seconds=600)  # retry_maximum_backoff
MAX_DELIVERY_ATTEMPTS = 10  # max_delivery_attempts, then the dead-letter topic
SWEEP_INTERVAL = timedelta(seconds=60)  # Cloud Scheduler's schedule (infra)
GIVE_UP = timedelta(minutes=40)  # past the 30 min session deadline: the sweeper would have acted
MAX_EVENTS = 500
QUESTION = "Which pod should I look at first?"

Mode = Literal["redelivered", "lost"]


class PointRun(BaseModel):
    """One crash point in one mode (or a clean reference run)."""

    point: str
    chain: str
    mode: str
    crashed: bool
    statuses: list[str]
    recovery_s: float | None  # virtual seconds from the crash to terminal
    duplicated: int
    lost: int
    differences: list[str]
    model_calls: int
    reference_calls: int
    repeated_calls: int  # model calls beyond the clean run's (a step that died mid-call)
    llm_records: int
    iterations: int
    due_left: list[str]
    live_left: int
    sweeps_that_acted: int
    sweeps_after_terminal: int  # sweeps after the end that still re-published something
    messages: int  # messages published (engine and sweeper) for the run's sessions
    redeliveries: int
    dead_letters: int
    errors: list[str]

    @property
    def terminal(self) -> bool:
        return bool(self.statuses) and all(
            s in ("completed", "failed", "timed_out", "cancelled") for s in self.statuses
        )


@dataclass(order=True)
class _Delivery:
    at: datetime
    seq: int
    message: StepMessage = field(compare=False)
    attempt: int = field(compare=False, default=1)


@dataclass
class Env:
    """The in-process engine: deps on the faulty store and tools, the plan, the clock."""

    deps: Deps
    store: FaultyStore
    plan: FaultPlan
    clock: VirtualClock
    fake: FakeGemini


class Driver:
    """Plays Pub/Sub and Cloud Scheduler for the sessions of one run."""

    def __init__(self, env: Env, mode: Mode) -> None:
        self.env = env
        self.mode = mode
        self.queue: list[_Delivery] = []
        self.published: list[StepMessage] = []
        self.seq = itertools.count()
        self.sessions: set[str] = set()
        # (session id, the chat execution that must end, or None for the session itself)
        self.tracked: list[tuple[str, str | None]] = []
        self.crash_at: datetime | None = None
        self.terminal_at: datetime | None = None
        self.sweeps_that_acted = 0
        self.after_terminal = 0  # sweeps that still found something due once all had ended
        self.redeliveries = 0
        self.dead_letters = 0
        self.errors: list[str] = []

    @property
    def now(self) -> datetime:
        return self.env.clock.now()

    def _deps(self, bus: FaultyBus) -> Deps:
        return replace(self.env.deps, bus=bus)

    def _crashed(self) -> None:
        self.crash_at = self.now

    def _push(self, message: StepMessage, at: datetime, attempt: int = 1) -> None:
        heapq.heappush(self.queue, _Delivery(at, next(self.seq), message, attempt))

    def _collect(self, bus: FaultyBus) -> int:
        """Deliver what ``bus`` published for our sessions; return how many."""
        ours = [m for m in bus.take() if m.session_id in self.sessions]
        for message in ours:
            self._push(message, self.now)
        self.published.extend(ours)
        return len(ours)

    async def _retry(self, delivery: _Delivery) -> None:
        if delivery.attempt >= MAX_DELIVERY_ATTEMPTS:
            self.dead_letters += 1
            bus = FaultyBus(self.env.plan)
            await handle_dead_letter(
                delivery.message, self._deps(bus), delivery_attempts=str(delivery.attempt)
            )
            self._collect(bus)
            return
        self.redeliveries += 1
        wait = min(REDELIVERY_MAX, REDELIVERY_MIN * 2 ** (delivery.attempt - 1))
        self._push(delivery.message, self.now + wait, delivery.attempt + 1)

    async def _deliver(self, delivery: _Delivery) -> None:
        bus = FaultyBus(self.env.plan)
        try:
            await handle(delivery.message, self._deps(bus))
        except Crash:
            self._crashed()
            if self.mode == "redelivered":
                await self._retry(delivery)
        except TransientError:
            await self._retry(delivery)
        except Exception as error:  # the function answers 500; Pub/Sub redelivers
            self.errors.append(f"{delivery.message.kind}: {type(error).__name__}: {error}")
            await self._retry(delivery)
        finally:
            self._collect(bus)

    async def _sweep(self) -> None:
        bus = FaultyBus(self.env.plan, site="sweeper.publish")
        try:
            await sweep(self._deps(bus), now=self.now)
        except Crash:
            self._crashed()
        finally:
            if self._collect(bus):
                self.sweeps_that_acted += 1

    # ─── scenes ──────────────────────────────────────────────────────────────

    async def ingest(self, chain: Chain, *, drop_start: bool = False) -> str:
        """POST /alerts in process; the session id even if the ingest died after its write."""
        store, bus = self.env.store, FaultyBus(self.env.plan)
        request = HttpRequest(
            method="POST",
            path="/alerts",
            headers={"content-type": "application/json"},
            body=json.dumps(alert(chain)).encode(),
        )
        before = len(store.created_sessions)
        deps = self.env.deps
        try:
            response = await ingest_endpoint.handle(request, deps.settings, deps.config, store, bus)
            if response.status != 202:
                self.errors.append(f"ingest answered {response.status}: {response.body}")
        except Crash:
            self._crashed()
        session_id = store.created_sessions[before]
        self.sessions.add(session_id)
        self.tracked.append((session_id, None))
        if drop_start:
            bus.take()  # published, then lost by Pub/Sub
        self._collect(bus)
        return session_id

    async def chat(self, session_id: str) -> None:
        """POST /sessions/{id}/chat in process; from now on, the chat's end is what counts."""
        bus = FaultyBus(self.env.plan)
        try:
            await api.chat(self._deps(bus), session_id, api.ChatRequest(question=QUESTION))
        except Crash:
            self._crashed()
        self.tracked = [(session_id, f"{session_id}-chat-000")]
        self.terminal_at = None
        self._collect(bus)

    # ─── running ─────────────────────────────────────────────────────────────

    async def _all_terminal(self) -> bool:
        store = self.env.store
        for session_id, execution_id in self.tracked:
            if execution_id is None:
                session = await store.get_session(session_id)
                if session is None or not session.status.is_terminal:
                    return False
            else:
                execution = await store.get_execution(execution_id)
                if execution is None or not execution.status.is_terminal:
                    return False
        return True

    async def settle(self) -> None:
        """Deliver, redeliver and sweep until every tracked session is terminal and quiet."""
        start = self.now
        next_sweep = start + SWEEP_INTERVAL
        settings = self.env.deps.settings
        # Once all has ended, keep sweeping until anything still due must have shown up:
        # what a sweep then re-runs must change nothing, and what stays due is a leak.
        quiet = timedelta(seconds=max(settings.step_lease_seconds, settings.step_due_seconds))
        for _ in range(MAX_EVENTS):
            if self.terminal_at is None and await self._all_terminal():
                self.terminal_at = self.now
            if self.terminal_at is not None and not self.queue:
                if next_sweep > self.terminal_at + quiet + SWEEP_INTERVAL:
                    return
                self.env.clock.advance_to(next_sweep)
                before = self.sweeps_that_acted
                await self._sweep()
                self.after_terminal += self.sweeps_that_acted - before
                next_sweep += SWEEP_INTERVAL
                continue
            if self.queue and self.queue[0].at <= next_sweep:
                delivery = heapq.heappop(self.queue)
                self.env.clock.advance_to(delivery.at)
                await self._deliver(delivery)
            elif self.now - start > GIVE_UP:
                return
            else:
                self.env.clock.advance_to(next_sweep)
                await self._sweep()
                next_sweep += SWEEP_INTERVAL
        self.errors.append(f"gave up after {MAX_EVENTS} deliveries and sweeps")

    async def statuses(self) -> list[str]:
        store = self.env.store
        found: list[str] = []
        for session_id, execution_id in self.tracked:
            if execution_id is None:
                session = await store.get_session(session_id)
                found.append(session.status.value if session else "missing")
            else:
                execution = await store.get_execution(execution_id)
                found.append(execution.status.value if execution else "missing")
        return found


async def run_scene(env: Env, chain: Chain, scene: Scene, mode: Mode) -> tuple[Driver, list[str]]:
    """Run one scene to the end; return the driver and the sessions it started."""
    driver = Driver(env, mode)
    if scene == "sweeper":
        # Two sessions whose start_session messages Pub/Sub lost: the sweeper restarts them.
        sessions = [await driver.ingest(chain, drop_start=True) for _ in range(2)]
    else:
        sessions = [await driver.ingest(chain)]
    await driver.settle()
    if scene == "chat":
        await driver.chat(sessions[0])
        await driver.settle()
    return driver, sessions


@dataclass
class Reference:
    """A clean run of a scene: what every crashed run must end up equal to."""

    facts: Facts
    calls: int


async def run_point(
    env: Env, point: CrashPoint | None, chain: Chain, scene: Scene, mode: Mode,
    reference: Reference | None,
) -> tuple[PointRun, list[Facts]]:  # fmt: skip
    """One run: arm the point (None: clean), drive the scene, compare with the reference."""
    env.plan.arm(point)
    calls_before = len(env.fake.calls)
    driver, sessions = await run_scene(env, chain, scene, mode)
    calls = len(env.fake.calls) - calls_before
    facts = [await session_facts(env.store, s) for s in sessions]
    diff = Difference()
    for found in facts:
        if reference is not None:
            diff.add(difference(found, reference.facts))
    reference_calls = reference.calls * len(sessions) if reference else calls
    recovery = None
    if driver.crash_at is not None and driver.terminal_at is not None:
        recovery = (driver.terminal_at - driver.crash_at).total_seconds()
    run = PointRun(
        point=point.name if point else "clean",
        chain=chain,
        mode=mode,
        crashed=driver.crash_at is not None,
        statuses=await driver.statuses(),
        recovery_s=round(recovery, 1) if recovery is not None else None,
        duplicated=diff.duplicated,
        lost=diff.lost,
        differences=diff.samples,
        model_calls=calls,
        reference_calls=reference_calls,
        repeated_calls=calls - reference_calls,
        llm_records=sum(f.llm_records for f in facts),
        iterations=sum(f.iterations for f in facts),
        due_left=[d for f in facts for d in f.due_left],
        live_left=sum(f.live_left for f in facts),
        sweeps_that_acted=driver.sweeps_that_acted,
        sweeps_after_terminal=driver.after_terminal,
        messages=len(driver.published),
        redeliveries=driver.redeliveries,
        dead_letters=driver.dead_letters,
        errors=driver.errors,
    )
    return run, facts


class CrashResults(BaseModel):
    """Every crash point in every mode that applies, and the clean runs they compare to."""

    clean: list[PointRun]
    runs: list[PointRun]
    log_errors: list[str]  # ERROR records the engine logged in this process
    log_warnings: int


# The clean runs every crashed run is compared with: a scene without a crash.
REFERENCE_SCENES: tuple[tuple[Chain, Scene], ...] = (
    ("default", "message"),
    ("tools", "message"),
    ("parallel", "message"),
    ("default", "chat"),
)


class _Captured(logging.Handler):
    """Keeps the engine's log records of the in-process runs out of the terminal."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[str] = []
        self.warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.append(f"{record.name}: {record.getMessage()}"[:300])
        else:
            self.warnings += 1


async def crash_suite(env: Env) -> CrashResults:
    """The clean reference of each scene, then every point of :data:`POINTS`."""
    env.fake.responder = deterministic
    captured = _Captured()
    engine = logging.getLogger("tarsy")
    engine.addHandler(captured)
    engine.propagate = False
    try:
        references: dict[tuple[Chain, Scene], Reference] = {}
        clean: list[PointRun] = []
        for chain, scene in REFERENCE_SCENES:
            run, [facts] = await run_point(env, None, chain, scene, "lost", None)
            references[(chain, scene)] = Reference(facts=facts, calls=run.model_calls)
            clean.append(run)
        runs: list[PointRun] = []
        for point in POINTS:
            reference = references[(point.chain, "chat" if point.scene == "chat" else "message")]
            modes: tuple[Mode, ...] = ("lost",)
            if point.scene == "message":
                modes = ("redelivered", "lost")
            for mode in modes:
                run, _ = await run_point(env, point, point.chain, point.scene, mode, reference)
                runs.append(run)
    finally:
        env.plan.arm(None)
        engine.removeHandler(captured)
        engine.propagate = True
    return CrashResults(
        clean=clean, runs=runs, log_errors=captured.errors[:30], log_warnings=captured.warnings
    )

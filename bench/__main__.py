"""``make bench``: what the step engine costs, on the emulators, against a bare baseline.

Figures (printed, and written to bench/results.json), each time figure also as a
ratio to the **baseline** measured in the same run on the same emulators: one
Firestore transaction that reads one document and writes four (p50).

* middle iterate: a native-thinking step that calls one MCP tool of the demo
  cluster and continues; overhead = step wall time - model time - tool time;
  beside it, the same step's Firestore I/O alone, replayed on copies of its
  documents (what the overhead cannot go below with the same round trips and writes);
* final iterate: the last step of a single-call execution (commit, stage end,
  executive-summary start); ``start_session`` likewise;
* Firestore round trips per step, read from the store's counter (RPCs sent together,
  such as a step's state and its conversation, share one round trip; the RPCs are
  counted too);
* orchestration share of a 10-iteration native-thinking investigation whose
  model answers in 2 s, through the real functions and Pub/Sub push:
  (end-to-end - model time - tool time) / end-to-end; run twice, and the first
  (which pays each function process's first request: settings, config, SDK
  clients, the MCP connection) is shown apart as the cold figure;
* end-to-end ingest → completed, from the session's own timestamps, through the
  real functions-framework processes and Pub/Sub push (the first session, which
  warms the processes, apart);
* ingest 202 latency p50/p99 and accepted alerts/s over a bounded burst;
* cold start of each function: a fresh interpreter that imports the function's
  module and exits, timed whole from outside (interpreter start included), with
  what only the development extras install made unfindable (as in the archives), and
  its ratio to the same process importing only functions_framework,
  google.cloud.firestore and google.cloud.pubsub (what any such function pays);
  beside the floor, the floor with pydantic (one model built) and PyYAML (one
  document read), which every function's path needs; the in-process import
  time is shown beside each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore, pubsub_v1  # type: ignore[attr-defined]
from rich.console import Console
from rich.table import Table

from tarsy.app import Deps
from tarsy.config import load_config
from tarsy.engine.steps import handle
from tarsy.models import Session, StepMessage
from tarsy.persistence._firestore import (
    EXECUTIONS,
    LLM_INTERACTIONS,
    MCP_INTERACTIONS,
    MESSAGES,
    PROGRESS,
    SESSIONS,
    TIMELINE,
    TOOL_LISTS,
)
from tarsy.persistence.store import THOUGHT_SIGNATURES, Store, get_store
from tarsy.settings import Settings
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.client import LocalSignIn
from tarsy_dev.deployed import undeployed_modules, without_undeployed
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.localstack.processes import free_port
from tarsy_dev.localstack.stack import Stack, StackOptions, start_stack, stop_stack

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
FUNCTION_DIR = ROOT / "functions"
# A session that ends anything but completed leaves its view and the stack's logs here,
# one directory per failure, never overwritten (the stack's own logs go with it).
FAILURES = ROOT / "bench" / "failures"
STEP_SAMPLES = 40
BASELINE_SAMPLES = 60
MIDDLE_SAMPLES = 20
MIDDLE_TURNS = 5  # the fake keeps calling tools for this many turns
LONG_ITERATIONS = 10
MODEL_SECONDS = 2.0
SCENARIO = "crashloop-bad-configmap"
# Targets of production readiness (issue 26; round trips from issue 12), checked in the table.
TARGETS = {"middle_ratio": 2.0, "middle_trips": 3, "final_trips": 6, "share": 0.04,
           "cold_ratio": 1.2, "cold_ratio_step": 1.4}  # fmt: skip
E2E_SESSIONS = 20
BURST_ALERTS = 200
BURST_CONCURRENCY = 8
IMPORT_RUNS = 5
console = Console(stderr=True)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 and mean, rounded for display."""
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "p99": round(percentile(values, 99), 2),
        "mean": round(statistics.fmean(values), 2),
        "n": len(values),
    }


async def bench_baseline(store: Store) -> dict[str, Any]:
    """One transaction that reads one document and writes four: the emulator's floor."""
    client = store._db  # the same client and channel the engine uses
    durations: list[float] = []
    for n in range(BASELINE_SAMPLES):
        base = client.collection("bench_baseline").document(f"doc-{n}")
        await base.set({"n": n})
        transaction = client.transaction()

        @firestore.async_transactional
        async def read_and_write(tx: Any, ref: Any = base, i: int = n) -> None:
            snapshot = await ref.get(transaction=tx)
            for k in range(4):
                tx.set(ref.collection("w").document(str(k)), {"i": i, "seen": snapshot.exists})

        t0 = time.perf_counter()
        await read_and_write(transaction)
        durations.append((time.perf_counter() - t0) * 1000)
    return {"transaction_1r4w_ms": summary(durations[1:])}


def functions_config(stack: Stack) -> Path:
    """The configuration the stack's functions run with (kubernetes-mcp-server included)."""
    [step] = [p for p in stack.processes if p.name == "step"]
    return Path(step.log_path).parent.parent / "config.yaml"


# Distinct calls, so that no loop detection cuts an investigation short.
TURN_CALLS = [
    FakeToolCall(name=f"kubernetes__{tool}", args={"namespace": namespace})
    for namespace in ("shop", "default", "kube-system", "payments")
    for tool in ("pods_list_in_namespace", "events_list", "pods_top")
]


def _kubernetes_turns(call: FakeCall) -> FakeReply:
    """A native-thinking agent that calls one tool per turn, then answers."""
    turn = len(call.model_parts())
    if call.function_names() and turn < MIDDLE_TURNS:
        return FakeReply(thinking="Checking the cluster.", tool_calls=[TURN_CALLS[turn]])
    return FakeReply(text="The config map is wrong; fix it.")


class TimedTools:
    """The MCP executor, timing each turn's calls whole (a connection included, if any)."""

    def __init__(self, inner: MCPToolExecutor) -> None:
        self.inner = inner
        self.last_ms = 0.0

    async def list_tools(self, servers: Any, cached: Any = None, *, budget: Any = None) -> Any:
        return await self.inner.list_tools(servers, cached, budget=budget)

    async def call_tools(self, calls: Any, listing: Any, *, budget: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return await self.inner.call_tools(calls, listing, budget=budget)
        finally:
            self.last_ms = (time.perf_counter() - started) * 1000


FLOOR_SAMPLES = 30


async def _copy(source: Any, target: Any) -> dict[str, Any]:
    data: dict[str, Any] = (await source.get()).to_dict() or {}
    await target.set(data)
    return data


async def bench_middle_io(store: Store, middle: StepMessage, tool_servers: list[str]) -> Any:
    """The Firestore I/O of one middle step alone, replayed on copies of its documents.

    The step's three round trips with the same documents and payloads, and none of
    tarsy's Python: the state read (execution, session, provider state and tool lists,
    with the conversation queried alongside), the claim (an update under a precondition)
    and the commit (the records the step wrote, its progress delete, and the execution
    and session updates, in one batch). What the middle iterate's overhead cannot go
    below without fewer round trips or smaller writes. Beside it, interleaved, the
    same documents in two round trips, the claim made beside the read: what the
    other design the issue names would wait for at best.
    """
    db = store._db
    execution = db.collection(EXECUTIONS).document(middle.execution_id)
    scratch = db.collection("bench_floor").document(uuid.uuid4().hex)
    exec_copy, session_copy = (
        scratch.collection("e").document("x"),
        scratch.collection("s").document("x"),
    )
    await _copy(execution, exec_copy)
    await _copy(db.collection(SESSIONS).document(middle.session_id), session_copy)
    reads = [exec_copy, session_copy]
    for name, source in [
        ("signature", db.collection(THOUGHT_SIGNATURES).document(middle.execution_id)),
        *[(f"tools-{s}", db.collection(TOOL_LISTS).document(s)) for s in tool_servers],
    ]:
        target = scratch.collection("r").document(name)
        if (await source.get()).exists:
            await _copy(source, target)
        reads.append(target)
    written: list[tuple[str, str, dict[str, Any]]] = []
    prefix = f"{middle.step:04d}"
    for sub in (MESSAGES, TIMELINE, LLM_INTERACTIONS, MCP_INTERACTIONS):
        async for snap in execution.collection(sub).stream():
            if sub == MESSAGES and snap.id < prefix:  # the conversation the step read
                await exec_copy.collection(MESSAGES).document(snap.id).set(snap.to_dict())
            elif snap.id.startswith(prefix):
                written.append((sub, snap.id, snap.to_dict() or {}))
    conversation = exec_copy.collection(MESSAGES).order_by("__name__")

    def commit_batch(
        n: int, claim_option: Any, marker: Any = None, marker_option: Any = None
    ) -> Any:
        batch = db.batch()
        for sub, doc_id, data in written:
            batch.set(exec_copy.collection(f"{sub}_written").document(f"{doc_id}-{n}"), data)
        batch.delete(exec_copy.collection(PROGRESS).document("current"))
        batch.update(
            exec_copy,
            {"step": n, "lease_owner": None, "tokens.input": firestore.Increment(1)},
            option=claim_option,
        )
        batch.update(session_copy, {"tokens.input": firestore.Increment(1)})
        if marker is not None:
            batch.delete(marker, option=marker_option)
        return batch.commit()

    async def three_trips(n: int) -> None:
        """Today's step: the read with the query alongside, the claim, the commit."""
        snapshots: list[Any]
        snapshots, _ = await asyncio.gather(_all(db.get_all(reads)), _all(conversation.stream()))
        [read_time] = [s.update_time for s in snapshots if s.reference.path == exec_copy.path]
        claimed = await exec_copy.update(
            {"lease_owner": "bench", "lease_until": n, "due_at": n},
            option=db.write_option(last_update_time=read_time),
        )
        await commit_batch(n, db.write_option(last_update_time=claimed.update_time))

    async def two_trips(n: int) -> None:
        """A design with the claim beside the read: a marker's create(), then the commit.

        The commit deletes the marker under its own precondition and updates the
        execution under the read's: what a lease on a marker would cost at best.
        """
        marker = exec_copy.collection("claims").document(f"{n:04d}")
        snapshots: list[Any]
        snapshots, _, created = await asyncio.gather(
            _all(db.get_all(reads)),
            _all(conversation.stream()),
            marker.create({"owner": "bench", "until": n}),
        )
        [read_time] = [s.update_time for s in snapshots if s.reference.path == exec_copy.path]
        await commit_batch(
            n,
            db.write_option(last_update_time=read_time),
            marker,
            db.write_option(last_update_time=created.update_time),
        )

    durations: dict[str, list[float]] = {"three": [], "two": []}
    for n in range(FLOOR_SAMPLES + 1):
        # Interleaved, so that a busy moment of the machine weighs on both alike.
        for name, replay in (("three", three_trips), ("two", two_trips)):
            t0 = time.perf_counter()
            await replay(n)
            durations[name].append((time.perf_counter() - t0) * 1000)
    return {
        "middle_io_ms": summary(durations["three"][1:]),
        "middle_io_two_trips_ms": summary(durations["two"][1:]),
        "middle_io_documents_written": len(written) + 3,
    }


async def _all(snapshots: Any) -> list[Any]:
    return [snap async for snap in snapshots]


async def bench_middle_iterate(stack: Stack, fake: FakeGemini) -> dict[str, Any]:
    """Tool-calling steps of the kubernetes chain, in process, against the demo cluster.

    The stack's ``kubernetes`` server is kubernetes-mcp-server (over stdio) on the
    demo cluster's Kubernetes API, as ``make demo`` runs it.
    """
    settings = Settings(
        GOOGLE_CLOUD_PROJECT=stack.project_id,
        GEMINI_API_KEY="bench",
        GEMINI_BASE_URL=fake.url,
        TARSY_CONFIG_PATH=str(functions_config(stack)),
    )
    store = get_store(settings)
    config = load_config(settings)
    recorder = RecordingBus()
    # Warm, as the step function runs it: a connection is opened once per process.
    executor = MCPToolExecutor(config, settings, store, warm=True)
    tools = TimedTools(executor)
    deps = Deps(settings=settings, config=config, store=store, bus=recorder, tools=tools)
    fake.responder = _kubernetes_turns
    overhead: list[float] = []
    connect: list[float] = []
    trips: list[int] = []
    rpcs: list[int] = []
    for _ in range(MIDDLE_SAMPLES):
        session = Session(
            session_id=f"bench-{uuid.uuid4()}",
            alert_type="kubernetes",
            alert_data='{"pod": "api-0", "namespace": "shop"}',
            chain_id="kubernetes",
        )
        await store.create_session(session)
        await handle(StepMessage(session_id=session.session_id, kind="start_session"), deps)
        first = recorder.published.pop()
        await handle(first, deps)  # the first step; the second is a middle one too
        middle = recorder.published.pop()
        before, sent = store.round_trips.count, store.round_trips.rpcs
        t0 = time.perf_counter()
        await handle(middle, deps)
        wall = (time.perf_counter() - t0) * 1000
        trips.append(store.round_trips.count - before)
        rpcs.append(store.round_trips.rpcs - sent)
        [llm] = [i for i in await store.list_llm_interactions(middle.execution_id)
                 if i.step == middle.step]  # fmt: skip
        records = [r for r in await store.list_mcp_interactions(middle.execution_id)
                   if r.step == middle.step]  # fmt: skip
        assert records and recorder.published[-1].step == middle.step + 1, "not a middle step"
        # Tool time: the calls themselves; reaching the server (a connection, if one is
        # opened) is the engine's overhead.
        calls_ms = sum(r.duration_ms for r in records)
        overhead.append(wall - llm.duration_ms - calls_ms)
        connect.append(tools.last_ms - calls_ms)
    fake.responder = lambda call: FakeReply(text="bench analysis")
    assert executor.pool is not None
    opened = executor.pool.opened
    await executor.pool.close()
    io = await bench_middle_io(store, middle, sorted(config.mcp_servers))
    return {
        **io,
        "middle_iterate_overhead_ms": summary(overhead),
        "mcp_connection_ms": summary(connect),
        "mcp_connections_opened": opened,
        "round_trips_middle_iterate": statistics.median(trips),
        "rpcs_middle_iterate": statistics.median(rpcs),
    }


def bench_orchestration_share(stack: Stack, fake: FakeGemini) -> dict[str, Any]:
    """A 10-iteration native-thinking investigation through the real functions, 2 s per call."""

    def slow_turns(call: FakeCall) -> FakeReply:
        reply = _long_investigation(call)
        return reply.model_copy(update={"delay": MODEL_SECONDS})

    fake.responder = slow_turns
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    alert = {"alert_type": "kubernetes", "data": {"pod": "api-0", "namespace": "shop"}}
    # The api takes a signed-in person (the stack's user), ingest the key.
    signin = LocalSignIn(stack.signin_key_pem, stack.user)
    with httpx.Client(headers=headers, auth=signin, timeout=30) as client:
        response = client.post(f"{stack.ingest_url}/alerts", json=alert)
        response.raise_for_status()
        session_id = response.json()["session_id"]
        deadline = time.monotonic() + 300
        while not _finished(session := _session(client, stack, session_id)):
            if time.monotonic() > deadline:
                kept = keep_failure(stack, client, session_id)
                raise BenchFailure(f"session {session_id} did not finish (kept in {kept})")
            time.sleep(0.2)
        if session["status"] != "completed":
            kept = keep_failure(stack, client, session_id)
            error = (session.get("error") or {}).get("message")
            raise BenchFailure(
                f"session {session_id} ended {session['status']}: {error} (kept in {kept})"
            )
    fake.responder = lambda call: FakeReply(text="bench analysis")
    end_to_end = (_timestamp(session["completed_at"]) - _timestamp(session["created_at"])) * 1000
    model_ms, tool_ms, iterations = asyncio.run(_spent(stack, session_id))
    share = (end_to_end - model_ms - tool_ms) / end_to_end
    return {
        "end_to_end_ms": round(end_to_end, 1),
        "model_ms": round(model_ms, 1),
        "tool_ms": round(tool_ms, 1),
        "model_calls": iterations,
        "orchestration_share": round(share, 4),
    }


class BenchFailure(RuntimeError):
    """A benchmark session did not complete; its evidence is kept under bench/failures."""


def _finished(session: dict[str, Any]) -> bool:
    return session["status"] in ("completed", "failed", "timed_out", "cancelled")


def keep_failure(stack: Stack, client: httpx.Client, session_id: str) -> Path:
    """Copy the session's whole view (executions, timelines, errors) and the stack's logs.

    Into a new directory under :data:`FAILURES`, named by the time and the
    session, so that a later run never overwrites the evidence of this one.
    """
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = FAILURES / f"{stamp}-{session_id}"
    target.mkdir(parents=True, exist_ok=True)
    try:
        view = client.get(f"{stack.api_url}/sessions/{session_id}")
        (target / "session.json").write_text(json.dumps(view.json(), indent=2) + "\n")
    except (httpx.HTTPError, ValueError) as error:
        (target / "session.json").write_text(json.dumps({"unreadable": str(error)}) + "\n")
    logs = {Path(process.log_path).parent for process in stack.processes if process.log_path}
    for directory in logs:
        shutil.copytree(directory, target / directory.name, dirs_exist_ok=True)
    return target


def _long_investigation(call: FakeCall) -> FakeReply:
    if not call.function_names():
        return FakeReply(text="Summary: the config map is wrong.")  # the executive summary
    if len(call.model_parts()) < LONG_ITERATIONS - 1:
        turn = len(call.model_parts())
        return FakeReply(thinking="Looking further.", tool_calls=[TURN_CALLS[turn]])
    return FakeReply(text="The config map is wrong; fix it.")


async def _spent(stack: Stack, session_id: str) -> tuple[float, float, int]:
    # A client of this event loop's own (the process-wide store is bound to another).
    store = Store(firestore.AsyncClient(project=stack.project_id))
    model_ms = tool_ms = 0.0
    calls = 0
    for execution in await store.list_executions(session_id):
        for interaction in await store.list_llm_interactions(execution.execution_id):
            model_ms += interaction.duration_ms
            calls += 1
        for record in await store.list_mcp_interactions(execution.execution_id):
            tool_ms += record.duration_ms
    return model_ms, tool_ms, calls


async def _in_process(stack: Stack, fake: FakeGemini) -> dict[str, Any]:
    """The in-process figures, on one event loop (the store's client is bound to it)."""
    steps = await bench_steps(stack, fake)
    store = get_store(Settings(GOOGLE_CLOUD_PROJECT=stack.project_id))
    return {
        "baseline": await bench_baseline(store),
        "steps": steps,
        "middle": await bench_middle_iterate(stack, fake),
    }


async def bench_steps(stack: Stack, fake: FakeGemini) -> dict[str, Any]:
    settings = Settings(
        GOOGLE_CLOUD_PROJECT=stack.project_id,
        GEMINI_API_KEY="bench",
        GEMINI_BASE_URL=fake.url,
    )
    store = get_store(settings)
    deps = Deps(
        settings=settings, config=load_config(settings), store=store, bus=RecordingBus()
    )  # publishes nowhere
    recorder = RecordingBus()
    start_ms: list[float] = []
    iterate_ms: list[float] = []
    start_trips: list[int] = []
    iterate_trips: list[int] = []
    for _ in range(STEP_SAMPLES):
        session = Session(
            session_id=f"bench-{uuid.uuid4()}",
            alert_type="kubernetes",
            alert_data='{"pod": "api-0"}',
            chain_id="default",
        )
        await store.create_session(session)
        before = store.round_trips.count
        t0 = time.perf_counter()
        await handle(
            StepMessage(session_id=session.session_id, kind="start_session"),
            replace(deps, bus=recorder),
        )
        start_ms.append((time.perf_counter() - t0) * 1000)
        start_trips.append(store.round_trips.count - before)
        iterate = recorder.published.pop()
        before = store.round_trips.count
        t0 = time.perf_counter()
        await handle(iterate, deps)
        iterate_ms.append((time.perf_counter() - t0) * 1000)
        iterate_trips.append(store.round_trips.count - before)
    return {
        "start_session_ms": summary(start_ms[1:]),  # the first pays for channel set-up
        "iterate_ms": summary(iterate_ms[1:]),
        "round_trips_start_session": statistics.median(start_trips),
        "round_trips_iterate": statistics.median(iterate_trips),
        "round_trips_by_kind_total": dict(store.round_trips.by_kind),
    }


def _session(client: httpx.Client, stack: Stack, session_id: str) -> dict[str, Any]:
    response = client.get(f"{stack.api_url}/sessions/{session_id}")
    response.raise_for_status()
    session: dict[str, Any] = response.json()["session"]
    return session


def bench_end_to_end(stack: Stack) -> dict[str, Any]:
    """Sessions of the default chain (single-call + executive summary), one after another.

    The first one also pays for each function process's first request (settings,
    config, SDK clients), so it is reported apart from the warm ones.
    """
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    alert = {"alert_type": "bench", "data": {"pod": "api-0", "reason": "CrashLoop"}}
    durations: list[float] = []
    # The api takes a signed-in person (the stack's user), ingest the key.
    signin = LocalSignIn(stack.signin_key_pem, stack.user)
    with httpx.Client(headers=headers, auth=signin, timeout=30) as client:
        for _ in range(1 + E2E_SESSIONS):
            response = client.post(f"{stack.ingest_url}/alerts", json=alert)
            response.raise_for_status()
            session_id = response.json()["session_id"]
            deadline = time.monotonic() + 60
            while True:
                session = _session(client, stack, session_id)
                if session["status"] in ("completed", "failed"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"session {session_id} did not finish")
                time.sleep(0.05)
            if session["status"] != "completed":
                raise RuntimeError(f"session {session_id} ended {session['status']}")
            created = _timestamp(session["created_at"])
            completed = _timestamp(session["completed_at"])
            durations.append((completed - created) * 1000)
    return {
        "first_session_ms": round(durations[0], 2),
        "ingest_to_completed_ms": summary(durations[1:]),
        "all_sessions_ms": [round(d, 2) for d in durations],
    }


def _timestamp(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value).timestamp()


def bench_ingest_burst(stack: Stack) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    body = json.dumps({"alert_type": "kubernetes", "data": {"pod": "api-0"}}).encode()
    latencies: list[float] = []

    def post(client: httpx.Client) -> float:
        t0 = time.perf_counter()
        response = client.post(
            f"{stack.ingest_url}/alerts",
            content=body,
            headers={**headers, "Content-Type": "application/json"},
        )
        elapsed = (time.perf_counter() - t0) * 1000
        if response.status_code != 202:
            raise RuntimeError(f"ingest answered {response.status_code}: {response.text}")
        return elapsed

    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=BURST_CONCURRENCY)) as c:
        post(c)  # warm the connection pool and the function's clients
        t0 = time.perf_counter()
        with ThreadPoolExecutor(BURST_CONCURRENCY) as pool:
            latencies = list(pool.map(lambda _: post(c), range(BURST_ALERTS)))
        wall = time.perf_counter() - t0
    return {
        "ingest_202_ms": summary(latencies),
        "alerts_per_second": round(BURST_ALERTS / wall, 1),
        "burst": {"alerts": BURST_ALERTS, "concurrency": BURST_CONCURRENCY},
    }


def _deployed_prelude() -> str:
    """As deployed: what only the development extras install cannot be found.

    httpx, for one, would load its command-line tool with rich and pygments where
    they are installed.
    """
    return without_undeployed(undeployed_modules(ROOT / "pyproject.toml"))


def bench_cold_imports() -> dict[str, float]:
    """Whole-process cold starts (and in-process import times), medians of a few runs.

    Each run is a fresh interpreter that imports one function's module (or only the
    floor's three packages) and exits, timed from outside: what a new instance pays
    before its first request, interpreter start included.
    """
    code = (
        "import importlib.util, sys, time\n"
        "t = time.perf_counter()\n"
        "spec = importlib.util.spec_from_file_location('main', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(time.perf_counter() - t)\n"
    )
    floor_imports = "import functions_framework, google.cloud.firestore, google.cloud.pubsub\n"
    # The floor plus what every function's path needs before its own code: pydantic, with
    # one model built (its machinery loads with the first model), and PyYAML, with one
    # document read (the configuration).
    libraries_work = (
        "import pydantic, yaml\n"
        "class Probe(pydantic.BaseModel):\n    name: str\n"
        "Probe.model_validate(yaml.safe_load('name: probe'))\n"
    )
    timed = "import time\nt = time.perf_counter()\n{}print(time.perf_counter() - t)\n"
    deployed = _deployed_prelude()
    code = deployed + code
    floor = deployed + timed.format(floor_imports)
    libraries = deployed + timed.format(floor_imports + libraries_work)
    runs: dict[str, list[tuple[float, float]]] = {}
    # Interleaved, so that a busy moment of the machine weighs on every figure alike.
    for _ in range(IMPORT_RUNS):
        for name in ("baseline", "libraries", "ingest", "step", "api"):
            args = (
                [sys.executable, "-c", {"baseline": floor, "libraries": libraries}[name]]
                if name in ("baseline", "libraries")
                else [sys.executable, "-c", code, str(FUNCTION_DIR / name / "main.py")]
            )
            t0 = time.perf_counter()
            out = subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT)
            process_ms = (time.perf_counter() - t0) * 1000
            import_ms = float(out.stdout.strip().splitlines()[-1]) * 1000
            runs.setdefault(name, []).append((process_ms, import_ms))
    results: dict[str, float] = {}
    for name, measured in runs.items():
        results[f"{name}_ms"] = round(statistics.median(p for p, _ in measured), 1)
        results[f"{name}_import_ms"] = round(statistics.median(i for _, i in measured), 1)
    return results


COLD_TOPIC = "bench-cold-start"  # no subscription: what cold processes publish goes nowhere

# The floor of a first response: a function that, on its first request, makes the clients
# and writes one Firestore document and publishes one Pub/Sub message, as ingest does.
FLOOR_FUNCTION = """
import os

import functions_framework
from google.cloud import firestore
from google.cloud import pubsub_v1  # type: ignore[attr-defined]

_clients = []


@functions_framework.http
def floor(request):
    if not _clients:
        _clients.extend([firestore.Client(), pubsub_v1.PublisherClient()])
    db, publisher = _clients
    db.collection("bench_cold_start").document().create({"body": request.get_json()})
    project, topic_id = os.environ["GOOGLE_CLOUD_PROJECT"], os.environ["TARSY_STEPS_TOPIC"]
    topic = publisher.topic_path(project, topic_id)
    publisher.publish(topic, b"{}").result()
    return "", 202
"""


def _first_response_ms(argv: list[str], env: dict[str, str], url: str, body: Any) -> float:
    """Milliseconds from spawning a functions-framework process to its first 202."""
    t0 = time.perf_counter()
    process = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with httpx.Client(timeout=30, headers={"X-API-Key": env["TARSY_API_KEY"]}) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    response = client.post(url, json=body)
                    break
                except httpx.TransportError:  # not listening yet
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise
                    time.sleep(0.002)
        elapsed = (time.perf_counter() - t0) * 1000
        if response.status_code != 202:
            raise RuntimeError(f"{argv[-1]}: {response.status_code} {response.text[:200]}")
        return elapsed
    finally:
        process.terminate()
        process.wait(timeout=30)


def bench_cold_first_response(stack: Stack) -> dict[str, float]:
    """Cold starts to the first answered request: ingest against a floor function, interleaved.

    The import-only figure leaves out what a new instance does on its first request
    (settings, configuration, clients, the alert's checks and masking). Here each run
    spawns functions-framework, as Cloud Functions does, and posts one alert until it
    is answered; the floor function makes its clients and writes one document and one
    message on its first request, as ingest does. Both publish to a topic no one reads,
    so nothing runs behind them. What only the development extras install is made
    unfindable, as in the archives.
    """
    publisher = pubsub_v1.PublisherClient()
    topic = publisher.topic_path(stack.project_id, COLD_TOPIC)
    try:
        publisher.create_topic(name=topic)
    except AlreadyExists:
        pass
    env = {
        **os.environ,
        "GOOGLE_CLOUD_PROJECT": stack.project_id,
        "FIRESTORE_EMULATOR_HOST": stack.firestore_host,
        "PUBSUB_EMULATOR_HOST": stack.pubsub_host,
        "TARSY_API_KEY": stack.api_key,
        "TARSY_STEPS_TOPIC": COLD_TOPIC,
        "TARSY_CONFIG_PATH": str(functions_config(stack)),
        "TARSY_LOG_FORMAT": "console",
    }
    deployed = without_undeployed(undeployed_modules(ROOT / "pyproject.toml"))
    serve = (
        deployed + "import runpy\nrunpy.run_module('functions_framework', run_name='__main__')\n"
    )
    alert = {"alert_type": "bench", "data": {"pod": "api-0", "reason": "CrashLoop"}}
    runs: dict[str, list[float]] = {"floor": [], "ingest": []}
    with tempfile.TemporaryDirectory() as directory:
        floor_source = Path(directory) / "main.py"
        floor_source.write_text(FLOOR_FUNCTION, encoding="utf-8")
        sources = {
            "floor": (floor_source, "floor"),
            "ingest": (FUNCTION_DIR / "ingest" / "main.py", "ingest"),
        }
        for _ in range(IMPORT_RUNS):
            for name, (source, target) in sources.items():
                port = free_port()
                argv = [sys.executable, "-c", serve, "--target", target, "--source", str(source),
                        "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
                url = (
                    f"http://127.0.0.1:{port}/alerts"
                    if name == "ingest"
                    else f"http://127.0.0.1:{port}/"
                )
                runs[name].append(_first_response_ms(argv, env, url, alert))
    return {f"{name}_ms": round(statistics.median(values), 1) for name, values in runs.items()}


def python_speed() -> float:
    """Milliseconds per million steps of a plain Python loop (median of 3): the machine's pace.

    Ratios are read against floors measured in the same run, but a slow machine
    (a busy host) moves them all toward 1: this tells a slow run from a quiet one.
    """
    steps = 2_000_000
    durations: list[float] = []
    for _ in range(3):
        t0, total = time.perf_counter(), 0
        for n in range(steps):
            total += n
        durations.append((time.perf_counter() - t0) * 1000 / (steps / 1_000_000))
    return round(statistics.median(durations), 1)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}x" if base else "-"


def _check(ok: bool) -> str:
    return "[green]met[/]" if ok else "[red]not met[/]"


def _table(results: dict[str, Any]) -> Table:
    pace = results["machine"]["loop_ms_per_million"]
    table = Table(
        title="tarsy step engine on the emulators (ratios: to the 1-read/4-write baseline)",
        caption=(
            f"machine: a plain Python loop ran {pace['start']:g} ms per million steps at the "
            f"start, {pace.get('end', '-')} at the end (a slower machine moves every ratio "
            "toward 1)"
        ),
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("target")
    base = results["baseline"]["transaction_1r4w_ms"]["p50"]
    table.add_row("baseline: transaction, 1 read + 4 writes, p50 (ms)", str(base), "1.0x", "")
    middle = results["middle"]
    overhead = middle["middle_iterate_overhead_ms"]["p50"]
    table.add_row(
        "middle iterate overhead (wall - model - tool calls), p50 (ms)",
        str(overhead),
        _ratio(overhead, base),
        f"≤ {TARGETS['middle_ratio']:g}x: {_check(overhead <= TARGETS['middle_ratio'] * base)}",
    )
    io = middle["middle_io_ms"]["p50"]
    table.add_row(
        f"  its Firestore I/O alone, replayed on copies of the step's documents (the read "
        f"with the conversation, the claim, the {middle['middle_io_documents_written']}-write "
        "commit), p50 (ms)",
        str(io),
        _ratio(io, base),
        "",
    )
    two = middle["middle_io_two_trips_ms"]["p50"]
    table.add_row(
        "  the same I/O in two round trips (the claim a marker's create() beside the read, "
        "the marker deleted by the commit), p50 (ms)",
        str(two),
        _ratio(two, base),
        "",
    )
    connect = middle["mcp_connection_ms"]["p50"]
    table.add_row(
        f"  reaching the MCP server per turn, in the overhead, p50 (ms; warm: "
        f"{middle['mcp_connections_opened']} connection(s) opened in all)",
        str(connect),
        "",
        "",
    )
    trips = middle["round_trips_middle_iterate"]
    table.add_row(
        f"Firestore round trips: middle iterate (+1 publish; {middle['rpcs_middle_iterate']:g} "
        "RPCs, the state and the conversation read together)",
        str(trips),
        "",
        f"≤ {TARGETS['middle_trips']}: {_check(trips <= TARGETS['middle_trips'])}",
    )
    steps = results["steps"]
    final = steps["iterate_ms"]["p50"]
    table.add_row(
        "final iterate (commit + stage end + summary start), p50 (ms)",
        str(final),
        _ratio(final, base),
        "",
    )
    trips = steps["round_trips_iterate"]
    table.add_row(
        "Firestore round trips: final iterate",
        str(trips),
        "",
        f"≤ {TARGETS['final_trips']}: {_check(trips <= TARGETS['final_trips'])}",
    )
    start = steps["start_session_ms"]["p50"]
    table.add_row("start_session p50 (ms)", str(start), _ratio(start, base), "")
    table.add_row(
        "Firestore round trips: start_session", str(steps["round_trips_start_session"]), "", ""
    )
    cold = results["orchestration_cold"]
    table.add_row(
        "orchestration share, cold processes (first investigation)",
        f"{cold['orchestration_share'] * 100:.1f}%",
        "",
        "",
    )
    share = results["orchestration"]
    table.add_row(
        f"orchestration share, {share['model_calls']} model calls of {MODEL_SECONDS:g} s "
        f"(end to end {share['end_to_end_ms'] / 1000:.1f} s)",
        f"{share['orchestration_share'] * 100:.1f}%",
        "",
        f"≤ {TARGETS['share'] * 100:g}%: "
        + _check(share["orchestration_share"] <= TARGETS["share"]),
    )
    e2e = results["end_to_end"]["ingest_to_completed_ms"]
    table.add_row(
        f"single-call session ingest → completed, warm p50 / p95 (ms, {e2e['n']} sessions)",
        f"{e2e['p50']} / {e2e['p95']}",
        _ratio(e2e["p50"], base),
        "",
    )
    table.add_row(
        "ingest → completed, first session (ms)",
        str(results["end_to_end"]["first_session_ms"]),
        "",
        "",
    )
    burst = results["ingest"]
    table.add_row(
        "ingest 202 p50 / p99 (ms)",
        f"{burst['ingest_202_ms']['p50']} / {burst['ingest_202_ms']['p99']}",
        _ratio(burst["ingest_202_ms"]["p50"], base),
        "",
    )
    table.add_row(
        f"ingest throughput ({burst['burst']['alerts']} alerts, {BURST_CONCURRENCY} clients)",
        f"{burst['alerts_per_second']} alerts/s",
        "",
        "",
    )
    imports = results["cold_import_ms"]
    floor = imports["baseline_ms"]
    floor_import = imports.get("baseline_import_ms", 0.0)
    table.add_row(
        "cold start: a process importing functions_framework + firestore + pubsub "
        f"(ms; the imports alone {floor_import})",
        str(floor),
        "1.0x",
        "",
    )
    if "libraries_ms" in imports:
        table.add_row(
            "  the same process with pydantic and PyYAML too, one model built and one YAML "
            f"document read: what every function's path needs (ms; the imports alone "
            f"{imports['libraries_import_ms']})",
            str(imports["libraries_ms"]),
            _ratio(imports["libraries_ms"], floor),
            "",
        )
    first = results.get("cold_first_response_ms")
    if first is not None:
        table.add_row(
            "cold start to the first response: a function making its clients and writing "
            "one document and one message (ms)",
            str(first["floor_ms"]),
            "1.0x",
            "",
        )
        table.add_row(
            "cold start to the first response: ingest, one alert accepted (ms)",
            str(first["ingest_ms"]),
            _ratio(first["ingest_ms"], first["floor_ms"]),
            "",
        )
    for name in ("ingest", "api", "step"):
        value = imports[f"{name}_ms"]
        ratio = TARGETS["cold_ratio_step" if name == "step" else "cold_ratio"]
        target = f"≤ {ratio:g}x: {_check(value <= ratio * floor)}"
        alone = imports.get(f"{name}_import_ms", 0.0)
        table.add_row(
            f"cold start {name} (ms; its imports alone {alone}, {_ratio(alone, floor_import)})",
            str(value),
            _ratio(value, floor),
            target,
        )
    return table


def repeat_orchestration(runs: int) -> int:
    """Run the in-process figures, then the orchestration figure ``runs`` times, on one stack.

    Every failed session is kept (:func:`keep_failure`); the figures are only printed.
    """
    failures: list[str] = []
    shares: list[float] = []
    with tempfile.TemporaryDirectory() as state, FakeGemini() as fake:
        fake.responder = lambda call: FakeReply(text="bench analysis")
        stack = start_stack(
            StackOptions(
                root=ROOT, state_dir=Path(state), gemini_base_url=fake.url, scenario=SCENARIO
            ),
            Settings(),
        )
        saved = dict(os.environ)
        os.environ.update(stack.client_env())
        try:
            # As make bench runs it: after the in-process figures, on the same emulators
            # (once: the process-wide store is bound to the event loop that ran them).
            asyncio.run(_in_process(stack, fake))
            for run in range(1, runs + 1):
                try:
                    share = bench_orchestration_share(stack, fake)
                except BenchFailure as failure:
                    failures.append(str(failure))
                    console.print(f"run {run}: [red]{failure}[/red]")
                    continue
                shares.append(share["orchestration_share"])
                console.print(f"run {run}: share {share['orchestration_share'] * 100:.2f}%")
        finally:
            stop_stack(stack)
            os.environ.clear()
            os.environ.update(saved)
    console.print(f"{len(failures)} of {runs} runs failed; shares {shares}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--orchestration-runs",
        type=int,
        default=0,
        metavar="N",
        help="run the in-process figures, then the orchestration-share figure N times, "
        "on one stack, keeping every failed session's view and logs under bench/failures",
    )
    arguments = parser.parse_args(argv)
    if arguments.orchestration_runs > 0:
        return repeat_orchestration(arguments.orchestration_runs)
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version,
            "loop_ms_per_million": {"start": python_speed()},
        }
    }
    with tempfile.TemporaryDirectory() as state, FakeGemini() as fake:
        fake.responder = lambda call: FakeReply(text="bench analysis")
        with console.status("starting the local stack"):
            stack = start_stack(
                StackOptions(
                    root=ROOT, state_dir=Path(state), gemini_base_url=fake.url, scenario=SCENARIO
                ),
                Settings(),
            )
        saved = dict(os.environ)
        os.environ.update(stack.client_env())
        try:
            with console.status("step overhead (in process)"):
                results.update(asyncio.run(_in_process(stack, fake)))
            with console.status("orchestration share (10 model calls of 2 s each, real functions)"):
                results["orchestration_cold"] = bench_orchestration_share(stack, fake)
                results["orchestration"] = bench_orchestration_share(stack, fake)
            with console.status("end to end through Pub/Sub push"):
                results["end_to_end"] = bench_end_to_end(stack)
            # Before the burst: its 200 sessions keep the stack's step function busy a while.
            with console.status("cold starts to the first response"):
                results["cold_first_response_ms"] = bench_cold_first_response(stack)
            with console.status("ingest burst"):
                results["ingest"] = bench_ingest_burst(stack)
        finally:
            stop_stack(stack)
            os.environ.clear()
            os.environ.update(saved)
    with console.status("cold imports"):
        results["cold_import_ms"] = bench_cold_imports()
    results["machine"]["loop_ms_per_million"]["end"] = python_speed()
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    Console().print(_table(results))
    console.print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

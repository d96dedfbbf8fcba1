"""``make bench``: what a single-call session costs, on the emulators with a zero-latency model.

Figures (printed, and written to bench/results.json):

* step overhead: wall time of one ``iterate`` step in process (load state, claim,
  one LLM call to a zero-latency fake, commit); ``start_session`` likewise;
* Firestore round trips per step, read from the store's counter;
* end-to-end ingest → completed, from the session's own timestamps, through the
  real functions-framework processes and Pub/Sub push (the first session, which
  warms the processes, apart);
* ingest 202 latency p50/p99 and accepted alerts/s over a bounded burst;
* cold import time of each function's module in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import json
import os
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
from rich.console import Console
from rich.table import Table

from tarsy.config import load_config
from tarsy.localstack.stack import Stack, StackOptions, start_stack, stop_stack
from tarsy.models import Session, StepMessage
from tarsy.settings import Settings
from tarsy.steps import Deps, handle
from tarsy.store import get_store
from tarsy.testing.bus import RecordingBus
from tarsy.testing.fake_gemini import FakeGemini, FakeReply

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
STEP_SAMPLES = 40
E2E_SESSIONS = 20
BURST_ALERTS = 200
BURST_CONCURRENCY = 8
IMPORT_RUNS = 3
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
    with httpx.Client(headers=headers, timeout=30) as client:
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


def bench_cold_imports() -> dict[str, float]:
    code = (
        "import importlib.util, sys, time\n"
        "t = time.perf_counter()\n"
        "spec = importlib.util.spec_from_file_location('main', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(time.perf_counter() - t)\n"
    )
    results: dict[str, float] = {}
    for name in ("ingest", "step", "api"):
        runs = []
        for _ in range(IMPORT_RUNS):
            out = subprocess.run(
                [sys.executable, "-c", code, str(ROOT / "functions" / name / "main.py")],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            runs.append(float(out.stdout.strip().splitlines()[-1]) * 1000)
        results[f"{name}_ms"] = round(statistics.median(runs), 1)
    return results


def _table(results: dict[str, Any]) -> Table:
    table = Table(title="tarsy single-call session, zero-latency fake model, emulators")
    table.add_column("figure")
    table.add_column("value", justify="right")
    steps = results["steps"]
    table.add_row(
        "step overhead: final iterate (commit + fan-in + summary start) p50 / p95 (ms)",
        f"{steps['iterate_ms']['p50']} / {steps['iterate_ms']['p95']}",
    )
    table.add_row(
        "step overhead: start_session p50 / p95 (ms)",
        f"{steps['start_session_ms']['p50']} / {steps['start_session_ms']['p95']}",
    )
    table.add_row("Firestore round trips: final iterate", str(steps["round_trips_iterate"]))
    table.add_row("Firestore round trips: start_session", str(steps["round_trips_start_session"]))
    e2e = results["end_to_end"]["ingest_to_completed_ms"]
    table.add_row(
        f"ingest → completed, warm p50 / p95 (ms, {e2e['n']} sessions)",
        f"{e2e['p50']} / {e2e['p95']}",
    )
    table.add_row(
        "ingest → completed, first session (ms)", str(results["end_to_end"]["first_session_ms"])
    )
    burst = results["ingest"]
    table.add_row(
        "ingest 202 p50 / p99 (ms)",
        f"{burst['ingest_202_ms']['p50']} / {burst['ingest_202_ms']['p99']}",
    )
    table.add_row(
        f"ingest throughput ({burst['burst']['alerts']} alerts, {BURST_CONCURRENCY} clients)",
        f"{burst['alerts_per_second']} alerts/s",
    )
    for name, value in results["cold_import_ms"].items():
        table.add_row(f"cold import {name.removesuffix('_ms')} (ms)", str(value))
    return table


def main() -> int:
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version}}
    with tempfile.TemporaryDirectory() as state, FakeGemini() as fake:
        fake.responder = lambda call: FakeReply(text="bench analysis")
        with console.status("starting the local stack"):
            stack = start_stack(
                StackOptions(root=ROOT, state_dir=Path(state), gemini_base_url=fake.url),
                Settings(),
            )
        saved = dict(os.environ)
        os.environ.update(stack.client_env())
        try:
            with console.status("step overhead (in process)"):
                results["steps"] = asyncio.run(bench_steps(stack, fake))
            with console.status("end to end through Pub/Sub push"):
                results["end_to_end"] = bench_end_to_end(stack)
            with console.status("ingest burst"):
                results["ingest"] = bench_ingest_burst(stack)
        finally:
            stop_stack(stack)
            os.environ.clear()
            os.environ.update(saved)
    with console.status("cold imports"):
        results["cold_import_ms"] = bench_cold_imports()
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    Console().print(_table(results))
    console.print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scenarios that run through the whole local stack: real functions, Pub/Sub push, Firestore.

* **duplicates**: N sessions once through a clean stack, then the same N
  alerts with two more push subscriptions on the steps topic pointing at the
  step function, so that Pub/Sub itself delivers every step message three
  times, the copies racing each other; the timelines must equal the clean
  run's, and the model must be called exactly once per recorded iteration;
* **storm**: concurrent sessions while 30% of model calls fail (429 with
  Retry-After, 500, an empty answer, or an answer slower than the attempt
  timeout);
* **burst**: alerts from 16 clients at once, then every session to its end;
* **fuzz**: hostile bodies posted to the ingest function; no 5xx, and nothing
  written or published for any rejection.

While the suite waits for sessions, it calls ``POST /sweep`` every
:data:`SWEEP_EVERY_S` seconds as Cloud Scheduler would, and reports whether
the sweeper had anything to do (a healthy run gives it nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
from google.api_core.exceptions import DeadlineExceeded, NotFound
from google.cloud import firestore, pubsub_v1  # type: ignore[attr-defined]
from pydantic import BaseModel, Field

from bench.chaos.common import (
    ATTEMPT_TIMEOUT_S,
    Difference,
    Facts,
    Stopwatch,
    alert,
    deterministic,
    difference,
    percentile,
    session_facts,
)
from tarsy.models import AgentExecution, ExecutionStatus, Session, StepMessage, utcnow
from tarsy.persistence.store import EXECUTIONS, SESSIONS, Store
from tarsy_dev.client import KEEPALIVE_EXPIRY_S
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply
from tarsy_dev.localstack.processes import http_ok, is_running, spawn, wait_until
from tarsy_dev.localstack.stack import PUSH_SUBSCRIPTION_SUFFIX, Stack

T = TypeVar("T")

SWEEP_EVERY_S = 15.0
# Terraform's sweep_schedule ("* * * * *"): the recovery bound is measured at it.
DEPLOYED_SWEEP_EVERY_S = 60.0
POLL_S = 0.5
TERMINAL = {"completed", "failed", "timed_out", "cancelled"}


def with_store(project_id: str, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on a store of its own event loop (the async client is bound to it)."""

    async def run() -> T:
        client: Any = firestore.AsyncClient(project=project_id)
        try:
            return await work(Store(client))
        finally:
            client.close()

    return asyncio.run(run())


async def count_of(query: Any) -> int:
    """The number of documents a query or collection matches (an aggregation query)."""
    result = await query.count().get()
    return int(result[0][0].value)


class StackDriver:
    """Submits alerts, waits for sessions and sweeps, against one running stack."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.headers = {"Authorization": f"Bearer {stack.api_key}"}
        self.sweeps: Counter[str] = Counter()
        self._last_sweep = 0.0

    def client(self) -> httpx.Client:
        return httpx.Client(
            headers=self.headers,
            timeout=60,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S),
        )

    def post_all(
        self, bodies: Sequence[tuple[bytes, dict[str, str]]], clients: int
    ) -> list[tuple[int, float, str]]:
        """POST every body to ingest from ``clients`` threads: ``(status, seconds, text)`` each.

        A connection error is status 0.
        """
        local = threading.local()
        url = f"{self.stack.ingest_url}/alerts"

        def post(item: tuple[bytes, dict[str, str]]) -> tuple[int, float, str]:
            if not hasattr(local, "http"):
                local.http = self.client()
            body, headers = item
            started = time.perf_counter()
            try:
                response = local.http.post(url, content=body, headers=headers)
            except httpx.HTTPError as e:
                return 0, time.perf_counter() - started, f"{type(e).__name__}: {e}"
            return response.status_code, time.perf_counter() - started, response.text

        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(post, bodies))

    def submit(self, alerts: Sequence[dict[str, Any]], clients: int = 8) -> list[str]:
        """Submit alerts; return their session ids (raises unless every one is accepted)."""
        bodies = [(json.dumps(a).encode(), {"Content-Type": "application/json"}) for a in alerts]
        answers = self.post_all(bodies, clients)
        refused = [a for a in answers if a[0] != 202]
        if refused:
            raise RuntimeError(f"{len(refused)} alerts refused, e.g. {refused[0]}")
        return [str(json.loads(text)["session_id"]) for _, _, text in answers]

    def sweep(self) -> None:
        """POST /sweep (what Cloud Scheduler does) and count what it did."""
        with self.client() as http:
            response = http.post(f"{self.stack.api_url}/sweep")
        response.raise_for_status()
        for key, value in response.json().items():
            self.sweeps[key] += len(value) if isinstance(value, list) else 0
        self.sweeps["sweeps"] += 1
        self._last_sweep = time.monotonic()

    def statuses(self, session_ids: Sequence[str]) -> dict[str, str]:
        async def read(store: Store) -> dict[str, str]:
            refs = [store._session(s) for s in session_ids]
            found = dict.fromkeys(session_ids, "missing")
            async for snap in store._db.get_all(refs, field_paths=["status"]):
                if snap.exists:
                    found[snap.id] = str((snap.to_dict() or {}).get("status"))
            return found

        return with_store(self.stack.project_id, read)

    def wait_terminal(
        self, session_ids: Sequence[str], timeout: float, sweep_every: float = SWEEP_EVERY_S
    ) -> tuple[float, dict[str, str]]:
        """Poll until every session is terminal (sweeping meanwhile); seconds taken and statuses."""
        watch = Stopwatch()
        self._last_sweep = time.monotonic()
        while True:
            found = self.statuses(session_ids)
            if all(status in TERMINAL for status in found.values()) or watch() > timeout:
                return watch(), found
            if time.monotonic() - self._last_sweep > sweep_every:
                self.sweep()
            time.sleep(POLL_S)

    def facts(self, session_ids: Sequence[str]) -> list[Facts]:
        async def read(store: Store) -> list[Facts]:
            return [await session_facts(store, s) for s in session_ids]

        return with_store(self.stack.project_id, read)

    def count(self, collection: str) -> int:
        return with_store(
            self.stack.project_id, lambda store: count_of(store._db.collection(collection))
        )

    def step_log(self) -> Path:
        [info] = [p for p in self.stack.processes if p.name == "step"]
        return Path(info.log_path)


def log_since(path: Path, offset: int) -> list[str]:
    """The lines a process logged after ``offset`` bytes."""
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace").splitlines()


def deliveries(lines: Sequence[str], session_ids: set[str]) -> int:
    """Step messages the step function received for these sessions (its 'step <kind>' lines)."""
    count = 0
    for line in lines:
        if "tarsy.engine.steps: step " not in line or "session_id=" not in line:
            continue
        session_id = line.split("session_id=", 1)[1].split()[0]
        count += session_id in session_ids
    return count


def step_errors(lines: Sequence[str]) -> list[str]:
    """ERROR lines and tracebacks in a function's log (the first line of each)."""
    return [line for line in lines if " ERROR " in line or line.startswith("Traceback")]


# ─── duplicates ───────────────────────────────────────────────────────────────


class DuplicateResults(BaseModel):
    sessions: int
    completed: int
    identical: int
    duplicated_events: int
    lost_events: int
    differences: list[str]
    model_calls: int
    llm_records: int
    iterations: int
    clean_model_calls: int
    messages: int  # step messages the engine published (start + each iterate), per copy
    deliveries: int  # what the step function received for the duplicated sessions
    refused_while_leased: int  # concurrent copies answered 503 (redelivered later)
    due_left: list[str]
    step_errors: list[str]
    seconds: float
    sweeper: dict[str, int]


@contextlib.contextmanager
def extra_push_subscriptions(stack: Stack, copies: int) -> Iterator[None]:
    """``copies`` more push subscriptions on the steps topic, all to the step function."""
    subscriber = pubsub_v1.SubscriberClient()
    topic = f"projects/{stack.project_id}/topics/{stack.steps_topic}"
    paths = [
        subscriber.subscription_path(stack.project_id, f"chaos-copy-{n}-{uuid.uuid4().hex[:6]}")
        for n in range(copies)
    ]
    try:
        for path in paths:
            subscriber.create_subscription(
                request={
                    "name": path,
                    "topic": topic,
                    "push_config": {"push_endpoint": stack.step_url},
                    "ack_deadline_seconds": 60,
                    "retry_policy": {
                        "minimum_backoff": {"seconds": 1},
                        "maximum_backoff": {"seconds": 10},
                    },
                }
            )
        yield
    finally:
        for path in paths:
            with contextlib.suppress(NotFound):
                subscriber.delete_subscription(subscription=path)
        subscriber.close()


def duplicates(driver: StackDriver, fake: FakeGemini, sessions: int) -> DuplicateResults:
    """N sessions clean, then the same N with every step message delivered three times."""
    fake.responder = deterministic
    alerts = [alert("default", n) for n in range(sessions)]
    fake.reset()
    clean_ids = driver.submit(alerts)
    _, found = driver.wait_terminal(clean_ids, timeout=300)
    if any(status != "completed" for status in found.values()):
        raise RuntimeError(f"the clean run did not complete: {Counter(found.values())}")
    clean = driver.facts(clean_ids)
    clean_calls = len(fake.calls)

    log = driver.step_log()
    offset = log.stat().st_size
    fake.reset()
    sweeps_before = Counter(driver.sweeps)
    with extra_push_subscriptions(driver.stack, copies=2):
        ids = driver.submit(alerts)
        seconds, found = driver.wait_terminal(ids, timeout=600)
        # Every copy of every message must have arrived before the verdict: the last
        # copies may come after the session ended (and must change nothing).
        messages = sum(1 + f.llm_records for f in clean)  # start_session + one per iterate
        deadline = time.monotonic() + 60
        while deliveries(log_since(log, offset), set(ids)) < 3 * messages:
            if time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        time.sleep(2.0)  # redeliveries of refused copies in flight
    lines = log_since(log, offset)
    facts = driver.facts(ids)
    diff, identical = Difference(), 0
    for run, reference in zip(facts, clean, strict=True):
        one = difference(run, reference)
        diff.add(one)
        identical += one.duplicated == one.lost == 0
    return DuplicateResults(
        sessions=sessions,
        completed=sum(f.status == "completed" for f in facts),
        identical=identical,
        duplicated_events=diff.duplicated,
        lost_events=diff.lost,
        differences=diff.samples,
        model_calls=len(fake.calls),
        llm_records=sum(f.llm_records for f in facts),
        iterations=sum(f.iterations for f in facts),
        clean_model_calls=clean_calls,
        messages=messages,
        deliveries=deliveries(lines, set(ids)),
        refused_while_leased=sum("redelivering later" in line for line in lines),
        due_left=[d for f in facts for d in f.due_left],
        step_errors=step_errors(lines)[:20],
        seconds=round(seconds, 1),
        sweeper=dict(driver.sweeps - sweeps_before),
    )


# ─── model fault storm ────────────────────────────────────────────────────────


class Storm:
    """The deterministic model, except that ``rate`` of the calls fail, in four ways."""

    KINDS = ("429 + Retry-After", "500", "empty answer", "slower than the attempt timeout")

    def __init__(self, rate: float, seed: int = 13) -> None:
        self.rate = rate
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, call: FakeCall) -> FakeReply:
        with self.lock:
            fault = self.random.random() < self.rate
            kind = self.random.choice(self.KINDS) if fault else "ok"
            self.counts[kind] += 1
        if kind == "429 + Retry-After":
            return FakeReply(status=429, retry_after=1.0, error_message="quota exceeded")
        if kind == "500":
            return FakeReply(status=500, error_message="internal error")
        if kind == "empty answer":
            return FakeReply(empty=True)
        reply = deterministic(call)
        if kind == "ok":
            return reply
        return reply.model_copy(update={"delay": ATTEMPT_TIMEOUT_S + 3})


class StormResults(BaseModel):
    sessions: int
    rate: float
    completed: int
    failed: int
    other: dict[str, int]
    calls: dict[str, int]
    seconds: float
    failures: list[str]
    due_left: list[str]
    sweeper: dict[str, int]


def storm(driver: StackDriver, fake: FakeGemini, sessions: int, rate: float) -> StormResults:
    """Concurrent sessions while ``rate`` of the model calls fail."""
    faults = Storm(rate)
    fake.reset()
    fake.responder = faults
    sweeps_before = Counter(driver.sweeps)
    watch = Stopwatch()
    ids = driver.submit([alert("default", n) for n in range(sessions)], clients=sessions)
    _, found = driver.wait_terminal(ids, timeout=600)
    seconds = watch()
    fake.responder = deterministic
    facts = driver.facts(ids)

    async def reasons(store: Store) -> list[str]:
        failed: list[str] = []
        for session_id, status in found.items():
            if status != "completed":
                session = await store.get_session(session_id)
                error = session.error.message if session and session.error else "?"
                failed.append(f"{status}: {error}")
        return failed

    statuses = Counter(found.values())
    return StormResults(
        sessions=sessions,
        rate=rate,
        completed=statuses.pop("completed", 0),
        failed=statuses.pop("failed", 0),
        other=dict(statuses),
        calls=dict(faults.counts),
        seconds=round(seconds, 1),
        failures=with_store(driver.stack.project_id, reasons)[:10],
        due_left=[d for f in facts for d in f.due_left],
        sweeper=dict(driver.sweeps - sweeps_before),
    )


# ─── burst ────────────────────────────────────────────────────────────────────


class BurstResults(BaseModel):
    alerts: int
    clients: int
    statuses: dict[str, int]
    written: int
    accepted_per_second: float
    ingest_p50_ms: float
    ingest_p99_ms: float
    terminal: int
    completed: int
    seconds_to_all_terminal: float
    due_left: list[str]
    sweeper: dict[str, int]


def burst(driver: StackDriver, fake: FakeGemini, alerts: int, clients: int) -> BurstResults:
    """``alerts`` alerts from ``clients`` clients at once; every accepted one to its end."""
    fake.responder = deterministic
    kind = f"chaos-burst-{uuid.uuid4().hex[:6]}"
    bodies = [
        (json.dumps(alert("default", n, kind)).encode(), {"Content-Type": "application/json"})
        for n in range(alerts)
    ]
    sweeps_before = Counter(driver.sweeps)
    watch = Stopwatch()
    answers = driver.post_all(bodies, clients)
    posted = watch()
    ids = [str(json.loads(text)["session_id"]) for status, _, text in answers if status == 202]

    async def written(store: Store) -> int:
        sessions = store._db.collection("sessions")
        return await count_of(
            sessions.where(filter=firestore.FieldFilter("alert_type", "==", kind))
        )

    _, found = driver.wait_terminal(ids, timeout=900)
    facts = driver.facts(ids)
    latencies = [took * 1000 for status, took, _ in answers if status == 202]
    return BurstResults(
        alerts=alerts,
        clients=clients,
        statuses={str(k): v for k, v in Counter(status for status, _, _ in answers).items()},
        written=with_store(driver.stack.project_id, written),
        accepted_per_second=round(len(ids) / posted, 1),
        ingest_p50_ms=round(percentile(latencies, 50), 1),
        ingest_p99_ms=round(percentile(latencies, 99), 1),
        terminal=sum(status in TERMINAL for status in found.values()),
        completed=sum(status == "completed" for status in found.values()),
        seconds_to_all_terminal=round(watch(), 1),
        due_left=[d for f in facts for d in f.due_left],
        sweeper=dict(driver.sweeps - sweeps_before),
    )


# ─── fuzz ─────────────────────────────────────────────────────────────────────


class FuzzResults(BaseModel):
    bodies: int
    statuses: dict[str, int]
    server_errors: list[str] = Field(default_factory=list)
    connection_errors: int
    accepted: int
    sessions_written: int
    start_messages_published: int
    other_writes: dict[str, int]
    seconds: float


def _pull_all(subscriber: Any, path: str, quiet_s: float = 3.0) -> list[StepMessage]:
    """Pull and acknowledge until nothing arrives for ``quiet_s`` seconds."""
    messages: list[StepMessage] = []
    last = time.monotonic()
    while time.monotonic() - last < quiet_s:
        try:
            response = subscriber.pull(
                request={"subscription": path, "max_messages": 1000}, timeout=1.0, retry=None
            )
        except DeadlineExceeded:
            continue
        if not response.received_messages:
            continue
        last = time.monotonic()
        subscriber.acknowledge(
            request={
                "subscription": path,
                "ack_ids": [m.ack_id for m in response.received_messages],
            }
        )
        messages.extend(
            StepMessage.model_validate_json(m.message.data) for m in response.received_messages
        )
    return messages


def fuzz(
    driver: StackDriver, bodies: Sequence[tuple[bytes, dict[str, str]]], clients: int
) -> FuzzResults:
    """Post every body to ingest; count statuses, sessions written and messages published.

    The step function's push subscription is removed first, so that the accepted
    bodies' sessions are only written, not investigated (thousands of them would
    keep the stack busy for many minutes); a pull subscription sees every publish.
    This is the last scenario: the stack is stopped after it.
    """
    stack = driver.stack
    subscriber = pubsub_v1.SubscriberClient()
    topic = f"projects/{stack.project_id}/topics/{stack.steps_topic}"
    push = subscriber.subscription_path(
        stack.project_id, stack.steps_topic + PUSH_SUBSCRIPTION_SUFFIX
    )
    tap = subscriber.subscription_path(stack.project_id, f"chaos-tap-{uuid.uuid4().hex[:6]}")
    try:
        subscriber.delete_subscription(subscription=push)
        subscriber.create_subscription(name=tap, topic=topic)
        collections = ("sessions", "alert_fingerprints", "executions")
        before = {name: driver.count(name) for name in collections}
        watch = Stopwatch()
        answers = driver.post_all(bodies, clients)
        seconds = watch()
        after = {name: driver.count(name) for name in collections}
        published = _pull_all(subscriber, tap)
    finally:
        with contextlib.suppress(NotFound):
            subscriber.delete_subscription(subscription=tap)
        subscriber.close()
    statuses = Counter(status for status, _, _ in answers)
    server_errors = [f"{status}: {text[:200]}" for status, _, text in answers if status >= 500]
    return FuzzResults(
        bodies=len(bodies),
        statuses={str(k): v for k, v in sorted(statuses.items())},
        server_errors=server_errors[:20],
        connection_errors=statuses.get(0, 0),
        accepted=statuses.get(202, 0),
        sessions_written=after["sessions"] - before["sessions"],
        start_messages_published=sum(m.kind == "start_session" for m in published),
        other_writes={
            name: after[name] - before[name] for name in collections if name != "sessions"
        },
        seconds=round(seconds, 1),
    )


# ─── a real process killed ────────────────────────────────────────────────────


# Firestore takes at most 500 writes in one batch.
_BATCH_WRITES = 500


def seed_finished_sessions(project_id: str, count: int) -> float:
    """Write ``count`` finished sessions, each with its completed execution; seconds taken.

    As the product leaves them: completed an hour ago, due for retention (the
    retention job has them all to stamp), nothing of them due for the sweeper.
    Batched writes (500 a batch), so thousands take seconds.
    """
    watch = Stopwatch()
    ended = utcnow() - timedelta(hours=1)
    tag = uuid.uuid4().hex[:6]

    async def write(store: Store) -> None:
        db = store.client
        documents: list[tuple[Any, BaseModel]] = []
        for n in range(count):
            session = Session(
                session_id=f"finished-{tag}-{n:05d}", alert_type="chaos-finished",
                alert_data="{}", chain_id="default", status=ExecutionStatus.COMPLETED,
                created_at=ended, started_at=ended, completed_at=ended, retention_due=ended,
                final_analysis="done",
            )  # fmt: skip
            execution = AgentExecution(
                execution_id=f"{session.session_id}-0", session_id=session.session_id,
                stage=0, agent="KubernetesAgent", strategy="single-call", provider="default",
                status=ExecutionStatus.COMPLETED, step=2, iteration=1, due_at=None,
            )  # fmt: skip
            documents.append((db.collection(SESSIONS).document(session.session_id), session))
            documents.append((db.collection(EXECUTIONS).document(execution.execution_id),
                              execution))  # fmt: skip
        batches = []
        for start in range(0, len(documents), _BATCH_WRITES):
            batch = db.batch()
            for ref, model in documents[start : start + _BATCH_WRITES]:
                batch.set(ref, model.model_dump(mode="python"))
            batches.append(batch)
        for batch in batches:
            await batch.commit()

    with_store(project_id, write)
    return watch()


class KillResults(BaseModel):
    status: str
    error: str | None
    seconds_to_terminal: float
    model_calls: int  # calls for this session: the killed one is made again
    llm_records: int
    iterations: int
    deliveries: int  # deliveries of the session's messages to the step function
    refused_while_leased: int
    dead_lettered: bool
    due_left: list[str]
    sweeper: dict[str, int]
    sweep_every: float  # seconds between sweeps while it recovered
    finished_sessions: int = 0  # finished sessions in Firestore while it recovered


class _SlowFirstCall:
    """The deterministic model, except that the first call naming ``mark`` takes ``delay`` s."""

    def __init__(self, mark: str, delay: float) -> None:
        self.mark = mark
        self.delay = delay
        self.called = threading.Event()
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, call: FakeCall) -> FakeReply:
        reply = deterministic(call)
        if self.mark not in json.dumps(call.body):
            return reply
        with self.lock:
            self.calls += 1
            first = not self.called.is_set()
            self.called.set()
        return reply.model_copy(update={"delay": self.delay}) if first else reply


def _restart(stack: Stack, name: str) -> None:
    """SIGKILL a function's process group, then start it again as it was (same port)."""
    [info] = [p for p in stack.processes if p.name == name]
    proc = Path(f"/proc/{info.pid}")
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    env = dict(
        entry.decode().split("=", 1)
        for entry in (proc / "environ").read_bytes().split(b"\0")
        if b"=" in entry
    )
    cwd = Path(os.readlink(proc / "cwd"))
    os.killpg(info.pid, signal.SIGKILL)
    wait_until(lambda: not is_running(info.pid), timeout=10, what=f"{name} to die")
    fresh = spawn(name, argv, log_dir=Path(info.log_path).parent, env=env, cwd=cwd, url=info.url)
    stack.processes[stack.processes.index(info)] = fresh
    wait_until(http_ok(fresh.url + "/healthz"), timeout=60, what=f"{name} again", process=fresh)


def kill_step_function(
    driver: StackDriver,
    fake: FakeGemini,
    sweep_every: float = SWEEP_EVERY_S,
    finished_sessions: int = 0,
) -> KillResults:
    """The step function SIGKILLed in the middle of a model call, then restarted.

    Nothing in this process helps: recovery is up to Pub/Sub's redelivery, the
    lease running out (``TARSY_STEP_LEASE_SECONDS``, 45 s by default) and ``POST /sweep``
    every ``sweep_every`` seconds (60 s: Terraform's schedule).
    """
    kind = f"chaos-kill-{uuid.uuid4().hex[:6]}"
    model = _SlowFirstCall(kind, delay=30.0)
    fake.responder = model
    log = driver.step_log()
    offset = log.stat().st_size
    sweeps_before = Counter(driver.sweeps)
    [session_id] = driver.submit([alert("default", 0, kind)])
    if not model.called.wait(timeout=60):
        raise RuntimeError("the model call to kill never came")
    # The claim is written before the model is called: the kill lands inside the call.
    watch = Stopwatch()
    _restart(driver.stack, "step")
    _, found = driver.wait_terminal([session_id], timeout=400, sweep_every=sweep_every)
    seconds = watch()
    lines = log_since(log, offset)  # the restarted process appends to the same log
    fake.responder = deterministic
    [facts] = driver.facts([session_id])

    async def error(store: Store) -> tuple[str, str] | None:
        session = await store.get_session(session_id)
        return (session.error.code, session.error.message) if session and session.error else None

    failure = with_store(driver.stack.project_id, error)
    return KillResults(
        status=found[session_id],
        error=failure[1] if failure else None,
        seconds_to_terminal=round(seconds, 1),
        model_calls=model.calls,
        llm_records=facts.llm_records,
        iterations=facts.iterations,
        deliveries=deliveries(lines, {session_id}),
        refused_while_leased=sum(
            "redelivering later" in line and session_id in line for line in lines
        ),
        dead_lettered=failure is not None and failure[0] == "dead_letter",
        due_left=facts.due_left,
        sweeper=dict(driver.sweeps - sweeps_before),
        sweep_every=sweep_every,
        finished_sessions=finished_sessions,
    )

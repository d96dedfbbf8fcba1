"""Chains on the emulators: stages, parallel agents, fan-in, synthesis, policies, cancel,
deadlines, the sweeper and the dead-letter handler."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
from google.api_core.exceptions import DeadlineExceeded
from google.cloud import firestore, pubsub_v1  # type: ignore[attr-defined]

from tarsy.app import Deps
from tarsy.engine.steps import handle, handle_dead_letter
from tarsy.models import ExecutionStatus, Session, StepMessage, utcnow
from tarsy.persistence.store import Store
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.localstack.stack import Stack

from . import in_process
from .conftest import Tap, signed_in

AGENT = re.compile(r"You are ([\w\-]+),")


def agent_of(call: FakeCall) -> str:
    match = AGENT.search(call.system_text())
    return match[1] if match else "?"


def by_agent(
    overrides: dict[str, FakeReply] | None = None, *, delay: float = 0.0
) -> Callable[[FakeCall], FakeReply]:
    """A responder answering as the agent the system prompt names."""

    def respond(call: FakeCall) -> FakeReply:
        agent = agent_of(call)
        if overrides and agent in overrides:
            return overrides[agent]
        if "kubernetes__pods_list_in_namespace" in call.function_names() and not call.model_parts():
            # A tool-using agent looks at the demo cluster once before concluding.
            pods = FakeToolCall(
                name="kubernetes__pods_list_in_namespace", args={"namespace": "checkout"}
            )
            return FakeReply(tool_calls=[pods], delay=delay)
        return FakeReply(text=f"analysis by {agent}", delay=delay)

    return respond


def finish(client: TarsyClient, session_id: str, timeout: float = 90) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=timeout)
    return view


def agents_called(fake: FakeGemini) -> list[str]:
    return sorted(agent_of(call) for call in fake.calls)


class Duplicator:
    """Re-publishes every step message twice more, at once: duplicate, concurrent delivery."""

    def __init__(self, stack: Stack) -> None:
        self._tap = Tap(stack)
        self._publisher = pubsub_v1.PublisherClient()
        self._topic = f"projects/{stack.project_id}/topics/{stack.steps_topic}"
        self._stop = threading.Event()
        self.copies = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        subscriber = self._tap._subscriber
        while not self._stop.is_set():
            try:
                response = subscriber.pull(
                    request={"subscription": self._tap.path, "max_messages": 50},
                    timeout=0.5,
                    retry=None,
                )
            except DeadlineExceeded:
                continue
            if not response.received_messages:
                continue
            subscriber.acknowledge(
                request={
                    "subscription": self._tap.path,
                    "ack_ids": [m.ack_id for m in response.received_messages],
                }
            )
            futures = []
            for received in response.received_messages:
                if received.message.attributes.get("copy"):
                    continue
                for n in (1, 2):
                    futures.append(
                        self._publisher.publish(self._topic, received.message.data, copy=str(n))
                    )
            for future in futures:
                future.result()
                self.copies += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._tap.close()


@pytest.fixture
def duplicator(stack: Stack) -> Iterator[Duplicator]:
    dup = Duplicator(stack)
    yield dup
    dup.close()


def test_parallel_stage_with_synthesis_under_duplicated_concurrent_delivery(
    client: TarsyClient,
    fake_gemini: FakeGemini,
    store: Store,
    duplicator: Duplicator,
) -> None:
    fake_gemini.responder = by_agent(delay=0.3)
    session_id = client.submit({"alert_type": "test-parallel", "data": "disk full"}).session_id
    view = finish(client, session_id)
    time.sleep(2)  # let the duplicates (and their redeliveries) drain
    view = client.session(session_id)

    assert duplicator.copies > 0
    assert view.status is ExecutionStatus.COMPLETED
    # One call per agent (two for the one that used the demo cluster), one synthesis,
    # one executive summary.
    assert agents_called(fake_gemini) == sorted(
        ["triage", "logs-agent", "metrics-agent", "config-agent", "config-agent",
         "synthesizer", "executive-summarizer"]
    )  # fmt: skip
    roles = [(e["stage"], e["role"], e["agent"]) for e in view.executions]
    assert roles == [
        (0, "agent", "triage"),
        (1, "agent", "logs-agent"),
        (1, "agent", "metrics-agent"),
        (1, "agent", "config-agent"),
        (1, "synthesis", "synthesizer"),
        (-1, "summary", "executive-summarizer"),
    ]
    assert all(e["status"] == "completed" for e in view.executions)
    assert [(s["name"], s["status"], s["parallel_type"]) for s in view.stages] == [
        ("triage", "completed", "single"),
        ("deep-dive", "completed", "multi_agent"),
    ]
    assert len(view.stages[1]["finished_executions"]) == 3
    for execution in view.executions:
        types = [e["type"] for e in execution["timeline"]]
        expected = {
            "summary": ["executive_summary"],
            "config-agent": ["llm_tool_call", "mcp_tool_call", "final_analysis"],
        }.get(execution["role"] if execution["role"] == "summary" else execution["agent"],
              ["final_analysis"])  # fmt: skip
        assert types == expected, execution["execution_id"]
    config_agent = next(e for e in view.executions if e["agent"] == "config-agent")
    assert "payments-api" in config_agent["timeline"][1]["content"]  # the demo cluster answered
    assert view.session["final_analysis"] == "analysis by synthesizer"
    assert view.session["executive_summary"] == "analysis by executive-summarizer"

    # Stage 2 saw stage 1 through the ContextFormatter; synthesis saw all three agents.
    calls = {agent_of(c): c for c in fake_gemini.calls}
    deep_dive_prompt = calls["logs-agent"].last_user_text()
    assert "### Results from 'triage' stage:" in deep_dive_prompt
    assert "<!-- Analysis Result START -->" in deep_dive_prompt
    assert "analysis by triage" in deep_dive_prompt
    synthesis_prompt = calls["synthesizer"].last_user_text()
    for agent in ("logs-agent", "metrics-agent", "config-agent"):
        assert f"analysis by {agent}" in synthesis_prompt
    assert "#### Agent 1: logs-agent" in synthesis_prompt


def test_success_policy_any_goes_on_with_one_failed_agent(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = by_agent({"flaky": FakeReply(status=400, error_message="flaky broke")})
    session_id = client.submit({"alert_type": "test-any", "data": "latency"}).session_id
    view = finish(client, session_id)

    assert view.status is ExecutionStatus.COMPLETED
    statuses = {e["agent"]: e["status"] for e in view.executions}
    assert statuses == {"flaky": "failed", "steady": "completed", "synthesizer": "completed"}
    assert view.stages[0]["status"] == "completed"
    assert view.session["executive_summary"] is None  # this chain has none
    synthesis_prompt = next(c for c in fake_gemini.calls if agent_of(c) == "synthesizer")
    assert "**Status**: failed" in synthesis_prompt.last_user_text()


def test_failed_agent_fails_an_all_policy_session(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = by_agent(
        {"metrics-agent": FakeReply(status=403, error_message="denied")}
    )
    session_id = client.submit({"alert_type": "test-parallel", "data": "x"}).session_id
    view = finish(client, session_id)

    assert view.status is ExecutionStatus.FAILED
    assert "metrics-agent: denied" in view.session["error"]["message"]
    assert view.stages[1]["status"] == "failed"
    assert "synthesizer" not in agents_called(fake_gemini)
    assert "executive-summarizer" not in agents_called(fake_gemini)


def test_cancel_mid_run_stops_calls_and_publishes(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, tap: Tap
) -> None:
    fake_gemini.responder = by_agent(delay=2.0)
    session_id = client.submit({"alert_type": "test-parallel", "data": "x"}).session_id
    deadline = time.monotonic() + 30
    while not fake_gemini.calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agents_called(fake_gemini) == ["triage"]

    response = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/cancel",
        headers=signed_in(stack),
        json={},
        timeout=10,
    )
    assert response.status_code == 202
    tap.drain(wait=0.1)  # forget what was published before the cancel
    view = finish(client, session_id)
    time.sleep(2.5)  # the triage call returns meanwhile; nothing may follow it

    assert view.status is ExecutionStatus.CANCELLED
    assert agents_called(fake_gemini) == ["triage"]
    assert [m for m in tap.drain(wait=0.5) if m.session_id == session_id] == []
    view = client.session(session_id)
    assert not [e for e in view.executions if e["status"] in ("active", "pending")]


def test_sweeper_times_out_a_session_past_its_deadline(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = by_agent(delay=4.0)
    session_id = client.submit({"alert_type": "test-deadline", "data": "x"}).session_id
    time.sleep(2.5)
    response = httpx.post(
        f"{stack.api_url}/sweep", headers={"X-API-Key": stack.api_key}, timeout=10
    )
    assert response.status_code == 200
    assert session_id in response.json()["timed_out"]
    time.sleep(2.5)  # the slow call returns; its commit must not resurrect the session

    view = client.session(session_id)
    assert view.status is ExecutionStatus.TIMED_OUT
    assert [e["status"] for e in view.executions] == ["timed_out"]
    assert "executive-summarizer" not in agents_called(fake_gemini)


async def new_session(store: Store, alert_type: str = "kubernetes") -> Session:
    return await in_process.new_session(store, alert_type=alert_type)


async def leased_first_step(
    deps: Deps, store: Store, *, owner: str, lease: timedelta
) -> tuple[Session, StepMessage]:
    """A session started in process (the stack never sees its first iterate), whose first
    step another "process" has claimed with a lease ending ``lease`` from now."""
    session = await new_session(store)
    bus = RecordingBus()
    start = StepMessage(session_id=session.session_id, kind="start_session")
    await handle(start, replace(deps, bus=bus))
    [iterate] = bus.published
    loaded = await store.get_step_state(iterate.execution_id, session.session_id)
    assert loaded.update_time is not None
    await store.claim(
        iterate.execution_id,
        owner=owner,
        until=utcnow() + lease,
        read_time=loaded.update_time,
        step=iterate.step,
    )
    return session, iterate


async def test_sweeper_republishes_a_step_whose_process_died(
    stack: Stack, client: TarsyClient, deps: Deps, store: Store
) -> None:
    # A step process took the lease and died: the lease has since expired.
    session, iterate = await leased_first_step(
        deps, store, owner="dead-process", lease=timedelta(seconds=-1)
    )

    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"{stack.api_url}/sweep", headers={"X-API-Key": stack.api_key})
    assert response.status_code == 200
    assert iterate.execution_id in response.json()["republished"]

    view = await asyncio.to_thread(finish, client, session.session_id)
    assert view.status is ExecutionStatus.COMPLETED
    assert not [e for e in view.executions if e["status"] == "active"]


async def test_poison_message_reaches_the_dead_letter_handler(
    stack: Stack, client: TarsyClient, deps: Deps, store: Store
) -> None:
    # A document no step can read (written behind the store's back): every delivery
    # raises, Pub/Sub gives up, and the dead-letter handler fails the session.
    session = await new_session(store)
    bus = RecordingBus()
    await handle(
        StepMessage(session_id=session.session_id, kind="start_session"), replace(deps, bus=bus)
    )
    [iterate] = bus.published
    raw = firestore.Client(project=stack.project_id)
    try:
        raw.collection("executions").document(iterate.execution_id).update({"step": "corrupt"})
    finally:
        raw.close()  # type: ignore[no-untyped-call]
    await deps.bus.publish(iterate)

    # Read the session itself: its executions no longer parse, so neither would a view.
    deadline = time.monotonic() + 120
    while True:
        current = await store.get_session(session.session_id)
        if current is None or current.status.is_terminal or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    assert current is not None and current.status is ExecutionStatus.FAILED
    assert current.error is not None and current.error.code == "dead_letter"


async def test_a_dead_letter_for_a_leased_step_is_left_to_the_sweeper(
    deps: Deps, store: Store
) -> None:
    """Deliveries refused while a step ran (or had just died) are not a poison message."""
    session, iterate = await leased_first_step(
        deps, store, owner="running-process", lease=timedelta(seconds=60)
    )
    await handle_dead_letter(iterate, deps, delivery_attempts="5")
    still = await store.get_session(session.session_id)
    assert still is not None and not still.status.is_terminal
    execution = await store.get_execution(iterate.execution_id)
    assert execution is not None and execution.due_at is not None  # the sweeper's to re-run


async def test_a_late_dead_letter_for_a_committed_step_leaves_the_session_running(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """A slow step outlived its deliveries, then committed: its dead letter changes nothing."""
    fake_gemini.responder = lambda call: FakeReply(text="the analysis")
    session = await new_session(store)
    bus = RecordingBus()
    local = replace(deps, bus=bus)
    start = StepMessage(session_id=session.session_id, kind="start_session")
    await handle(start, local)
    [agent_step] = bus.published
    bus.published.clear()
    await handle(agent_step, local)  # commits the analysis and publishes the summary's step
    [summary_step] = bus.published
    assert summary_step.execution_id != agent_step.execution_id

    # The dead letters of both messages already processed arrive while the summary runs.
    await handle_dead_letter(agent_step, deps, delivery_attempts="5")
    await handle_dead_letter(start, deps, delivery_attempts="5")
    running = await store.get_session(session.session_id)
    assert running is not None and running.status is ExecutionStatus.ACTIVE
    assert running.error is None

    await handle(summary_step, local)
    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.error is None and done.final_analysis == "the analysis"

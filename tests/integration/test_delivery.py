"""At-least-once delivery, exactly-once effect (ARCHITECTURE invariant 1).

Through Pub/Sub: duplicates published while the first delivery holds the
lease, and redeliveries after the session completed. In process (the same
engine the step function runs, against the same emulators): two concurrent
deliveries of one message, and a crash between the commit and the publish.
The in-process tests use a recording bus so the stack's step function does
not see their messages.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from tarsy.app import Deps
from tarsy.engine.messages import execution_id_for, summary_id_for
from tarsy.engine.steps import handle
from tarsy.errors import LeaseHeldError, TransientError
from tarsy.models import ExecutionStatus, Session, StepMessage, utcnow
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack

from . import in_process

# Free text: an alert that names no labels runs the default chain (a model call and the
# summary), which is what these delivery tests count.
ALERT = {"alert_type": "generic", "data": "pod payments-api-0 is in CrashLoop"}
ANALYSIS = "The payments-api config map lost DB_URL."
SUMMARY = "payments-api down: DB_URL missing from its config map; restore it."


def script_session(fake: FakeGemini, *, delay: float = 0.0) -> None:
    """One investigation call, then the executive summary call."""
    fake.script(FakeReply(text=ANALYSIS, delay=delay), FakeReply(text=SUMMARY))


def step_log(stack: Stack) -> str:
    [info] = [p for p in stack.processes if p.name == "step"]
    return Path(info.log_path).read_text(errors="replace")


def deliveries(stack: Stack, session_id: str, kind: str) -> int:
    return sum(
        1
        for line in step_log(stack).splitlines()
        if f"step {kind} " in line and f"session_id={session_id}" in line
    )


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


async def assert_exactly_once(store: Store, session_id: str) -> None:
    session = await store.get_session(session_id)
    assert session is not None
    assert session.status is ExecutionStatus.COMPLETED
    assert session.final_analysis == ANALYSIS
    assert session.executive_summary == SUMMARY
    assert session.tokens.total_tokens == 60  # two calls, each counted once
    agent, summary = await store.list_executions(session_id)
    assert (agent.role, summary.role) == ("agent", "summary")
    for execution in (agent, summary):
        assert execution.status is ExecutionStatus.COMPLETED
        assert execution.iteration == 1
        assert len(await store.list_llm_interactions(execution.execution_id)) == 1
    assert [e.type.value for e in await store.list_timeline(agent.execution_id)] == [
        "final_analysis"
    ]
    assert [e.type.value for e in await store.list_timeline(summary.execution_id)] == [
        "executive_summary"
    ]
    [stage] = await store.list_stages(session_id)
    assert stage.status is ExecutionStatus.COMPLETED
    assert stage.finished_executions == {agent.execution_id: "completed"}


async def test_concurrent_duplicates_through_pubsub(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, deps: Deps, store: Store
) -> None:
    # The model takes 1.5 s, so duplicates arrive while the first delivery holds the lease.
    script_session(fake_gemini, delay=1.5)
    session_id = client.submit(ALERT).session_id
    await asyncio.to_thread(wait_for, lambda: len(fake_gemini.calls) == 1, what="the LLM call")
    execution_id = execution_id_for(session_id, 0, 0)
    iterate = StepMessage(session_id=session_id, execution_id=execution_id, step=1, kind="iterate")
    start = StepMessage(session_id=session_id, kind="start_session")
    await asyncio.gather(deps.bus.publish(iterate), deps.bus.publish(iterate))
    await deps.bus.publish(start)

    *_, view = await asyncio.to_thread(
        lambda: list(client.watch(session_id, poll_interval=0.2, timeout=30))
    )
    assert view.status is ExecutionStatus.COMPLETED
    # The duplicates were refused while leased (Pub/Sub redelivers them), then acknowledged.
    await asyncio.to_thread(
        wait_for, lambda: deliveries(stack, session_id, "iterate") >= 5, what="redeliveries"
    )
    assert "is leased until" in step_log(stack)
    assert len(fake_gemini.calls) == 2
    await assert_exactly_once(store, session_id)


async def test_redelivery_after_completion_changes_nothing(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, deps: Deps, store: Store
) -> None:
    script_session(fake_gemini)
    session_id = client.submit(ALERT).session_id
    await asyncio.to_thread(lambda: list(client.watch(session_id, poll_interval=0.2, timeout=30)))
    before_iterates = deliveries(stack, session_id, "iterate")
    before_starts = deliveries(stack, session_id, "start_session")

    # Each message of the session, delivered once more.
    execution_id = execution_id_for(session_id, 0, 0)
    await deps.bus.publish(StepMessage(session_id=session_id, kind="start_session"))
    await deps.bus.publish(
        StepMessage(session_id=session_id, execution_id=execution_id, step=1, kind="iterate")
    )
    await asyncio.to_thread(
        wait_for,
        lambda: (
            deliveries(stack, session_id, "iterate") > before_iterates
            and deliveries(stack, session_id, "start_session") > before_starts
        ),
        what="the duplicate deliveries",
    )
    await asyncio.sleep(0.5)  # let the handler finish its (no-op) work
    assert len(fake_gemini.calls) == 2
    await assert_exactly_once(store, session_id)


# ─── in process ───────────────────────────────────────────────────────────────


async def new_session(store: Store) -> Session:
    session = Session(
        session_id=f"test-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data='{"pod": "payments-api-0"}',
        chain_id="default",
    )
    await store.create_session(session)
    return session


async def test_a_step_reads_its_conversation_in_the_round_trip_that_reads_its_state(
    deps: Deps, store: Store
) -> None:
    session = await new_session(store)
    iterate = await in_process.first_message(deps, session)
    trips, rpcs = store.round_trips.count, store.round_trips.rpcs

    state = await store.get_step_state(iterate.execution_id, session.session_id, conversation=True)

    assert (store.round_trips.count - trips, store.round_trips.rpcs - rpcs) == (1, 2)
    assert state.conversation is not None
    assert state.conversation == await store.load_messages(iterate.execution_id)
    assert [m.role for m in state.conversation] == ["system", "user"]


async def test_a_step_makes_one_round_trip_before_its_claim_and_one_after(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """The state and the conversation together, the claim, the commit; then the summary's start."""
    session = await new_session(store)
    iterate = await in_process.first_message(deps, session)
    script_session(fake_gemini)
    kinds = dict(store.round_trips.by_kind)

    await handle(iterate, replace(deps, bus=RecordingBus()))

    spent = {k: n - kinds.get(k, 0) for k, n in store.round_trips.by_kind.items()}
    # No query of the conversation after the claim: it came with the state.
    assert spent["get_all"] == 1
    assert spent["query"] == 1
    assert spent["update"] == 1  # the claim


async def test_two_concurrent_deliveries_one_llm_call(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    bus = RecordingBus()
    local = replace(deps, bus=bus)
    session = await new_session(store)
    await handle(StepMessage(session_id=session.session_id, kind="start_session"), local)
    [iterate] = bus.published
    script_session(fake_gemini, delay=1.0)

    results = await asyncio.gather(
        handle(iterate, local), handle(iterate, local), return_exceptions=True
    )

    assert sorted(type(r).__name__ for r in results) == ["LeaseHeldError", "NoneType"]
    # Pub/Sub redelivers the loser later: it finds the step committed and does nothing.
    await handle(iterate, local)
    [_, summary] = bus.published
    assert summary.execution_id == summary_id_for(session.session_id)
    await asyncio.gather(handle(summary, local), handle(iterate, local))
    assert len(fake_gemini.calls) == 2
    assert bus.published == [iterate, summary]
    await assert_exactly_once(store, session.session_id)


async def test_crash_between_commit_and_publish_heals_on_redelivery(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    session = await new_session(store)
    start = StepMessage(session_id=session.session_id, kind="start_session")

    # The stage and execution are committed, then the process dies before publishing.
    with pytest.raises(ConnectionError):
        await handle(start, replace(deps, bus=RecordingBus(fail=True)))
    execution = await store.get_execution(execution_id_for(session.session_id, 0, 0))
    assert execution is not None and execution.step == 1 and execution.published_step == -1

    # Pub/Sub redelivers the start (the handler raised): the lost iterate goes out once.
    bus = RecordingBus()
    await handle(start, replace(deps, bus=bus))
    assert [(m.kind, m.step) for m in bus.published] == [("iterate", 1)]

    script_session(fake_gemini)
    local = replace(deps, bus=bus)
    [iterate] = bus.published
    # The agent's step commits; the process dies publishing the summary's first step.
    with pytest.raises(ConnectionError):
        await handle(iterate, replace(deps, bus=RecordingBus(fail=True)))
    assert len(fake_gemini.calls) == 1
    # The redelivered iterate finds its step committed and re-drives the fan-in.
    await handle(iterate, local)
    [_, summary] = bus.published
    assert summary.execution_id == summary_id_for(session.session_id)
    await handle(summary, local)
    # Later duplicates of every message publish nothing and call no model.
    for message in (start, iterate, summary):
        await handle(message, local)
    assert bus.published == [iterate, summary]
    assert len(fake_gemini.calls) == 2
    await assert_exactly_once(store, session.session_id)


async def test_lease_held_error_is_transient(deps: Deps, store: Store) -> None:
    """A held lease must raise (so Pub/Sub redelivers), not be swallowed."""
    assert issubclass(LeaseHeldError, TransientError)
    session = await new_session(store)
    bus = RecordingBus()
    start = StepMessage(session_id=session.session_id, kind="start_session")
    await handle(start, replace(deps, bus=bus))
    [iterate] = bus.published
    loaded = await store.get_step_state(iterate.execution_id, session.session_id)
    assert loaded.execution is not None and loaded.update_time is not None
    until = utcnow() + timedelta(seconds=60)
    await store.claim(
        iterate.execution_id,
        owner="other-process",
        until=until,
        read_time=loaded.update_time,
        step=1,
    )
    with pytest.raises(LeaseHeldError):
        await handle(iterate, replace(deps, bus=bus))


async def test_transport_retries_commit_one_interaction(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """429 (Retry-After: 1), then 500, then success: one step, one record, three attempts."""
    session = await new_session(store)
    bus = RecordingBus()
    local = replace(deps, bus=bus)
    await handle(StepMessage(session_id=session.session_id, kind="start_session"), local)
    [iterate] = bus.published
    fake_gemini.script(
        FakeReply(status=429, retry_after=1), FakeReply(status=500), FakeReply(text=ANALYSIS)
    )
    await handle(iterate, local)

    [record] = await store.list_llm_interactions(iterate.execution_id)
    assert record.attempts == 3
    assert record.error is None
    assert record.response_text == ANALYSIS
    assert len(fake_gemini.calls) == 3
    timeline = await store.list_timeline(iterate.execution_id)
    assert [e.type.value for e in timeline] == ["final_analysis"]

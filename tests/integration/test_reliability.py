"""Nothing gets stuck (issue 13): lost publishes, dead steps, hanging models, duplicates.

In process against the emulators and the fake model, with buses that drop or
record messages and a sweeper called with the clock the test chooses, so no
test waits for a real sweep interval.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from google.cloud import firestore
from pydantic import SecretStr

from tarsy.app import Deps
from tarsy.engine.steps import handle
from tarsy.engine.sweeper import sweep
from tarsy.engine.transitions import ExecutionUpdate, SessionUpdate
from tarsy.errors import LeaseHeldError
from tarsy.models import AgentExecution, ExecutionStatus, Session, StepMessage, utcnow
from tarsy.notify import configured
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply

from . import in_process
from .conftest import SCENARIO
from .polling import until


class SessionReadsKept(Store):
    """A store that keeps the ids of the sessions read whole (as a session's end reads it)."""

    def __init__(self, client: firestore.AsyncClient) -> None:
        super().__init__(client)
        self.sessions_read: list[str] = []

    async def get_session(self, session_id: str) -> Session | None:
        self.sessions_read.append(session_id)
        return await super().get_session(session_id)


class DroppingBus(RecordingBus):
    """Publishes nowhere: every message is recorded and then lost."""


async def new_session(store: Store, chain_id: str = "default") -> Session:
    return await in_process.new_session(store, chain_id=chain_id)


async def started(deps: Deps, store: Store) -> tuple[Session, StepMessage, RecordingBus]:
    """A new session whose start ran in process: its first step's message, not yet run."""
    session = await new_session(store)
    return session, await in_process.first_message(deps, session), RecordingBus()


async def gathering(deps: Deps, store: Store) -> tuple[Deps, StepMessage]:
    """An agent that gathers evidence first, started: deps with its tools, the gather step."""
    deps = replace(deps, tools=MCPToolExecutor(deps.config, deps.settings, deps.store))
    alert = load_scenario(SCENARIO).alert.data  # it names a pod: there is evidence to gather
    session = await in_process.new_session(
        store, alert_data=json.dumps(alert), chain_id="kubernetes"
    )
    return deps, await in_process.first_message(deps, session)


async def drive(deps: Deps, message: StepMessage, bus: RecordingBus, limit: int = 20) -> None:
    """Run ``message`` and everything it publishes, in order, until nothing is left."""
    pending = [message]
    for _ in range(limit):
        if not pending:
            return
        await handle(pending.pop(0), replace(deps, bus=bus))
        pending.extend(bus.published)
        bus.published.clear()
    raise AssertionError("the session did not settle")


async def summary_start_lost(
    deps: Deps, store: Store
) -> tuple[Session, StepMessage, AgentExecution]:
    """The first step commits (the execution ends, the summary is created in the same
    batch) but the summary's first message is lost with the process."""
    session, first, _ = await started(deps, store)
    lost = DroppingBus()
    await handle(first, replace(deps, bus=lost))
    [summary_start] = lost.published
    summary = await store.get_execution(summary_start.execution_id)
    assert summary is not None
    return session, summary_start, summary


async def test_a_publish_lost_after_a_commit_is_healed_by_the_sweeper(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(text="analysis")
    session, summary_start, summary = await summary_start_lost(deps, store)
    assert summary.status is ExecutionStatus.PENDING and summary.due_at is not None

    # Before it is due, a sweep leaves it alone; past its due time, it re-publishes it.
    sweeper_bus = RecordingBus()
    early = await sweep(replace(deps, bus=sweeper_bus), now=summary.due_at - timedelta(seconds=1))
    assert summary.execution_id not in early.republished
    late = await sweep(replace(deps, bus=sweeper_bus), now=summary.due_at + timedelta(seconds=1))
    assert summary.execution_id in late.republished
    [again] = [m for m in sweeper_bus.published if m.execution_id == summary.execution_id]
    assert again == summary_start

    await drive(deps, again, RecordingBus())
    finished = await store.get_session(session.session_id)
    assert finished is not None and finished.status is ExecutionStatus.COMPLETED
    assert finished.due_at is None
    assert all(e.due_at is None for e in await store.list_executions(session.session_id))


async def test_an_overdue_step_is_republished_once_per_wait_however_many_sweeps_run(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """Under a backlog longer than the due time, the queued message is not copied at each sweep."""
    fake_gemini.responder = lambda call: FakeReply(text="analysis")
    _, summary_start, summary = await summary_start_lost(deps, store)
    assert summary.due_at is not None
    late = summary.due_at + timedelta(seconds=1)

    sweeper_bus = RecordingBus()
    reports = await asyncio.gather(
        *(sweep(replace(deps, bus=sweeper_bus), now=late) for _ in range(3))
    )
    assert sum(summary.execution_id in r.republished for r in reports) == 1
    again = await sweep(replace(deps, bus=sweeper_bus), now=late + timedelta(seconds=1))
    assert summary.execution_id not in again.republished  # its due time moved on

    # Still not claimed one interval later: again, and the next copy waits two intervals.
    interval = timedelta(seconds=deps.settings.step_due_seconds)
    second = late + interval + timedelta(seconds=1)
    assert (
        summary.execution_id
        in (await sweep(replace(deps, bus=sweeper_bus), now=second)).republished
    )
    early = await sweep(
        replace(deps, bus=sweeper_bus), now=second + interval + timedelta(seconds=1)
    )
    assert summary.execution_id not in early.republished
    third = second + interval * 2 + timedelta(seconds=1)
    assert (
        summary.execution_id in (await sweep(replace(deps, bus=sweeper_bus), now=third)).republished
    )
    copies = [m for m in sweeper_bus.published if m.execution_id == summary.execution_id]
    assert copies == [summary_start] * 3
    counted = await store.get_execution(summary.execution_id)
    assert counted is not None and counted.republished == 3

    # Its claim resets the count: the step runs, and the next one is due one interval on.
    await handle(summary_start, replace(deps, bus=RecordingBus()))
    ran = await store.get_execution(summary.execution_id)
    assert ran is not None and ran.republished == 0


async def test_a_lost_start_session_is_healed_by_the_sweeper(deps: Deps, store: Store) -> None:
    session = await new_session(store)
    # As ingest writes it: the start is awaited; its message never arrives.
    await store.update_session(
        session.session_id, SessionUpdate(awaiting_stage=0, due_at=utcnow() + timedelta(seconds=30))
    )
    bus = RecordingBus()
    report = await sweep(replace(deps, bus=bus), now=utcnow() + timedelta(seconds=31))
    assert session.session_id in report.restarted
    assert StepMessage(session_id=session.session_id, kind="start_session") in bus.published


async def test_a_duplicate_of_a_committed_step_republishes_only_when_overdue(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(text="analysis")
    _, first, bus = await started(deps, store)
    await handle(first, replace(deps, bus=bus))
    assert len(bus.published) == 1  # the summary's first step
    bus.published.clear()
    for _ in range(3):  # duplicates of the committed step: nothing is published again
        await handle(first, replace(deps, bus=bus))
    assert bus.published == []


async def test_duplicates_of_a_committed_step_republish_an_overdue_next_step_only_once(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """Each copy would be a duplicate of the next step in turn: ungated, copies multiply."""
    # An agent that gathers evidence first: its first step commits and the agent goes on.
    deps, first = await gathering(deps, store)
    lost = DroppingBus()
    await handle(first, replace(deps, bus=lost))
    [second] = lost.published
    assert (second.execution_id, second.step) == (first.execution_id, first.step + 1)
    # The next step's message is queued past its due time (or lost).
    overdue = utcnow() - timedelta(seconds=1)
    await store.update_execution(first.execution_id, ExecutionUpdate(due_at=overdue))

    bus = RecordingBus()
    await asyncio.gather(*(handle(first, replace(deps, bus=bus)) for _ in range(4)))
    assert bus.published == [second]
    await handle(first, replace(deps, bus=bus))  # a later duplicate: the due time moved on
    assert bus.published == [second]
    execution = await store.get_execution(first.execution_id)
    assert execution is not None and execution.due_at is not None
    assert execution.due_at > utcnow()


async def test_a_step_that_goes_on_to_the_next_reads_no_session_to_announce_its_end(
    deps: Deps, store: Store
) -> None:
    """With a session-end notifier configured, only a step that may end a session reads it."""
    token = {"slack_bot_token": SecretStr("xoxb-test")}
    announcing = replace(deps, settings=deps.settings.model_copy(update=token))
    assert configured.slack(announcing.settings)
    announcing, gather = await gathering(announcing, store)
    # Its own store on the same client: the suite's shared store counts other tests'
    # background reads too.
    reading = SessionReadsKept(store.client)
    bus = RecordingBus()

    # Gathers, commits, publishes step 2.
    await handle(gather, replace(announcing, store=reading, bus=bus))

    assert [m.step for m in bus.published] == [gather.step + 1]
    assert reading.sessions_read == []


async def test_a_step_killed_mid_model_call_is_rerun_after_its_short_lease(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """The killed step stops renewing; its lease (3 s) runs out; the sweeper re-runs it."""
    short = replace(deps, settings=deps.settings.model_copy(update={"step_lease_seconds": 3}))
    session, first, bus = await started(short, store)
    fake_gemini.script(FakeReply(text="never read", delay=8))
    fake_gemini.responder = lambda call: FakeReply(text="analysis")
    killed = asyncio.create_task(handle(first, replace(short, bus=bus)))
    await until(lambda: bool(fake_gemini.calls), "the model call")
    killed.cancel()  # the process dies inside the model call; its heartbeat dies with it
    with pytest.raises(asyncio.CancelledError):
        await killed
    killed_at = time.monotonic()

    running = await store.get_execution(first.execution_id)
    assert running is not None and running.lease_until is not None and running.due_at is not None
    republished: list[StepMessage] = []
    while not republished and time.monotonic() < killed_at + 120:
        report = await sweep(replace(short, bus=bus))
        republished = [m for m in bus.published if m.execution_id == first.execution_id]
        if not republished:
            await asyncio.sleep(0.5)
    assert republished, "not re-published within 2 minutes"
    assert time.monotonic() - killed_at < 120
    assert first.execution_id in report.republished
    bus.published.clear()
    await drive(short, republished[0], bus)
    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED


async def test_a_slow_step_keeps_its_lease_and_is_never_stolen(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    """A model call three times longer than the lease: the heartbeat keeps the claim."""
    short = replace(deps, settings=deps.settings.model_copy(update={"step_lease_seconds": 3}))
    _, first, bus = await started(short, store)
    fake_gemini.script(FakeReply(text="slow but alive", delay=9))
    slow = asyncio.create_task(handle(first, replace(short, bus=bus)))
    await until(lambda: bool(fake_gemini.calls), "the model call")  # claimed, calling
    refused = 0
    while not slow.done():
        try:
            await handle(first, replace(short, bus=RecordingBus()))
        except LeaseHeldError:
            refused += 1
        await asyncio.sleep(1)
    await slow
    assert refused >= 3  # duplicates kept arriving past the 3 s lease, and were refused
    assert len(fake_gemini.calls) == 1  # no duplicate ever reached the model
    execution = await store.get_execution(first.execution_id)
    assert execution is not None and execution.status is ExecutionStatus.COMPLETED


async def test_a_model_hanging_past_the_step_budget_is_a_recorded_retryable_failure(
    deps: Deps, store: Store, fake_gemini: FakeGemini, stack_settings: Settings
) -> None:
    """The budget (from a 4 s step timeout) ends the attempt; the next step retries it."""
    tight = replace(deps, settings=stack_settings.model_copy(update={"step_timeout_seconds": 4}))
    session, first, bus = await started(tight, store)
    fake_gemini.script(FakeReply(text="too late", delay=15))
    fake_gemini.responder = lambda call: FakeReply(text="analysis on retry")
    began = time.monotonic()
    await handle(first, replace(tight, bus=bus))
    assert time.monotonic() - began < 14  # the step ended before the hanging model did
    [interaction] = await store.list_llm_interactions(first.execution_id)
    assert interaction.error is not None and interaction.error.retryable
    assert interaction.error.code in {"timeout", "step_budget"}
    [retry] = bus.published
    assert retry.step == first.step + 1
    bus.published.clear()
    await drive(tight, retry, bus)
    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.final_analysis is not None and "analysis on retry" in done.final_analysis

"""Evidence first on the local stack: the gather step before the first model call.

The real step function runs the built-in collectors through the real
kubernetes-mcp-server on the demo cluster; the fake model records the
requests it receives. What is asserted is generic (gathered calls come first,
every detection reaches the timeline, the first request and the page), never
which detections one cluster yields: those are the unit tests' business, on
clusters of their own.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from tarsy.app import Deps
from tarsy.config.schema import TarsyConfig
from tarsy.engine.steps import handle
from tarsy.errors import LeaseHeldError
from tarsy.models import (
    DetectionEvent,
    ExecutionStatus,
    MCPToolCallEvent,
    StepMessage,
    TimelineEventType,
)
from tarsy.persistence.store import StepCommit, Store
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack

from . import in_process
from .conftest import SCENARIO, signed_in

ALERT = load_scenario(SCENARIO).alert.model_dump(mode="json")
FINDINGS_HEADING = "Findings of tarsy's automatic checks"


def _answer(call: FakeCall) -> FakeReply:
    return FakeReply(text="The root cause is in the findings.")


def _agent_of(view: SessionView) -> dict[str, Any]:
    return next(e for e in view.executions if e["role"] == "agent")


async def test_a_crash_looping_pod_alert_gathers_first_and_shows_its_detections(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    fake_gemini.responder = _answer
    session_id = client.submit(ALERT).session_id
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=180)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    execution = _agent_of(view)
    timeline = execution["timeline"]
    gathered = [e for e in timeline if e["metadata"].get("gathered")]
    detections = [e for e in timeline if e["type"] == TimelineEventType.DETECTION.value]
    assert gathered, "nothing was gathered"
    assert detections, "no detection on a crash-looping pod"
    # Gathered calls, then detections, then the model's own events.
    first_model_event = next(
        n for n, e in enumerate(timeline) if e["type"] in ("llm_thinking", "final_analysis")
    )
    assert all(timeline.index(e) < first_model_event for e in [*gathered, *detections])
    assert all(e["metadata"]["server_name"] == "kubernetes" for e in gathered)

    records = await store.list_mcp_interactions(execution["execution_id"])
    assert {r.call_id for r in records} == {e["metadata"]["call_id"] for e in gathered}
    assert {r.step for r in records} == {1}  # the gather step is step 1
    [interaction, *_] = await store.list_llm_interactions(execution["execution_id"])
    assert interaction.step == 2  # the first model call comes after it

    [first, *_] = [c for c in fake_gemini.calls if "kubernetes-investigator" in c.system_text()]
    opening = "\n".join(first.texts("user"))
    assert FINDINGS_HEADING in opening
    for detection in detections:
        assert detection["content"] in opening

    async with httpx.AsyncClient(timeout=30) as http:
        data = await http.get(
            f"{stack.api_url}/ui/data/sessions/{session_id}", headers=signed_in(stack)
        )
    data.raise_for_status()
    html = "".join(event["html"] for event in data.json()["events"])
    assert 'data-type="detection"' in html
    assert "gathered [E1]" in html


def _tools(deps: Deps) -> MCPToolExecutor:
    return MCPToolExecutor(deps.config, deps.settings, deps.store)


def _evidence_off(config: TarsyConfig) -> TarsyConfig:
    agents = dict(config.agents)
    agents["kubernetes-investigator"] = agents["kubernetes-investigator"].model_copy(
        update={"evidence": "off"}
    )
    return config.model_copy(update={"agents": agents})


async def _started(deps: Deps, store: Store) -> tuple[str, StepMessage]:
    session = await in_process.new_session(
        store, alert_data=json.dumps(ALERT["data"]), chain_id="kubernetes"
    )
    bus = RecordingBus()
    await handle(
        StepMessage(session_id=session.session_id, kind="start_session"), replace(deps, bus=bus)
    )
    [first] = bus.published
    return session.session_id, first


async def test_evidence_off_runs_the_first_model_call_as_the_first_step(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = _answer
    off = replace(deps, config=_evidence_off(deps.config), tools=_tools(deps))
    session_id, first = await _started(off, store)
    assert first.kind == "iterate" and first.step == 1
    await in_process.drive(off, first)

    executions = await store.list_executions(session_id)
    [agent] = [e for e in executions if e.role == "agent"]
    assert agent.status is ExecutionStatus.COMPLETED
    timeline = await store.list_timeline(agent.execution_id)
    assert not [e for e in timeline if e.type is TimelineEventType.DETECTION]
    assert await store.list_mcp_interactions(agent.execution_id) == []
    [first_call, *_] = [
        c for c in fake_gemini.calls if "kubernetes-investigator" in c.system_text()
    ]
    assert FINDINGS_HEADING not in "\n".join(first_call.texts("user"))


class CrashingStore:
    """The store, but the process dies as it commits the gather step (the work is lost)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit_step(self, commit: StepCommit) -> bool:
        raise asyncio.CancelledError  # killed between the work and the commit


async def test_a_gather_step_killed_before_its_commit_then_delivered_twice_leaves_one_set(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = _answer
    short = replace(
        deps,
        tools=_tools(deps),
        settings=deps.settings.model_copy(update={"step_lease_seconds": 2}),
    )
    session_id, first = await _started(short, store)
    assert first.kind == "gather"
    crashing = replace(short, store=CrashingStore(store), bus=RecordingBus())
    with pytest.raises(asyncio.CancelledError):
        await handle(first, crashing)
    # The lease it held refuses a redelivery until it runs out, then the step runs again.
    with pytest.raises(LeaseHeldError):
        await handle(first, replace(short, bus=RecordingBus()))
    bus = RecordingBus()
    for _ in range(600):
        try:
            await handle(first, replace(short, bus=bus))
            break
        except LeaseHeldError:
            await asyncio.sleep(0.1)
    [second] = bus.published
    assert second.kind == "iterate" and second.step == 2
    await handle(first, replace(short, bus=RecordingBus()))  # a duplicate after the commit

    execution = await store.get_execution(first.execution_id)
    assert execution is not None and execution.step == 2 and not execution.gather_pending
    timeline = await store.list_timeline(first.execution_id)
    gathered = [e for e in timeline if isinstance(e, MCPToolCallEvent) and e.gathered]
    records = await store.list_mcp_interactions(first.execution_id)
    assert len(records) == len(gathered) > 0
    assert len({r.call_id for r in records}) == len(records)
    detections = [e.content for e in timeline if isinstance(e, DetectionEvent)]
    assert len(detections) == len(set(detections)) > 0
    await in_process.drive(short, second)
    session = await store.get_session(session_id)
    assert session is not None and session.status is ExecutionStatus.COMPLETED

"""Sub-agents (issue 16, seed 004): message_agent through the real step engine and fake Gemini.

Most tests run the step function in process with a recording bus, so that
each decides which published message is delivered, how often (duplicates) and
when (a sub-agent that never answers); the first goes through the whole stack
(ingest, Pub/Sub push, the step function under functions-framework). Firestore
and Pub/Sub are the emulators, the model the fake Gemini server, reached by the
real google-genai SDK.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tarsy.app import Deps
from tarsy.commands.sessions import cancel_agent
from tarsy.engine.steps import handle
from tarsy.engine.sweeper import sweep
from tarsy.models import (
    AgentExecution,
    ExecutionStatus,
    LLMToolCallEvent,
    MCPToolCallEvent,
    Session,
    StepMessage,
    utcnow,
)
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall

from . import in_process
from .in_process import drive

pytestmark = pytest.mark.integration


async def new_session(store: Store) -> Session:
    return await in_process.new_session(
        store,
        alert_type="test-sub-agents",
        alert_data="checkout latency p99 4s",
        chain_id="sub-agents",
    )


def agent_of(call: FakeCall) -> str:
    """Which agent made the call: its system prompt starts with its name."""
    found = re.search(r"You are ([\w\-]+)", call.system_text())
    return found.group(1) if found else "?"


def function_responses(call: FakeCall) -> list[dict[str, Any]]:
    """The function responses the request carries, in order."""
    return [
        part["functionResponse"]
        for content in call.body.get("contents", [])
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]


def answer_in(response: dict[str, Any]) -> dict[str, Any]:
    """A message_agent result as the parent's model reads it (JSON in the result text)."""
    parsed: dict[str, Any] = json.loads(response["response"]["result"])
    return parsed


def message(args: dict[str, str], call_id: str) -> FakeToolCall:
    return FakeToolCall(name="message_agent", args=args, id=call_id)


def scripted(calls: list[FakeCall]) -> Callable[[FakeCall], FakeReply]:
    """Coordinator: ask both helpers, follow up with the log reader, conclude."""

    def reply(call: FakeCall) -> FakeReply:
        calls.append(call)
        agent, responses = agent_of(call), function_responses(call)
        if agent == "coordinator":
            if not responses:
                return FakeReply(
                    tool_calls=[
                        message({"agent_name": "log-reader", "message": "What do logs say?"}, "c1"),
                        message({"agent_name": "metric-reader", "message": "CPU?"}, "c2"),
                    ]
                )
            if len(responses) == 2:
                logs = next(answer_in(r) for r in responses if r.get("id") == "c1")
                follow = {"conversation_id": logs["conversation_id"], "message": "Which pod?"}
                return FakeReply(tool_calls=[message(follow, "c3")])
            return FakeReply(text="Root cause: pod orders-7 is out of memory.")
        if agent == "log-reader":
            follow_up = any("Which pod?" in text for text in call.texts("user"))
            return FakeReply(text="pod orders-7" if follow_up else "OOMKilled in the logs")
        if agent == "metric-reader":
            return FakeReply(text="CPU is normal", input_tokens=111, output_tokens=7)
        return FakeReply(text="summary: orders-7 ran out of memory")

    return reply


async def start_and_message(run: Deps, bus: RecordingBus, session: Session) -> list[StepMessage]:
    """Start the session and run the coordinator's first step: the sub-agents' first steps."""
    await handle(StepMessage(session_id=session.session_id, kind="start_session"), run)
    await handle(bus.published.pop(), run)
    started = list(bus.published)
    bus.published.clear()
    return started


async def executions(store: Store, session: Session) -> dict[str, AgentExecution]:
    return {e.agent: e for e in await store.list_executions(session.session_id)}


def test_sub_agents_answer_through_pub_sub_and_the_view_shows_the_tree(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    fake_gemini.responder = scripted(calls)
    submitted = client.submit({"alert_type": "test-sub-agents", "data": {"latency": "4s"}})
    *_, view = client.watch(submitted.session_id, poll_interval=0.25, timeout=120)

    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    assert view.session["final_analysis"] == "Root cause: pod orders-7 is out of memory."
    by_agent = {e["agent"]: e for e in view.executions}
    parent_id = by_agent["coordinator"]["execution_id"]
    assert {
        (e["agent"], e["role"], e["parent_execution_id"])
        for e in view.executions
        if e["role"] == "sub_agent"
    } == {("log-reader", "sub_agent", parent_id), ("metric-reader", "sub_agent", parent_id)}
    made = [agent_of(c) for c in calls]
    assert (made.count("coordinator"), made.count("log-reader"), made.count("metric-reader")) == (
        3,
        2,
        1,
    )


async def test_a_coordinator_messages_two_sub_agents_and_follows_up_under_duplicates(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    fake_gemini.responder = scripted(calls)
    session = await new_session(store)

    await drive(
        deps, StepMessage(session_id=session.session_id, kind="start_session"), duplicate=True
    )

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED, done
    assert done.final_analysis == "Root cause: pod orders-7 is out of memory."
    by_agent = await executions(store, session)
    coordinator, logs, metrics = (
        by_agent[n] for n in ("coordinator", "log-reader", "metric-reader")
    )
    # Each conversation is its own execution, linked to its parent and the call it answers.
    assert (logs.role, logs.parent_execution_id, logs.depth) == (
        "sub_agent",
        coordinator.execution_id,
        1,
    )
    assert (metrics.parent_execution_id, metrics.parent_tool_call_id) == (
        coordinator.execution_id,
        "c2",
    )
    assert logs.parent_tool_call_id == "c3"  # the follow-up reopened the same conversation
    assert logs.final_analysis == "pod orders-7"
    assert coordinator.awaiting is None and coordinator.status is ExecutionStatus.COMPLETED
    # Exactly one model call per turn, duplicates or not.
    made = [agent_of(c) for c in calls]
    assert (made.count("coordinator"), made.count("log-reader"), made.count("metric-reader")) == (
        3,
        2,
        1,
    )
    # Exactly one answer per call, in the parent's conversation, as seed 004 shapes it.
    tool_messages = [
        m for m in await store.load_messages(coordinator.execution_id) if m.role == "tool"
    ]
    answers = {str(m.tool_call_id): json.loads(m.content) for m in tool_messages}
    assert sorted(answers) == ["c1", "c2", "c3"] and len(tool_messages) == 3
    assert answers["c1"] == {
        "conversation_id": logs.execution_id,
        "agent_name": "log-reader",
        "response": "OOMKilled in the logs",
        "is_complete": False,
    }
    assert answers["c2"]["response"] == "CPU is normal"
    assert answers["c3"]["conversation_id"] == logs.execution_id
    # The sub-agent kept its conversation: the follow-up saw the first exchange.
    [follow_up_call] = [
        c for c in calls if agent_of(c) == "log-reader" and "Which pod?" in str(c.body)
    ]
    assert "OOMKilled in the logs" in str(follow_up_call.body)
    # The parent's timeline shows each message with its conversation, then each answer.
    events = await store.list_timeline(coordinator.execution_id)
    sent = [e for e in events if isinstance(e, LLMToolCallEvent)]
    got = [e for e in events if isinstance(e, MCPToolCallEvent)]
    assert [e.sub_agent for e in sent] == ["log-reader", "metric-reader", "log-reader"]
    assert [e.conversation_id for e in got] == [
        logs.execution_id,
        metrics.execution_id,
        logs.execution_id,
    ]
    # The sub-agent's own timeline has both messages it received.
    questions = [
        e for e in await store.list_timeline(logs.execution_id) if e.type == "user_question"
    ]
    assert [e.content for e in questions] == ["What do logs say?", "Which pod?"]
    # Sub-agents' tokens count toward the session.
    everyone = await store.list_executions(session.session_id)
    assert done.tokens.input_tokens == sum(e.tokens.input_tokens for e in everyone)
    assert metrics.tokens.input_tokens == 111


async def test_a_sub_agent_that_does_not_answer_in_time_gives_an_error_observation(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    base = scripted(calls)

    def reply(call: FakeCall) -> FakeReply:
        if agent_of(call) == "coordinator" and not function_responses(call):
            calls.append(call)
            return FakeReply(
                tool_calls=[message({"agent_name": "metric-reader", "message": "CPU?"}, "m1")]
            )
        if agent_of(call) == "coordinator":
            calls.append(call)
            return FakeReply(text="Concluded without the metrics.")
        return base(call)

    fake_gemini.responder = reply
    defaults = deps.config.defaults.model_copy(update={"sub_agent_timeout_seconds": 1.0})
    local = replace(deps, config=deps.config.model_copy(update={"defaults": defaults}))
    session = await new_session(store)
    bus = RecordingBus()
    run = replace(local, bus=bus)

    # The session starts and the coordinator messages the metric reader...
    [sub_agent_step] = await start_and_message(run, bus, session)
    coordinator = (await executions(store, session))["coordinator"]
    assert coordinator.awaiting is not None and coordinator.awaiting.call_ids == ["m1"]
    # ...whose step is never delivered (a sub-agent that hangs). A message for the
    # parent before the deadline finds nothing to do.
    waiting = StepMessage(
        session_id=session.session_id,
        execution_id=coordinator.execution_id,
        step=coordinator.step,
        kind="iterate",
    )
    await handle(waiting, run)
    assert bus.published == []
    deadline = coordinator.awaiting.deadline
    for _ in range(200):  # bounded: the deadline is a second away
        if utcnow() > deadline:
            break
        await asyncio.sleep(0.05)
    # Past it, the sweeper re-publishes the parent's step: the silent call becomes
    # an error observation and the conversation is cancelled.
    report = await sweep(run)
    assert coordinator.execution_id in report.republished
    # (The emulator is shared: the sweep may find other tests' executions too.)
    [resumed] = [m for m in bus.published if m.execution_id == coordinator.execution_id]
    await drive(local, resumed)

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.final_analysis == "Concluded without the metrics."
    [tool_message] = [
        m for m in await store.load_messages(coordinator.execution_id) if m.role == "tool"
    ]
    observation = json.loads(tool_message.content)
    assert observation["is_complete"] is True
    assert "did not answer within 1s" in observation["error"]
    # The late sub-agent step now cancels it instead of calling the model.
    await handle(sub_agent_step, run)
    metrics = (await executions(store, session))["metric-reader"]
    assert metrics.status is ExecutionStatus.CANCELLED
    assert [agent_of(c) for c in calls] == ["coordinator", "coordinator", "executive-summarizer"]


async def test_cancelling_a_sub_agent_gives_its_parent_an_error_observation(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    base = scripted(calls)

    def reply(call: FakeCall) -> FakeReply:
        if agent_of(call) == "coordinator" and not function_responses(call):
            return FakeReply(
                tool_calls=[message({"agent_name": "log-reader", "message": "logs?"}, "x1")]
            )
        if agent_of(call) == "coordinator":
            return FakeReply(text="Concluded after the cancel.")
        return base(call)

    fake_gemini.responder = reply
    session = await new_session(store)
    bus = RecordingBus()
    run = replace(deps, bus=bus)
    [sub_agent_step] = await start_and_message(run, bus, session)
    logs = (await executions(store, session))["log-reader"]

    await cancel_agent(deps, session.session_id, logs.execution_id)
    await drive(deps, sub_agent_step)

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.final_analysis == "Concluded after the cancel."
    coordinator = (await executions(store, session))["coordinator"]
    [tool_message] = [
        m for m in await store.load_messages(coordinator.execution_id) if m.role == "tool"
    ]
    assert json.loads(tool_message.content) == {
        "conversation_id": logs.execution_id,
        "agent_name": "log-reader",
        "error": "cancelled on request",
        "is_complete": True,
    }
    assert "log-reader" not in [agent_of(c) for c in calls]  # it never called the model


def ask_both_then_conclude(calls: list[FakeCall]) -> Callable[[FakeCall], FakeReply]:
    base = scripted(calls)

    def reply(call: FakeCall) -> FakeReply:
        if agent_of(call) == "coordinator":
            calls.append(call)
            if function_responses(call):
                return FakeReply(text="Both helpers answered.")
            return FakeReply(
                tool_calls=[
                    message({"agent_name": "log-reader", "message": "logs?"}, "k1"),
                    message({"agent_name": "metric-reader", "message": "cpu?"}, "k2"),
                ]
            )
        return base(call)

    return reply


async def swept(deps: Deps, session: Session, seconds: float) -> list[StepMessage]:
    """What the sweeper re-publishes for this session, ``seconds`` from now."""
    bus = RecordingBus()
    await sweep(replace(deps, bus=bus), now=utcnow() + timedelta(seconds=seconds))
    # (The emulator is shared: the sweep may find other tests' executions too.)
    return [m for m in bus.published if m.session_id == session.session_id]


async def test_crashes_around_the_sub_agents_publishes_are_healed_by_the_sweeper(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    fake_gemini.responder = ask_both_then_conclude(calls)
    session = await new_session(store)
    bus = RecordingBus()
    run, dying = replace(deps, bus=bus), replace(deps, bus=RecordingBus(fail=True))
    await handle(StepMessage(session_id=session.session_id, kind="start_session"), run)
    dispatch = bus.published.pop()

    # The coordinator's step commits its messages to both helpers, then the process
    # dies before publishing their first steps; Pub/Sub's redelivery changes nothing.
    with pytest.raises(ConnectionError):
        await handle(dispatch, dying)
    await handle(dispatch, run)
    assert bus.published == []
    # Past their due time the sweeper starts both conversations (not the waiting parent).
    starts = await swept(deps, session, deps.settings.step_due_seconds + 5)
    by_id = {e.execution_id: e for e in await store.list_executions(session.session_id)}
    assert sorted(by_id[m.execution_id].agent for m in starts) == ["log-reader", "metric-reader"]
    first, last = starts
    await handle(first, run)
    assert bus.published == []  # one answer of two: the parent keeps waiting
    # The second answer claims the fan-in, then dies publishing the parent's step...
    with pytest.raises(ConnectionError):
        await handle(last, dying)
    await handle(last, run)  # ...and its redelivery finds the fan-in already claimed.
    assert bus.published == []
    # The parent was made due at the normal step due time, not the answer timeout.
    [woken] = await swept(deps, session, deps.settings.step_due_seconds + 5)
    assert by_id[woken.execution_id].agent == "coordinator"
    await drive(deps, woken)

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.final_analysis == "Both helpers answered."
    coordinator = (await executions(store, session))["coordinator"]
    tool_messages = [
        m for m in await store.load_messages(coordinator.execution_id) if m.role == "tool"
    ]
    assert sorted(str(m.tool_call_id) for m in tool_messages) == ["k1", "k2"]
    made = [agent_of(c) for c in calls]
    assert (made.count("coordinator"), made.count("log-reader"), made.count("metric-reader")) == (
        2,
        1,
        1,
    )

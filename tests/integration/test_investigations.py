"""Multi-iteration investigations through the real step function, with the real
kubernetes-mcp-server on the demo cluster's Kubernetes API as the ``kubernetes`` MCP server:
native thinking (thought signatures across steps) and ReAct."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest
from google.cloud import firestore

from tarsy.models import ExecutionStatus, utcnow
from tarsy.money import money_of
from tarsy.persistence.store import Store
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.fakes.fake_gemini import STAND_IN_LABEL, FakeCall, FakeGemini, FakeReply
from tarsy_dev.fakes.standin import ScenarioStandIn
from tarsy_dev.localstack.stack import Stack

from .conftest import SCENARIO, signed_in
from .timeline import is_evidence, model_records, model_timeline

SCENARIO_DATA = load_scenario(SCENARIO)
ALERT = SCENARIO_DATA.alert.model_dump(mode="json")
STEPS = SCENARIO_DATA.playbook.steps


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    return view


def investigation_calls(fake: FakeGemini) -> list[FakeCall]:
    return [c for c in fake.calls if "kubernetes-investigator" in c.system_text()]


async def test_native_thinking_investigation_sends_each_signature_back(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    fake_gemini.responder = ScenarioStandIn(SCENARIO)
    session_id = client.submit(ALERT).session_id
    view = finish(client, session_id)

    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    calls = investigation_calls(fake_gemini)
    assert len(calls) == len(STEPS) + 1  # one call per tool step, then the analysis
    # Every request after the first replays the earlier turns with their signatures,
    # read back from Firestore by a different step invocation.
    for n, call in enumerate(calls):
        assert "kubernetes__pods_list_in_namespace" in call.function_names()
        replayed = call.model_parts()
        assert len(replayed) == n
        for turn, parts in enumerate(replayed):
            [part] = parts
            assert part["functionCall"]["name"] == f"kubernetes__{STEPS[turn].tool}"
            assert (
                part["thoughtSignature"]
                == base64.b64encode(f"standin-signature-{turn}".encode()).decode()
            )
        assert "thinkingConfig" in call.generation_config()

    execution = next(e for e in view.executions if e["role"] == "agent")
    # Evidence first: the gather step's calls and detections come before the model's events.
    gathered = len(execution["timeline"]) - len(model_timeline(execution))
    assert gathered > 0 and all(is_evidence(e) for e in execution["timeline"][:gathered])
    types = [e["type"] for e in model_timeline(execution)]
    assert types == ["llm_thinking", "llm_tool_call", "mcp_tool_call"] * len(STEPS) + [
        "llm_thinking",
        "final_analysis",
    ]
    tool_events = [e for e in model_timeline(execution) if e["type"] == "mcp_tool_call"]
    for event, step in zip(tool_events, STEPS, strict=True):
        assert event["metadata"]["tool_name"] == step.tool
        assert event["metadata"]["server_name"] == "kubernetes"
        assert event["metadata"]["is_error"] is False
        for expected in step.expect:
            assert expected in event["content"]
    records = model_records(await store.list_mcp_interactions(execution["execution_id"]))
    assert [(r.server, r.tool) for r in records] == [("kubernetes", s.tool) for s in STEPS]
    # The answers are kubernetes-mcp-server's own: its list header (with the APIVERSION,
    # KIND and LABELS columns it adds to the API server's Table) and its YAML of events.
    header = tool_events[0]["content"].splitlines()[0].split()
    assert header[:4] == ["NAMESPACE", "APIVERSION", "KIND", "NAME"] and header[-1] == "LABELS"
    assert tool_events[-1]["content"].startswith("# The following events (YAML format)")
    assert view.session["final_analysis"].startswith(STAND_IN_LABEL)

    # Session tokens and cost are the sums of its interaction records.
    interactions = [
        record
        for e in view.executions
        for record in await store.list_llm_interactions(e["execution_id"])
    ]
    # And the executive summary, and the judge that scores the kubernetes chain's sessions.
    assert len(interactions) == len(calls) + 2
    assert view.session["tokens"]["total_tokens"] == sum(
        i.tokens.total_tokens for i in interactions
    )
    assert view.session["tokens"]["input_tokens"] == sum(
        i.tokens.input_tokens for i in interactions
    )
    assert money_of(view.session["cost"]) == sum(i.cost for i in interactions)  # exact
    assert isinstance(view.session["cost"], str) and money_of(view.session["cost"]) > 0

    # The signature document lives an hour for the TTL policy.
    db = firestore.Client(project=stack.project_id)
    try:
        doc = db.collection("thought_signatures").document(execution["execution_id"]).get()
    finally:
        db.close()  # type: ignore[no-untyped-call]
    assert doc.exists
    expire_at = (doc.to_dict() or {})["expire_at"]
    assert timedelta(minutes=55) < expire_at - utcnow() <= timedelta(hours=1)


REACT_TOOLS = [(s.tool, s.arguments) for s in STEPS[:4]]


def react_model(*, malformed_first: bool) -> Callable[[FakeCall], FakeReply]:
    """A ReAct model: four actions, then the final answer (optionally one bad turn first)."""

    def reply(call: FakeCall) -> FakeReply:
        if "react-agent" not in call.system_text():
            return FakeReply(text="summary of the ReAct investigation")
        turns = len(call.texts("model"))
        if malformed_first:
            if turns == 0:
                return FakeReply(text="Thought: I will look around first.")  # no Action
            turns -= 1
        if turns < len(REACT_TOOLS):
            tool, arguments = REACT_TOOLS[turns]
            return FakeReply(
                text=f"Thought: step {turns + 1}.\nAction: kubernetes.{tool}\n"
                f"Action Input: {json.dumps(arguments)}"
            )
        # The answer names a resource the observations showed: no nudge to name the evidence.
        return FakeReply(
            text="Thought: I know the cause.\nFinal Answer: DATABASE_HOST in payments-api-config "
            "is wrong."
        )

    return reply


@pytest.mark.parametrize("malformed_first", [False, True])
def test_react_investigation(
    client: TarsyClient, fake_gemini: FakeGemini, malformed_first: bool
) -> None:
    fake_gemini.responder = react_model(malformed_first=malformed_first)
    session_id = client.submit({"alert_type": "test-react", "data": ALERT["data"]}).session_id
    view = finish(client, session_id)

    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    react_calls = [c for c in fake_gemini.calls if "react-agent" in c.system_text()]
    # thought → action → observation, four times, then the final answer: 5 calls, 4 tool calls
    assert len(react_calls) == 5 + malformed_first
    assert all(not c.function_names() for c in react_calls)  # text ReAct, no functions
    execution = next(e for e in view.executions if e["role"] == "agent")
    types = [e["type"] for e in model_timeline(execution)]
    correction = ["llm_thinking", "llm_response"] if malformed_first else []
    assert types == (
        correction
        + ["llm_thinking", "llm_tool_call", "mcp_tool_call"] * 4
        + ["llm_thinking", "final_analysis"]
    )
    tools = [
        e["metadata"]["tool_name"]
        for e in model_timeline(execution)
        if e["type"] == "mcp_tool_call"
    ]
    assert tools == [tool for tool, _ in REACT_TOOLS]
    if malformed_first:
        # The correction round named what was missing, and the model recovered.
        assert "Error in reasoning" in react_calls[1].last_user_text()
        assert "Action" in react_calls[1].last_user_text()
    assert react_calls[-1].last_user_text().startswith("Observation:")
    assert view.session["final_analysis"] == "DATABASE_HOST in payments-api-config is wrong."


def test_max_iterations_pause_then_resume(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = ScenarioStandIn(SCENARIO)
    session_id = client.submit({"alert_type": "test-pause", "data": ALERT["data"]}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.PAUSED
    assert len(investigation_calls(fake_gemini)) == 0  # a different agent name
    paused_calls = len(fake_gemini.calls)
    assert paused_calls == 2  # max_iterations: 2

    response = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/resume",
        headers=signed_in(stack),
        json={"extra_iterations": 10},
        timeout=10,
    )
    assert response.status_code == 202
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED
    agent_calls = [c for c in fake_gemini.calls if "pausing-agent" in c.system_text()]
    assert len(agent_calls) == len(STEPS) + 1


def test_chat_answers_from_the_investigation(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    def respond(call: FakeCall) -> FakeReply:
        if "chat-assistant" in call.system_text():
            # Only a prompt that carries the earlier analysis lets this answer be given.
            found = "ledger-42" in call.last_user_text()
            return FakeReply(text="the ledger-42 migration" if found else "no idea")
        if "executive-summarizer" in call.system_text():
            return FakeReply(text="summary")
        return FakeReply(text="Root cause: the ledger-42 migration locked the table.")

    fake_gemini.responder = respond
    session_id = client.submit({"alert_type": "generic", "data": "db slow"}).session_id
    assert finish(client, session_id).status is ExecutionStatus.COMPLETED

    response = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/chat",
        headers=signed_in(stack),
        json={"question": "Which migration was it?"},
        timeout=10,
    )
    assert response.status_code == 202
    execution_id = response.json()["execution_id"]
    deadline = time.monotonic() + 60
    while True:
        view = client.session(session_id)
        chat = next(e for e in view.executions if e["execution_id"] == execution_id)
        if chat["status"] in ("completed", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.25)

    assert chat["status"] == "completed"
    assert [e["type"] for e in chat["timeline"]] == ["user_question", "final_analysis"]
    assert chat["timeline"][0]["content"] == "Which migration was it?"
    assert chat["timeline"][1]["content"] == "the ledger-42 migration"
    [chat_call] = [c for c in fake_gemini.calls if "chat-assistant" in c.system_text()]
    assert "Which migration was it?" in chat_call.last_user_text()
    assert view.status is ExecutionStatus.COMPLETED  # the session itself is unchanged

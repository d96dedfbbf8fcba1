"""An alert's ``mcp`` selection through the real ingest and step functions and the fake Gemini:
only the chosen tool reaches the model (agent and chat), an unknown server is a 422 with
nothing written, and a tool its server does not list fails the session naming it."""

from __future__ import annotations

import pytest

from tarsy.errors import ApiError
from tarsy.models import ExecutionStatus
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.localstack.stack import Stack

from .chat_polling import answer_chat
from .conftest import Tap
from .test_ingest_rejections import documents
from .test_investigations import ALERT, STEPS
from .timeline import model_timeline

# The "test-tools" chain's agent is configured with the "trouble" and "down" servers;
# the alert chooses one tool of the demo cluster ("kubernetes") instead.
STEP = STEPS[0]
CHOSEN = f"kubernetes__{STEP.tool}"
SELECTION = {"servers": [{"name": "kubernetes", "tools": [STEP.tool]}]}


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    return view


def responder(call: FakeCall) -> FakeReply:
    system = call.system_text()
    if "troubleshooter" in system or "chat-assistant" in system:
        if not call.model_parts():  # the first call of the execution: use the chosen tool
            return FakeReply(tool_calls=[FakeToolCall(name=CHOSEN, args=STEP.arguments, id="t1")])
        return FakeReply(text="The pods crash loop on a bad ConfigMap.")
    return FakeReply(text="summary")


def test_an_alert_that_chooses_one_tool_offers_the_model_only_that_tool(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = responder
    alert = {"alert_type": "test-tools", "data": ALERT["data"], "mcp": SELECTION}
    session_id = client.submit(alert).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    assert view.session["mcp"] == SELECTION

    agent_calls = [c for c in fake_gemini.calls if "troubleshooter" in c.system_text()]
    assert len(agent_calls) == 2
    for call in agent_calls:  # not the chain's "trouble" tools: only the one chosen
        assert call.function_names() == [CHOSEN]
    agent = next(e for e in view.executions if e["role"] == "agent")
    results = [e for e in model_timeline(agent) if e["type"] == "mcp_tool_call"]
    assert [(e["metadata"]["server_name"], e["metadata"]["tool_name"]) for e in results] == [
        ("kubernetes", STEP.tool)
    ]
    assert results[0]["metadata"]["is_error"] is False
    # The gather step before the model's first call used only the chosen tool too.
    gathered = [e for e in agent["timeline"] if e["metadata"].get("gathered")]
    assert {e["metadata"]["tool_name"] for e in gathered} <= {STEP.tool}

    # The chat on the finished session is offered the same single tool.
    chat = answer_chat(client, session_id, "Which pod is it?")
    assert chat["status"] == "completed"
    chat_calls = [c for c in fake_gemini.calls if "chat-assistant" in c.system_text()]
    assert chat_calls and all(c.function_names() == [CHOSEN] for c in chat_calls)


def test_an_unknown_server_is_refused_with_422_and_nothing_is_written(
    client: TarsyClient, fake_gemini: FakeGemini, stack: Stack, tap: Tap
) -> None:
    mcp = {"servers": [{"name": "kubernetes"}, {"name": "no-such-server", "tools": ["x"]}]}
    with pytest.raises(ApiError) as refused:
        client.submit({"alert_type": "test-tools", "data": ALERT["data"], "mcp": mcp})
    assert refused.value.status == 422
    assert "mcp.servers.1.name" in str(refused.value.body)
    assert "no-such-server" in str(refused.value.body)
    assert documents(stack) == []
    assert tap.drain(wait=0.5) == []
    assert fake_gemini.calls == []


def test_a_tool_its_server_does_not_list_fails_the_session_naming_it(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = responder
    # Firestore is emptied before each test: no cached tool list, so ingest cannot tell.
    mcp = {"servers": [{"name": "kubernetes", "tools": [STEP.tool, "kubectl_delete_everything"]}]}
    session_id = client.submit({"alert_type": "test-tools", "data": "d", "mcp": mcp}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.FAILED
    error = view.session["error"]
    assert error["code"] == "configuration"
    assert "'kubectl_delete_everything'" in error["message"]
    assert "'kubernetes'" in error["message"]
    assert not [c for c in fake_gemini.calls if "troubleshooter" in c.system_text()]

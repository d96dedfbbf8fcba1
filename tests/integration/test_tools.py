"""The tool layer through the real step function: misbehaving tools, a server that is down,
an unknown tool, a 2 MB result, stdio transport, concurrency, and masking end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from google.cloud import firestore

from tarsy.models import ExecutionStatus
from tarsy.persistence.store import Store
from tarsy.tools.summarize import SUMMARY_SYSTEM
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.fakes.standin import ScenarioStandIn
from tarsy_dev.localstack.stack import Stack
from tests.unit.masking.test_masking import CASES, CORPUS

from .conftest import SCENARIO, stack_config_path
from .test_investigations import STEPS

MUST_MASK = CASES["env-dump.txt"][0] + CASES["secret-get.yaml"][0]
SECRET_ALERT = (CORPUS / "secret-get.yaml").read_text()


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    return view


def troubleshooter(call: FakeCall) -> FakeReply:
    system = call.system_text()
    if SUMMARY_SYSTEM in system:
        return FakeReply(text="2 MB of healthy request logs, status 200 throughout")
    if "troubleshooter" not in system:
        return FakeReply(text="summary")
    if not call.model_parts():
        calls = [
            FakeToolCall(name="trouble__nap", args={"seconds": 1}, id="nap-1"),
            FakeToolCall(name="trouble__nap", args={"seconds": 1}, id="nap-2"),
            FakeToolCall(name="trouble__hang", args={}, id="hang"),
            FakeToolCall(name="ghost__tool", args={}, id="ghost"),
            FakeToolCall(name="trouble__big", args={"megabytes": 2}, id="big"),
            FakeToolCall(name="trouble__env_dump", args={}, id="env"),
        ]
        return FakeReply(tool_calls=calls)
    return FakeReply(text="The service is healthy; the alert was noise.")


def all_documents(project: str) -> list[dict[str, Any]]:
    db = firestore.Client(project=project)
    found: list[dict[str, Any]] = []

    def walk(collection: Any) -> None:
        for snapshot in collection.stream():
            found.append(snapshot.to_dict() or {})
            for child in snapshot.reference.collections():
                walk(child)

    try:
        for collection in db.collections():
            walk(collection)
    finally:
        db.close()  # type: ignore[no-untyped-call]
    return found


async def test_tool_failures_are_observations_and_secrets_never_leave_the_masker(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    fake_gemini.responder = troubleshooter
    session_id = client.submit({"alert_type": "test-tools", "data": SECRET_ALERT}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    agent = next(e for e in view.executions if e["role"] == "agent")
    results = {
        e["metadata"]["call_id"]: e for e in agent["timeline"] if e["type"] == "mcp_tool_call"
    }
    assert results["nap-1"]["content"].startswith("slept 1.0s from ")
    assert results["nap-1"]["metadata"]["is_error"] is False
    assert results["hang"]["metadata"]["is_error"] is True
    assert "timed out after 8s" in results["hang"]["content"]
    assert results["ghost"]["metadata"]["is_error"] is True
    assert "unknown tool 'ghost.tool'" in results["ghost"]["content"]
    assert results["big"]["metadata"]["shown_as"] == "summarized"
    assert "2 MB of healthy request logs" in results["big"]["content"]
    assert [e["type"] for e in agent["timeline"]].count("mcp_tool_summary") == 1
    # The server that is down is reported, and its tools were left out.
    first = agent["timeline"][0]
    assert "down" in first["metadata"]["unavailable_servers"]

    # All calls of the iteration ran at once: the two naps overlapped in time.
    def interval(call_id: str) -> tuple[float, float]:
        words = results[call_id]["content"].split()
        return float(words[3]), float(words[5])

    (start_1, end_1), (start_2, end_2) = interval("nap-1"), interval("nap-2")
    assert start_1 < end_2 and start_2 < end_1, (start_1, end_1, start_2, end_2)
    investigation = [c for c in fake_gemini.calls if "troubleshooter" in c.system_text()]
    assert len(investigation) == 2

    # The 2 MB result is kept whole in its interaction record (in chunks).
    records = {r.call_id: r for r in await store.list_mcp_interactions(agent["execution_id"])}
    assert len(records["big"].result) > 2 * 1024 * 1024
    assert records["env"].masked  # counts of what was masked

    # No secret reached Firestore or the model.
    stored = json.dumps(all_documents(stack.project_id), default=str)
    sent = json.dumps([c.body for c in fake_gemini.calls])
    for secret in MUST_MASK:
        assert secret not in stored, secret
        assert secret not in sent, secret
    assert "[MASKED_" in sent


def test_kubernetes_mcp_server_runs_over_stdio_from_the_step_function(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    config = yaml.safe_load(stack_config_path(stack).read_text())
    kubernetes = config["mcp_servers"]["kubernetes"]
    assert kubernetes["transport"] == "stdio"
    assert Path(kubernetes["command"]).name == "kubernetes-mcp-server-linux-amd64"
    assert kubernetes["args"][:2] == ["--read-only", "--disable-destructive"]

    fake_gemini.responder = ScenarioStandIn(SCENARIO)
    data = {"alerts": [{"labels": {"alertname": "KubePodCrashLooping"}}]}
    session_id = client.submit({"alert_type": "test-stdio", "data": data}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    agent = next(e for e in view.executions if e["role"] == "agent")
    events = [e for e in agent["timeline"] if e["type"] == "mcp_tool_call"]
    assert [e["metadata"]["tool_name"] for e in events] == [s.tool for s in STEPS]
    servers = {e["metadata"]["server_name"] for e in events}
    assert servers == {"kubernetes"}
    assert not any(
        e["metadata"]["is_error"] for e in agent["timeline"] if e["type"] == "mcp_tool_call"
    )


def test_max_iterations_conclude_makes_one_last_call_without_tools(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = ScenarioStandIn(SCENARIO)
    session_id = client.submit({"alert_type": "test-conclude", "data": "crash loop"}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED
    calls = [c for c in fake_gemini.calls if "concluding-agent" in c.system_text()]
    assert len(calls) == 4  # max_iterations 3, then the conclusion
    assert all(c.function_names() for c in calls[:3])
    assert calls[3].function_names() == []
    assert "last iteration" in calls[3].system_text()

"""Runbook URLs through the real ingest and step functions, served by a loopback HTTP server:
fetched once as the session starts, shown to every stage's model, recorded on the session;
a host outside allowed_runbook_domains is never asked and the session completes without it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tarsy.app import Deps
from tarsy.config import load_config
from tarsy.engine.messages import execution_id_for
from tarsy.engine.steps import handle
from tarsy.models import ExecutionStatus, Session, StepMessage
from tarsy.persistence.store import Store
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini

from .conftest import RUNBOOK_HOST

RUNBOOK = "# Crash loops\n1. Read the previous container's logs (RUNBOOK-7f3a).\n"
PATH = "/team/runbooks/crashloop.md"


class RunbookServer:
    """A loopback HTTP server with one runbook; records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "headers": dict(self.headers)})
                if self.path != PATH:
                    self.send_error(404)
                    return
                body = RUNBOOK.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/markdown; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._http = ThreadingHTTPServer((RUNBOOK_HOST, 0), Handler)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def url(self, host: str = RUNBOOK_HOST) -> str:
        return f"http://{host}:{self.port}{PATH}"

    def __enter__(self) -> RunbookServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def runbooks() -> Iterator[RunbookServer]:
    with RunbookServer() as server:
        yield server


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    return view


def test_a_runbook_url_is_fetched_once_and_reaches_every_stage(
    client: TarsyClient, fake_gemini: FakeGemini, runbooks: RunbookServer
) -> None:
    # Two stages: triage, then three agents in parallel and their synthesis.
    alert = {
        "alert_type": "test-parallel",
        "data": "pod api-0 crash loops",
        "runbook": runbooks.url(),
    }
    session_id = client.submit(alert).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    session = view.session
    assert (session["runbook_url"], session["runbook_text"]) == (runbooks.url(), RUNBOOK)
    assert session["runbook_error"] is None
    assert [r["path"] for r in runbooks.requests] == [PATH]  # once, for the whole session
    assert "Authorization" not in runbooks.requests[0]["headers"]  # no token configured

    first = fake_gemini.calls[0]
    assert "triage" in first.system_text()
    assert "<<<BEGIN RUNBOOK>>>" in first.texts("user")[0]
    assert "RUNBOOK-7f3a" in first.texts("user")[0]
    for agent in ("logs-agent", "metrics-agent", "config-agent"):
        [opening, *_] = [c for c in fake_gemini.calls if agent in c.system_text()]
        assert "RUNBOOK-7f3a" in opening.texts("user")[0], agent


def test_a_runbook_on_a_host_not_allowed_is_not_fetched_and_the_session_goes_on(
    client: TarsyClient, fake_gemini: FakeGemini, runbooks: RunbookServer
) -> None:
    url = runbooks.url(host="localhost")  # the same server, by a name that is not allowed
    session_id = client.submit({"alert_type": "generic", "data": "disk full", "runbook": url})
    view = finish(client, session_id.session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    session = view.session
    assert session["runbook_url"] == url and session["runbook_text"] is None
    assert "'localhost' is not in allowed_runbook_domains" in session["runbook_error"]
    assert runbooks.requests == []
    first = fake_gemini.calls[0]
    assert "RUNBOOK" not in first.texts("user")[0] and url not in first.texts("user")[0]
    assert session["final_analysis"]
    # The first agent's timeline says why it worked without the runbook.
    [agent] = [e for e in view.executions if e["role"] == "agent"]
    assert agent["timeline"][0]["metadata"]["runbook_error"] == session["runbook_error"]


async def test_the_chains_runbook_url_serves_alerts_without_one_and_is_fetched_once(
    deps: Deps, store: Store, runbooks: RunbookServer
) -> None:
    # In process, with a bus that records: the stack's step function sees none of it.
    settings = deps.settings.model_copy(update={"allowed_runbook_domains": (RUNBOOK_HOST,)})
    config = load_config(
        settings,
        user_text=(
            "agent_chains:\n  documented:\n    alert_types: [documented]\n"
            f"    runbook_url: {runbooks.url()}\n"
            "    stages: [{name: investigation, agent: investigator}]\n"
        ),
    )
    bus = RecordingBus()
    local = replace(deps, settings=settings, config=config, bus=bus)
    session = Session(
        session_id=f"test-{uuid.uuid4()}", alert_type="documented", alert_data="disk full",
        chain_id="documented",
    )  # fmt: skip
    await store.create_session(session)
    start = StepMessage(session_id=session.session_id, kind="start_session")

    await handle(start, local)
    stored = await store.get_session(session.session_id)
    assert stored is not None
    assert (stored.runbook_url, stored.runbook_text) == (runbooks.url(), RUNBOOK)
    messages = await store.load_messages(execution_id_for(session.session_id, 0, 0))
    assert "RUNBOOK-7f3a" in messages[1].content

    await handle(start, local)  # a redelivered start: nothing is fetched or started again
    assert len(runbooks.requests) == 1
    assert [m.kind for m in bus.published] == ["iterate"]

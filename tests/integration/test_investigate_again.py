"""Investigate again (issue 33, item 6): the same alert, today's configuration, linked both ways.

Through the api as a signed-in responder and through the CLI: a finished
session's alert starts a new session, which names the first, and the first
lists it; a native sender's re-send of the same alert is still a duplicate.
"""

from __future__ import annotations

from importlib import resources

import httpx
import pytest

from tarsy.models import ExecutionStatus
from tarsy_dev import cli
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER, VIEWER, cli_flags, signed_in

WAIT_S = 90.0


def finished(client: TarsyClient, session_id: str) -> SessionView:
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal, last.status
    return last


def test_a_finished_session_is_investigated_again_as_a_new_linked_session(
    stack: Stack, client: TarsyClient
) -> None:
    alert = {"alert_type": "generic", "data": {"service": "orders", "p99_seconds": 2.3}}
    first = finished(client, client.submit(alert).session_id)
    first_id = first.session["session_id"]

    refused = httpx.post(
        f"{stack.api_url}/sessions/{first_id}/investigate",
        headers=signed_in(stack, VIEWER),
        json={},
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["details"] == {"required_role": "responder"}

    started = httpx.post(
        f"{stack.api_url}/sessions/{first_id}/investigate",
        headers=signed_in(stack, RESPONDER),
        json={},
        timeout=10,
    )
    assert started.status_code == 202, started.text
    again_id = started.json()["session_id"]
    assert again_id != first_id
    assert started.json()["status_url"].endswith(f"/sessions/{again_id}")

    again = finished(client, again_id)
    assert again.status is ExecutionStatus.COMPLETED
    # The same alert, its own investigation, linked both ways.
    for field in ("alert_type", "alert_data", "source", "chain_id"):
        assert again.session[field] == first.session[field], field
    assert again.session["investigation_of"] == first_id
    linked = client.session(first_id)
    assert linked.session["investigated_again_as"] == [again_id]
    # Recorded on the first session: who ran it again, and as which session.
    [action] = linked.audit
    assert (action["action"], action["actor"], action["target"]) == (
        "investigate",
        RESPONDER,
        again_id,
    )
    assert [s.session_id for s in client.list_sessions(action="investigate").sessions] == [first_id]


def test_a_running_session_is_not_investigated_again(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(
        text="still looking " * 40, stream_chunks=40, chunk_delay=0.5
    )
    session_id = client.submit({"alert_type": "generic", "data": "5xx on orders"}).session_id
    refused = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/investigate", headers=signed_in(stack), json={}
    )
    assert refused.status_code == 409
    assert "cancel it or let it finish" in refused.json()["error"]["message"]
    assert client.session(session_id).session["investigated_again_as"] == []
    client.cancel(session_id)
    finished(client, session_id)


def test_a_native_alert_is_investigated_again_while_its_re_send_stays_a_duplicate(
    stack: Stack,
    client: TarsyClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = resources.files("tarsy_dev.samples").joinpath("alertmanager.json").read_bytes()
    [created] = client.submit_source("alertmanager", body).alerts
    assert created.outcome == "created" and created.session_id is not None
    first = finished(client, created.session_id)

    flags = cli_flags(stack, monkeypatch, user=RESPONDER)
    capsys.readouterr()
    assert cli.main([*flags, "again", created.session_id, "--watch"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    again_id = out.splitlines()[0].strip()
    assert f"investigates {created.session_id} again" in err
    again = client.session(again_id)
    assert again.status is ExecutionStatus.COMPLETED
    assert again.session["source"] == first.session["source"] == "alertmanager"
    assert again.session["investigation_of"] == created.session_id

    # Alertmanager sends the same alert again within its window: still one duplicate.
    [resent] = client.submit_source("alertmanager", body).alerts
    assert (resent.outcome, resent.session_id) == ("duplicate", created.session_id)

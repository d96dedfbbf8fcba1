"""``POST /alerts`` is an alert receiver like the native sources: one door into intake."""

from __future__ import annotations

import json
from typing import Any, cast

from tarsy.config import load_config
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake.ingest import handle
from tarsy.intake.sources.api import ApiReceiver
from tarsy.intake.sources.receiver import AlertReceiver
from tarsy.intake.sources.registry import NATIVE, all_receivers, receiver_for
from tarsy.models import StepMessage
from tarsy.persistence.ports import Persistence
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tests.unit.alert_store_fake import MemoryAlertStore

KEY = "api-door-key"
SETTINGS = Settings(TARSY_API_KEY=KEY, TARSY_PUBLIC_API_URL="https://api.example")
CONFIG = load_config(Settings())
ALERT: dict[str, Any] = {
    "alert_type": "PodCrashLooping",
    "data": {"pod": "api-0", "restarts": 7},
    "runbook": "1. read the previous logs\n2. check the ConfigMap",
    "metadata": {"team": "payments"},
    "mcp": {"servers": [{"name": "kubernetes"}]},
}


def post(body: dict[str, Any], path: str = "/alerts") -> HttpRequest:
    return HttpRequest(
        method="POST",
        path=path,
        headers={"content-type": "application/json", "x-api-key": KEY},
        body=json.dumps(body).encode(),
    )


async def run(request: HttpRequest, store: MemoryAlertStore, bus: RecordingBus) -> HttpResponse:
    return await handle(request, SETTINGS, CONFIG, cast(Persistence, store), bus)


def test_post_alerts_and_the_root_url_are_served_by_a_registered_receiver() -> None:
    assert isinstance(receiver_for("/alerts"), ApiReceiver)
    assert isinstance(receiver_for("/"), ApiReceiver)
    assert all(isinstance(receiver, AlertReceiver) for receiver in all_receivers())
    assert [r.name for r in all_receivers()].count("api") == 1


def test_each_native_route_is_one_its_receiver_declares() -> None:
    declared = {path for r in all_receivers() if r.name != "api" for path in r.paths}
    assert declared == set(NATIVE)
    assert all(path in receiver().paths for path, receiver in NATIVE.items())


async def test_each_api_alert_is_its_own_session_with_its_runbook_mcp_and_metadata() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()

    first = await run(post(ALERT), store, bus)
    second = await run(post(ALERT, path="/"), store, bus)

    assert (first.status, second.status) == (202, 202)
    ids = [str(first.body["session_id"]), str(second.body["session_id"])]
    assert ids[0] != ids[1] and store.claims == {}  # no deduplication, no claims
    assert first.body["status_url"] == f"https://api.example/sessions/{ids[0]}"
    session = store.sessions[ids[0]]
    assert (session.source, session.runbook, session.metadata) == (
        "api", ALERT["runbook"], {"team": "payments"},
    )  # fmt: skip
    assert session.mcp is not None and [s.name for s in session.mcp.servers] == ["kubernetes"]
    assert '"restarts": 7' in session.alert_data
    assert bus.published == [StepMessage(session_id=i, kind="start_session") for i in ids]


async def test_a_failed_start_removes_the_api_session_and_answers_503() -> None:
    store = MemoryAlertStore()

    response = await run(post(ALERT), store, RecordingBus(fail=True))

    assert response.status == 503 and response.headers["Retry-After"] == "5"
    assert store.sessions == {} and len(store.deleted) == 1


async def test_an_mcp_selection_the_configuration_cannot_serve_is_refused_before_any_write() -> (
    None
):
    store, bus = MemoryAlertStore(), RecordingBus()
    body = {**ALERT, "mcp": {"servers": [{"name": "no-such-server"}]}}

    response = await run(post(body), store, bus)

    assert response.status == 422
    assert "no-such-server" in json.dumps(response.body)
    assert store.sessions == {} and bus.published == []

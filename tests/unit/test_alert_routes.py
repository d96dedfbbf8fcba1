"""The native alert routes through the ingest handler, with in-memory store and bus.

Each sender's sample body (tests/fixtures/sources) is posted as that sender
posts it, with the authentication it can do; the table asserts the outcome of
every alert and what was written. Rejections assert that nothing was.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any, cast

import pytest

from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake.ingest import handle
from tarsy.intake.sources.errors import BASIC_CHALLENGE
from tarsy.intake.sources.pagerduty_signature import signature_for
from tarsy.intake.sources.sns_certificates import DEFAULT_CACHE
from tarsy.models import AgentExecution, ExecutionStatus, Session, StepMessage
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tests.unit.alert_store_fake import MemoryAlertStore
from tests.unit.sources.loopback import Loopback, loopback_server
from tests.unit.sources.samples import fixture_bytes, fixture_json
from tests.unit.sources.test_sns_signature import CERT_PATH, TOPIC, Signer, make_signer, signed

KEY = "route-test-key"
PD_SECRET = "pd-secret-current"
PD_OLD_SECRET = "pd-secret-previous"

SETTINGS = Settings(
    TARSY_API_KEY=KEY, TARSY_PAGERDUTY_SIGNING_SECRET=f"{PD_SECRET}, {PD_OLD_SECRET}"
)
CONFIG_TEXT = f"""
agent_chains:
  kube:
    alert_types: [KubePodCrashLooping]
    stages: [{{name: s, agent: investigator}}]
alert_sources:
  sns:
    allowed_topic_arns: ["{TOPIC}"]
"""
CONFIG = load_config(Settings(), user_text=CONFIG_TEXT)


def config_with(sources: str) -> TarsyConfig:
    """The test config with another ``alert_sources`` block (YAML, indented 2)."""
    base = CONFIG_TEXT.split("alert_sources:")[0]
    return load_config(Settings(), user_text=base + "alert_sources:\n" + sources)


def basic(password: str, user: str = "alertmanager") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def auth_headers(kind: str, key: str = KEY) -> dict[str, str]:
    if kind == "bearer":
        return {"authorization": f"Bearer {key}"}
    if kind == "basic":
        return {"authorization": basic(key)}
    if kind == "x-api-key":
        return {"x-api-key": key}
    if kind == "none":
        return {}
    raise AssertionError(kind)


def post(
    source: str,
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    content_type: str = "application/json",
    method: str = "POST",
) -> HttpRequest:
    return HttpRequest(
        method=method,
        path=f"/alerts/{source}",
        headers={"content-type": content_type, **(headers or {})},
        body=body,
    )


def pagerduty(name: str, secret: str = PD_SECRET) -> HttpRequest:
    body = fixture_bytes(name)
    return post("pagerduty", body, {"x-pagerduty-signature": f"v1={signature_for(secret, body)}"})


async def run(
    request: HttpRequest,
    store: MemoryAlertStore,
    bus: RecordingBus,
    *,
    settings: Settings = SETTINGS,
    config: TarsyConfig = CONFIG,
) -> HttpResponse:
    return await handle(request, settings, config, cast(Store, store), bus)


def outcomes(response: HttpResponse) -> list[str]:
    return [entry["outcome"] for entry in response.body["alerts"]]


def nothing_written(store: MemoryAlertStore, bus: RecordingBus) -> bool:
    return not store.sessions and not store.claims and not bus.published


def finish(store: MemoryAlertStore, session_id: str) -> None:
    session = store.sessions[session_id]
    store.sessions[session_id] = session.model_copy(
        update={"status": ExecutionStatus.COMPLETED, "completed_at": session.created_at}
    )


# ─── each source accepted with its own auth ───────────────────────────────────


@pytest.mark.parametrize(
    ("source", "fixture", "auth", "expected"),
    [
        ("alertmanager", "alertmanager_firing_group.json", "bearer", ["created", "created"]),
        ("alertmanager", "alertmanager_firing_group.json", "basic", ["created", "created"]),
        ("alertmanager", "alertmanager_firing_group.json", "x-api-key", ["created", "created"]),
        ("grafana", "grafana_firing.json", "basic", ["created"]),
        ("grafana", "grafana_firing.json", "bearer", ["created"]),
    ],
)
async def test_group_sources_create_one_session_per_firing_alert(
    source: str, fixture: str, auth: str, expected: list[str]
) -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(post(source, fixture_bytes(fixture), auth_headers(auth)), store, bus)
    assert response.status == 202, response.body
    assert outcomes(response) == expected
    created = [entry["session_id"] for entry in response.body["alerts"]]
    assert sorted(created) == sorted(store.sessions)
    assert bus.published == [StepMessage(session_id=s, kind="start_session") for s in created]
    fingerprints = [a["fingerprint"] for a in fixture_json(fixture)["alerts"]]
    assert [entry["fingerprint"] for entry in response.body["alerts"]] == fingerprints


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("pagerduty_incident_triggered.json", "created"),
        ("pagerduty_incident_acknowledged.json", "ignored"),
        ("pagerduty_ping.json", "ignored"),
    ],
)
async def test_pagerduty_signed_webhooks_need_no_api_key(fixture: str, expected: str) -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(pagerduty(fixture), store, bus)
    assert response.status == 202, response.body
    assert outcomes(response) == [expected]
    assert len(store.sessions) == len(bus.published) == (1 if expected == "created" else 0)


async def test_pagerduty_accepts_the_old_secret_during_a_rotation() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(pagerduty("pagerduty_incident_triggered.json", PD_OLD_SECRET), store, bus)
    assert outcomes(response) == ["created"]


async def test_pagerduty_without_signing_secrets_takes_the_api_key() -> None:
    settings = Settings(TARSY_API_KEY=KEY)
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("pagerduty_incident_triggered.json")
    response = await run(
        post("pagerduty", body, auth_headers("basic")), store, bus, settings=settings
    )
    assert outcomes(response) == ["created"]
    session = next(iter(store.sessions.values()))
    assert (session.source, session.alert_type) == ("pagerduty", "checkout-api _production_")


async def test_pagerduty_signing_secret_named_in_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAGERDUTY_SECRET_NEXT", "from-the-config")
    config = config_with("  pagerduty:\n    signing_secrets: [PAGERDUTY_SECRET_NEXT]\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    request = pagerduty("pagerduty_incident_triggered.json", "from-the-config")
    response = await run(request, store, bus, settings=Settings(TARSY_API_KEY=KEY), config=config)
    assert outcomes(response) == ["created"]


async def test_a_session_carries_its_alert_its_runbook_and_its_chain() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("alertmanager_firing_group.json")
    response = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    first = store.sessions[response.body["alerts"][0]["session_id"]]
    assert first.alert_type == "KubePodCrashLooping"
    assert first.chain_id == "kube"
    assert first.source == "alertmanager"
    assert first.runbook == "https://runbooks.example.com/kubernetes/KubePodCrashLooping"
    assert first.metadata == {"fingerprint": "5f1a3c2b9e8d7a64"}
    assert first.awaiting_stage == 0 and first.due_at is not None and first.deadline is not None
    data = json.loads(first.alert_data)
    assert data["labels"]["pod"] == "checkout-api-7d9c8b6f5-x2k4q"
    assert data["annotations"]["summary"].startswith("Pod checkout/checkout-api")
    assert data["startsAt"] == "2026-11-20T08:14:31.517Z"
    assert data["generatorURL"].startswith("http://prometheus.monitoring.svc:9090/graph")
    assert data["commonLabels"]["severity"] == "critical"
    assert data["externalURL"] == "http://alertmanager.monitoring.svc:9093"


async def test_a_grafana_alert_with_a_generator_url_runs_the_metrics_chain() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("grafana_firing.json")
    await run(post("grafana", body, auth_headers("bearer")), store, bus)
    [session] = store.sessions.values()
    assert (session.alert_type, session.chain_id) == ("HighRequestLatency", "metrics")
    assert session.routing is not None and session.routing.rule == "metrics-expression"


async def test_alert_type_comes_from_the_configured_label() -> None:
    config = config_with("  alertmanager:\n    alert_type_from: labels.severity\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("alertmanager_firing_group.json")
    await run(post("alertmanager", body, auth_headers("bearer")), store, bus, config=config)
    assert {s.alert_type for s in store.sessions.values()} == {"critical"}


async def test_alerts_beyond_the_cap_are_reported_ignored() -> None:
    config = config_with("  alertmanager:\n    max_alerts_per_notification: 1\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("alertmanager_firing_group.json")
    response = await run(
        post("alertmanager", body, auth_headers("bearer")), store, bus, config=config
    )
    assert outcomes(response) == ["created", "ignored"]
    ignored = response.body["alerts"][1]
    assert ignored["session_id"] is None
    assert "max_alerts_per_notification (1)" in ignored["reason"]
    assert len(store.sessions) == 1


# ─── dedup and resolution ─────────────────────────────────────────────────────


async def test_a_repeat_is_a_duplicate_naming_the_session() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("alertmanager_firing_group.json")
    first = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    again = await run(post("alertmanager", body, auth_headers("basic")), store, bus)
    assert outcomes(again) == ["duplicate", "duplicate"]
    assert [e["session_id"] for e in again.body["alerts"]] == [
        e["session_id"] for e in first.body["alerts"]
    ]
    assert len(store.sessions) == 2 and len(bus.published) == 2


async def test_a_repeat_after_the_session_ended_is_still_a_duplicate_within_the_window() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    request = pagerduty("pagerduty_incident_triggered.json")
    first = await run(request, store, bus)
    session_id = first.body["alerts"][0]["session_id"]
    finish(store, session_id)
    again = await run(request, store, bus)
    assert again.body["alerts"] == [
        {"fingerprint": "Q2K7V9XPL3M0TA", "session_id": session_id, "outcome": "duplicate"}
    ]


async def test_concurrent_deliveries_of_one_alert_create_one_session() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("grafana_firing.json")
    responses = await asyncio.gather(
        *(run(post("grafana", body, auth_headers("bearer")), store, bus) for _ in range(6))
    )
    assert (
        sorted(outcome for r in responses for outcome in outcomes(r))
        == ["created"] + ["duplicate"] * 5
    )
    assert len(store.sessions) == 1 and len(bus.published) == 1
    [session_id] = store.sessions
    assert {r.body["alerts"][0]["session_id"] for r in responses} == {session_id}


@pytest.mark.parametrize(
    ("source", "firing", "resolved", "request_for"),
    [
        ("alertmanager", "alertmanager_firing_group.json", "alertmanager_resolved.json", "bearer"),
        ("grafana", "grafana_firing.json", "grafana_resolved.json", "basic"),
        (
            "pagerduty",
            "pagerduty_incident_triggered.json",
            "pagerduty_incident_resolved.json",
            "signature",
        ),
    ],
)
async def test_a_resolution_is_recorded_on_its_session_and_creates_nothing(
    source: str, firing: str, resolved: str, request_for: str
) -> None:
    def request(name: str) -> HttpRequest:
        if request_for == "signature":
            return pagerduty(name)
        return post(source, fixture_bytes(name), auth_headers(request_for))

    store, bus = MemoryAlertStore(), RecordingBus()
    fired = await run(request(firing), store, bus)
    session_id = fired.body["alerts"][0]["session_id"]
    before = dict(store.sessions)
    answer = await run(request(resolved), store, bus)
    assert answer.status == 202
    assert answer.body["alerts"][0] == {
        "fingerprint": fired.body["alerts"][0]["fingerprint"],
        "session_id": session_id,
        "outcome": "resolved",
    }
    assert store.sessions.keys() == before.keys()
    assert store.sessions[session_id].resolved_at is not None
    assert store.sessions[session_id].status is ExecutionStatus.PENDING  # not cancelled
    assert len(bus.published) == len(before)


async def test_a_resolution_of_an_unknown_alert_is_acknowledged_and_ignored() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = fixture_bytes("alertmanager_resolved.json")
    response = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    assert response.status == 202
    [entry] = response.body["alerts"]
    assert (entry["outcome"], entry["session_id"]) == ("ignored", None)
    assert "no session" in entry["reason"]
    assert nothing_written(store, bus)


async def test_the_first_resolution_time_is_kept() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    await run(pagerduty("pagerduty_incident_triggered.json"), store, bus)
    await run(pagerduty("pagerduty_incident_resolved.json"), store, bus)
    [first] = [s.resolved_at for s in store.sessions.values()]
    again = await run(pagerduty("pagerduty_incident_resolved.json"), store, bus)
    assert outcomes(again) == ["resolved"]
    assert [s.resolved_at for s in store.sessions.values()] == [first]


async def test_cancel_on_resolve_cancels_a_running_investigation() -> None:
    config = config_with("  grafana:\n    cancel_on_resolve: true\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    fired = await run(
        post("grafana", fixture_bytes("grafana_firing.json"), auth_headers("bearer")),
        store,
        bus,
        config=config,
    )
    session_id = fired.body["alerts"][0]["session_id"]
    store.sessions[session_id] = store.sessions[session_id].model_copy(
        update={"status": ExecutionStatus.ACTIVE}
    )
    store.executions["e1"] = AgentExecution(
        execution_id="e1",
        session_id=session_id,
        stage=0,
        agent="investigator",
        strategy="react",
        provider="p",
        status=ExecutionStatus.ACTIVE,
    )
    answer = await run(
        post("grafana", fixture_bytes("grafana_resolved.json"), auth_headers("bearer")),
        store,
        bus,
        config=config,
    )
    [entry] = answer.body["alerts"]
    assert (entry["outcome"], entry["session_id"]) == ("resolved", session_id)
    assert "cancelled" in entry["reason"]
    assert store.sessions[session_id].cancel_requested
    assert store.sessions[session_id].resolved_at is not None
    assert store.executions["e1"].cancel_requested


async def test_cancel_on_resolve_leaves_a_finished_session_alone() -> None:
    config = config_with("  grafana:\n    cancel_on_resolve: true\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    fired = await run(
        post("grafana", fixture_bytes("grafana_firing.json"), auth_headers("bearer")),
        store,
        bus,
        config=config,
    )
    session_id = fired.body["alerts"][0]["session_id"]
    finish(store, session_id)
    answer = await run(
        post("grafana", fixture_bytes("grafana_resolved.json"), auth_headers("bearer")),
        store,
        bus,
        config=config,
    )
    assert answer.body["alerts"][0] == {
        "fingerprint": "3e9b0f61c2d4a857",
        "session_id": session_id,
        "outcome": "resolved",
    }
    assert not store.sessions[session_id].cancel_requested


# ─── publish failures ─────────────────────────────────────────────────────────


class FailingAfter(RecordingBus):
    """Publishes ``good`` messages, then fails like an unreachable Pub/Sub."""

    def __init__(self, good: int) -> None:
        super().__init__()
        self.good = good

    async def publish(self, message: StepMessage) -> str:
        if len(self.published) >= self.good:
            raise ConnectionError("pubsub down")
        return await super().publish(message)


async def test_a_publish_failure_is_503_and_leaves_nothing_half_created() -> None:
    store, bus = MemoryAlertStore(), FailingAfter(0)
    body = fixture_bytes("alertmanager_firing_group.json")
    response = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    assert response.status == 503
    assert response.body["error"]["message"] == "queue unavailable, retry"
    assert nothing_written(store, bus)


async def test_the_retry_after_a_publish_failure_creates_each_session_once() -> None:
    store, bus = MemoryAlertStore(), FailingAfter(1)
    body = fixture_bytes("alertmanager_firing_group.json")
    failed = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    assert failed.status == 503
    # The first alert's session was published and stays; the second was removed.
    assert len(store.sessions) == len(store.claims) == len(bus.published) == 1
    [kept] = store.sessions
    bus.good = 10
    retried = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    assert retried.status == 202
    entries = retried.body["alerts"]
    assert sorted(e["outcome"] for e in entries) == ["created", "duplicate"]
    assert next(e for e in entries if e["outcome"] == "duplicate")["session_id"] == kept
    assert len(store.sessions) == len(bus.published) == 2


# ─── rejections write nothing ─────────────────────────────────────────────────


def signed_pagerduty(body: bytes, secret: str = PD_SECRET) -> HttpRequest:
    return post("pagerduty", body, {"x-pagerduty-signature": f"v1={signature_for(secret, body)}"})


def _bad_signature() -> HttpRequest:
    body = fixture_bytes("pagerduty_incident_triggered.json")
    return post("pagerduty", body, {"x-pagerduty-signature": f"v1={signature_for('wrong', body)}"})


def _tampered() -> HttpRequest:
    body = fixture_bytes("pagerduty_incident_triggered.json")
    signature = signature_for(PD_SECRET, body)
    return post(
        "pagerduty",
        body.replace(b"checkout-api", b"checkout-apx"),
        {"x-pagerduty-signature": f"v1={signature}"},
    )


AM = fixture_bytes("alertmanager_firing_group.json")
AM_API = "alertmanager/api/v2/alerts"
GRAFANA_AM = fixture_bytes("grafana_alertmanager_firing.json")

REJECTIONS: dict[str, tuple[HttpRequest, int, str]] = {
    "no-key-gets-a-basic-challenge": (post("alertmanager", AM), 401, "missing API key"),
    "wrong-bearer-key": (post("alertmanager", AM, auth_headers("bearer", "nope")), 401, "invalid"),
    "wrong-basic-password": (post("grafana", AM, auth_headers("basic", "nope")), 401, "invalid"),
    "malformed-basic": (
        post("alertmanager", AM, {"authorization": "Basic !!!"}),
        401,
        "malformed basic auth",
    ),
    "pagerduty-bad-signature": (_bad_signature(), 401, "does not match"),
    "pagerduty-tampered-body": (_tampered(), 401, "does not match"),
    "pagerduty-no-signature": (
        post("pagerduty", fixture_bytes("pagerduty_incident_triggered.json")),
        401,
        "missing X-PagerDuty-Signature",
    ),
    "pagerduty-key-is-not-enough-once-signed": (
        post(
            "pagerduty", fixture_bytes("pagerduty_incident_triggered.json"), auth_headers("bearer")
        ),
        401,
        "missing X-PagerDuty-Signature",
    ),
    "get-is-405": (post("alertmanager", b"", auth_headers("bearer"), method="GET"), 405, "GET"),
    "unknown-source-is-404": (post("nagios", AM, auth_headers("bearer")), 404, "no route"),
    "text-plain-is-415": (
        post("alertmanager", AM, auth_headers("bearer"), content_type="text/plain"),
        415,
        "application/json",
    ),
    "malformed-json-is-400": (
        post("alertmanager", b'{"version": "4",', auth_headers("bearer")),
        400,
        "malformed JSON",
    ),
    "int-beyond-int64-is-400": (
        post("grafana", b'{"alerts": [], "n": 99999999999999999999}', auth_headers("bearer")),
        400,
        "64-bit",
    ),
    "wrong-version-is-422": (
        post(
            "alertmanager", AM.replace(b'"version": "4"', b'"version": "3"'), auth_headers("bearer")
        ),
        422,
        "does not match",
    ),
    "pagerduty-shape-is-422": (signed_pagerduty(b'{"event": {"id": 1}}'), 422, "does not match"),
    "api-no-key-gets-a-basic-challenge": (post(AM_API, GRAFANA_AM), 401, "missing API key"),
    "api-wrong-basic-password": (
        post(AM_API, GRAFANA_AM, auth_headers("basic", "nope")),
        401,
        "invalid",
    ),
    "api-get-is-405": (post(AM_API, b"", auth_headers("basic"), method="GET"), 405, "GET"),
    "api-text-plain-is-415": (
        post(AM_API, GRAFANA_AM, auth_headers("basic"), content_type="text/plain"),
        415,
        "application/json",
    ),
    "api-a-webhook-body-is-422": (
        post(AM_API, AM, auth_headers("basic")),
        422,
        "must be a JSON array of alerts",
    ),
    "api-unknown-version-is-404": (
        post("alertmanager/api/v3/alerts", GRAFANA_AM, auth_headers("basic")),
        404,
        "no route",
    ),
}


@pytest.mark.parametrize("case", sorted(REJECTIONS))
async def test_rejections_write_and_publish_nothing(case: str) -> None:
    request, status, message = REJECTIONS[case]
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(request, store, bus)
    assert response.status == status, response.body
    assert message in response.body["error"]["message"]
    assert nothing_written(store, bus)
    if status == 401 and request.path != "/alerts/pagerduty":
        assert response.headers["WWW-Authenticate"] == BASIC_CHALLENGE
    if status == 405:
        assert response.headers["Allow"] == "POST"


async def test_wrong_shape_names_the_field() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    body = AM.replace(b'"version": "4"', b'"version": "3"')
    response = await run(post("alertmanager", body, auth_headers("bearer")), store, bus)
    assert [d["field"] for d in response.body["error"]["details"]] == ["version"]


async def test_an_oversized_body_is_413() -> None:
    settings = Settings(TARSY_API_KEY=KEY, TARSY_MAX_ALERT_BYTES=100)
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(
        post("alertmanager", AM, auth_headers("bearer")), store, bus, settings=settings
    )
    assert response.status == 413
    assert nothing_written(store, bus)


async def test_without_a_configured_key_the_routes_are_closed() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(
        post("alertmanager", AM, auth_headers("bearer")), store, bus, settings=Settings()
    )
    assert response.status == 503
    assert "TARSY_API_KEY" in response.body["error"]["message"]
    assert nothing_written(store, bus)


async def test_auth_disabled_for_local_runs() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    settings = Settings(TARSY_AUTH_DISABLED=True)
    response = await run(post("alertmanager", AM), store, bus, settings=settings)
    assert outcomes(response) == ["created", "created"]


async def test_plain_alerts_route_is_unchanged() -> None:
    bus = RecordingBus()
    request = HttpRequest(
        method="POST",
        path="/alerts",
        headers={"content-type": "application/json", **auth_headers("bearer")},
        body=fixture_bytes("alertmanager_firing_group.json"),
    )
    response = await run(request, cast(Any, _PlainStore()), bus)
    assert response.status == 422
    assert "alert_type" in json.dumps(response.body["error"]["details"])


class _PlainStore:
    async def create_session(self, session: Session) -> None:
        raise AssertionError("nothing is written for a 422")


# ─── the Alertmanager API route (Grafana's "Alertmanager" contact point) ─────


@pytest.mark.parametrize(
    ("path", "auth"),
    [
        (AM_API, "basic"),  # what Grafana sends: basicAuthUser + basicAuthPassword
        (AM_API, "bearer"),
        (AM_API, "x-api-key"),
        ("alertmanager/api/v1/alerts", "basic"),  # Grafana before 2024
        (f"{AM_API}/", "basic"),
    ],
)
async def test_alertmanager_api_posts_create_one_session_per_firing_alert(
    path: str, auth: str
) -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    response = await run(post(path, GRAFANA_AM, auth_headers(auth)), store, bus)
    # 200, not 202: the only success Alertmanager's API documents.
    assert response.status == 200, response.body
    assert outcomes(response) == ["created", "created"]
    entries = response.body["alerts"]
    assert [e["fingerprint"] for e in entries] == ["643a98a69832f543", "4568dbe401abfbd3"]
    assert sorted(e["session_id"] for e in entries) == sorted(store.sessions)
    assert bus.published == [
        StepMessage(session_id=e["session_id"], kind="start_session") for e in entries
    ]
    first = store.sessions[entries[0]["session_id"]]
    assert (first.source, first.alert_type, first.chain_id) == (
        "alertmanager",
        "HighRequestLatency",
        "metrics",
    )
    assert first.runbook == "https://runbooks.example.com/checkout/high-latency"
    assert first.metadata == {"fingerprint": "643a98a69832f543"}
    data = json.loads(first.alert_data)
    assert data["labels"]["service"] == "checkout-api"
    assert (data["status"], data["startsAt"], data["endsAt"]) == (
        "firing",
        "2026-11-21T14:02:10Z",
        "",
    )


async def test_alertmanager_api_repeat_is_a_duplicate_naming_the_session() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    first = await run(post(AM_API, GRAFANA_AM, auth_headers("basic")), store, bus)
    again = await run(post(AM_API, GRAFANA_AM, auth_headers("basic")), store, bus)
    assert again.status == 200
    assert again.body["alerts"] == [
        {**entry, "outcome": "duplicate"} for entry in first.body["alerts"]
    ]
    assert len(store.sessions) == len(bus.published) == 2


async def test_alertmanager_api_resolution_is_recorded_and_creates_nothing() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    fired = await run(post(AM_API, GRAFANA_AM, auth_headers("basic")), store, bus)
    session_id = fired.body["alerts"][0]["session_id"]
    resolved_body = fixture_bytes("grafana_alertmanager_resolved.json")
    answer = await run(post(AM_API, resolved_body, auth_headers("basic")), store, bus)
    assert answer.status == 200
    assert answer.body["alerts"] == [
        {"fingerprint": "643a98a69832f543", "session_id": session_id, "outcome": "resolved"}
    ]
    assert len(store.sessions) == len(bus.published) == 2
    assert store.sessions[session_id].resolved_at is not None
    other = fired.body["alerts"][1]["session_id"]
    assert store.sessions[other].resolved_at is None


async def test_alertmanager_api_takes_the_alertmanager_settings() -> None:
    config = config_with("  alertmanager:\n    alert_type_from: labels.service\n")
    store, bus = MemoryAlertStore(), RecordingBus()
    await run(post(AM_API, GRAFANA_AM, auth_headers("basic")), store, bus, config=config)
    assert {s.alert_type for s in store.sessions.values()} == {"checkout-api", "checkout-worker"}


async def test_alertmanager_api_bad_alert_names_its_field_and_writes_nothing() -> None:
    store, bus = MemoryAlertStore(), RecordingBus()
    alerts = json.loads(GRAFANA_AM)
    alerts[1]["endsAt"] = "2026-11-21T14:00:00Z"  # before its startsAt
    response = await run(
        post(AM_API, json.dumps(alerts).encode(), auth_headers("basic")), store, bus
    )
    assert response.status == 422
    assert [d["field"] for d in response.body["error"]["details"]] == ["1.endsAt"]
    assert nothing_written(store, bus)


async def test_alertmanager_api_publish_failure_is_503() -> None:
    store, bus = MemoryAlertStore(), FailingAfter(0)
    response = await run(post(AM_API, GRAFANA_AM, auth_headers("basic")), store, bus)
    assert response.status == 503
    assert nothing_written(store, bus)


# ─── SNS ──────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def sns_signer() -> Signer:
    return make_signer()


@pytest.fixture(scope="module")
def sns_server() -> Iterator[Loopback]:
    with loopback_server() as server:
        yield server


@pytest.fixture
def sns(sns_server: Loopback, sns_signer: Signer) -> Iterator[tuple[Loopback, Settings]]:
    """A loopback SNS endpoint serving the certificate and answering confirmations."""
    DEFAULT_CACHE.clear()
    sns_server.routes.clear()
    sns_server.hits.clear()
    sns_server.routes[CERT_PATH] = (200, sns_signer.pem)
    sns_server.routes["/"] = (200, b"<ConfirmSubscriptionResponse/>")
    settings = Settings(
        TARSY_API_KEY=KEY, TARSY_SNS_ENDPOINT_URL=f"http://127.0.0.1:{sns_server.port}"
    )
    yield sns_server, settings
    DEFAULT_CACHE.clear()


def sns_post(message: dict[str, Any], auth: str = "basic") -> HttpRequest:
    return post(
        "sns",
        json.dumps(message).encode(),
        auth_headers(auth, KEY),
        content_type="text/plain; charset=UTF-8",
    )


async def test_sns_subscription_confirmation_is_confirmed_and_creates_nothing(
    sns: tuple[Loopback, Settings], sns_signer: Signer
) -> None:
    server, settings = sns
    store, bus = MemoryAlertStore(), RecordingBus()
    message = signed("sns_subscription_confirmation.json", sns_signer)
    response = await run(sns_post(message), store, bus, settings=settings)
    assert response.status == 200, response.body
    assert response.body["subscription"] == "confirmed"
    assert server.hits_for("/") == 1
    assert any("Action=ConfirmSubscription" in hit for hit in server.hits)
    assert nothing_written(store, bus)


async def test_sns_alarm_then_ok_creates_then_resolves(
    sns: tuple[Loopback, Settings], sns_signer: Signer
) -> None:
    _, settings = sns
    store, bus = MemoryAlertStore(), RecordingBus()
    alarm = await run(
        sns_post(signed("sns_notification_alarm.json", sns_signer)), store, bus, settings=settings
    )
    assert outcomes(alarm) == ["created"]
    session_id = alarm.body["alerts"][0]["session_id"]
    assert store.sessions[session_id].source == "sns"
    ok = await run(
        sns_post(signed("sns_notification_ok.json", sns_signer)), store, bus, settings=settings
    )
    assert ok.body["alerts"][0]["outcome"] == "resolved"
    assert ok.body["alerts"][0]["session_id"] == session_id
    assert store.sessions[session_id].resolved_at is not None
    assert len(store.sessions) == 1


async def test_sns_unsubscribe_confirmation_is_noted_only(
    sns: tuple[Loopback, Settings], sns_signer: Signer
) -> None:
    server, settings = sns
    store, bus = MemoryAlertStore(), RecordingBus()
    message = signed("sns_unsubscribe_confirmation.json", sns_signer)
    response = await run(sns_post(message), store, bus, settings=settings)
    assert (response.status, response.body["subscription"]) == (200, "unsubscribed")
    assert server.hits_for("/") == 0
    assert nothing_written(store, bus)


@pytest.mark.parametrize(
    ("case", "status"),
    [("no-key", 401), ("tampered", 401), ("other-topic", 403), ("cert-elsewhere", 401)],
)
async def test_sns_rejections_write_nothing(
    sns: tuple[Loopback, Settings], sns_signer: Signer, case: str, status: int
) -> None:
    server, settings = sns
    store, bus = MemoryAlertStore(), RecordingBus()
    message = signed("sns_notification_alarm.json", sns_signer)
    auth = "basic"
    if case == "no-key":
        auth = "none"
    elif case == "tampered":
        message["Message"] = message["Message"].replace("checkout-db", "payments-db")
    elif case == "other-topic":
        message = signed(
            "sns_notification_alarm.json",
            sns_signer,
            TopicArn="arn:aws:sns:eu-west-1:111122223333:someone-elses",
        )
    else:
        message["SigningCertURL"] = "https://attacker.example.com/SimpleNotificationService-x.pem"
    response = await run(sns_post(message, auth), store, bus, settings=settings)
    assert response.status == status, response.body
    assert nothing_written(store, bus)
    if case == "no-key":
        assert response.headers["WWW-Authenticate"] == BASIC_CHALLENGE
    if case in ("other-topic", "cert-elsewhere", "no-key"):
        assert server.hits == []  # refused before anything was fetched


async def test_a_malformed_sns_endpoint_setting_is_503(sns_signer: Signer) -> None:
    settings = Settings(TARSY_API_KEY=KEY, TARSY_SNS_ENDPOINT_URL="ftp://127.0.0.1:1")
    store, bus = MemoryAlertStore(), RecordingBus()
    message = signed("sns_notification_alarm.json", sns_signer)
    response = await run(sns_post(message), store, bus, settings=settings)
    assert response.status == 503
    assert "TARSY_SNS_ENDPOINT_URL" in response.body["error"]["message"]
    assert nothing_written(store, bus)

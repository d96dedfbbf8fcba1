"""Native alert sources end to end: the real ingest function, emulators, moto, Alertmanager.

The local stack's emulators and step function run the sessions; the alert
routes are served by a second instance of the real ingest function
(functions-framework, ``functions/ingest/main.py``) wired to the same
emulators and topic, whose environment adds what these senders need: a
PagerDuty signing secret, an ``alert_sources`` block allowing the moto SNS
topic, and ``TARSY_SNS_ENDPOINT_URL`` so SNS certificates and confirmations
are fetched from moto instead of AWS.

Every wait is a bounded poll with a deadline far above the expected time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx
import pytest
import yaml
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from google.cloud import firestore
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.server import ThreadedMotoServer
from moto.sns.models import sns_backends

from tarsy.intake.sources.pagerduty_signature import signature_for
from tarsy.models import AlertFingerprint, ExecutionStatus, Session
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.fakes.fake_gemini import FakeGemini
from tarsy_dev.fakes.standin import ScenarioStandIn
from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, stop, wait_until
from tarsy_dev.localstack.stack import Stack

from .alertmanager import Alertmanager, start_alertmanager, stop_alertmanager
from .conftest import ROOT, SCENARIO, Tap, stack_config_path
from .timeline import is_evidence, model_timeline

FIXTURES = ROOT / "tests" / "fixtures" / "sources"
PD_SECRET = "pd-integration-signing-secret"
AM_API = "alertmanager/api/v2/alerts"  # a Grafana Alertmanager contact point's URL + /api/v2/alerts
REGION = "us-east-1"
TOPIC_NAME = "tarsy-cloudwatch-alarms"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{DEFAULT_ACCOUNT_ID}:{TOPIC_NAME}"
ALARM_ARN = f"arn:aws:cloudwatch:{REGION}:{DEFAULT_ACCOUNT_ID}:alarm:checkout-db-cpu-high"
# Waits: each is expected to take well under a second (Alertmanager: a few seconds).
DEADLINE_S = 60.0


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def eventually(check: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not true after {timeout:.0f}s")
        time.sleep(0.1)


# ─── what Firestore holds ─────────────────────────────────────────────────────


@pytest.fixture
def db(stack: Stack) -> Iterator[firestore.Client]:
    client = firestore.Client(project=stack.project_id)
    yield client
    client.close()  # type: ignore[no-untyped-call]


def documents(db: firestore.Client, collection: str) -> list[dict[str, Any]]:
    return [snap.to_dict() or {} for snap in db.collection(collection).stream()]


def sessions(db: firestore.Client, source: str | None = None) -> list[dict[str, Any]]:
    return [s for s in documents(db, "sessions") if source is None or s.get("source") == source]


# ─── a second ingest instance for the senders ────────────────────────────────


class SnsRouter:
    """Forwards SNS URL fetches to moto's server, marked as SNS requests.

    moto's server tells services apart by the SigV4 credential scope of a
    request, not by its Host; the certificate download and the confirmation
    visit are unsigned (as AWS expects), so this hop adds a scope naming SNS
    and the region of the message's host. tarsy reaches it through
    ``TARSY_SNS_ENDPOINT_URL``, with the ``Host`` of the URL in the message.
    """

    def __init__(self, moto_url: str) -> None:
        moto = moto_url

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host = self.headers.get("Host", "")
                region = host.split(".")[1] if host.startswith("sns.") else REGION
                scope = f"tarsy/{datetime.now(UTC):%Y%m%d}/{region}/sns/aws4_request"
                auth = f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"
                answer = httpx.get(moto + self.path, headers={"Authorization": auth}, timeout=10)
                self.send_response(answer.status_code)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@dataclass
class Moto:
    url: str
    router: SnsRouter

    def sns(self) -> Any:
        return boto3.client(
            "sns",
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="module")
def moto() -> Iterator[Moto]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    router = SnsRouter(url)
    try:
        yield Moto(url=url, router=router)
    finally:
        router.close()
        server.stop()


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass
class Ingest:
    url: str
    api_key: str
    process: ProcessInfo

    def post(
        self, source: str, body: bytes, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        content_type = "text/plain; charset=UTF-8" if source == "sns" else "application/json"
        return httpx.post(
            f"{self.url}/alerts/{source}",
            content=body,
            headers={"Content-Type": content_type, **(headers or {})},
            timeout=30,
            **kw,
        )

    def basic(self) -> dict[str, str]:
        return {"Authorization": basic_auth("alertmanager", self.api_key)}

    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


@pytest.fixture(scope="module")
def ingest(stack: Stack, moto: Moto, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingest]:
    state = tmp_path_factory.mktemp("sources-ingest")
    config = yaml.safe_load(stack_config_path(stack).read_text()) or {}
    config["alert_sources"] = {"sns": {"allowed_topic_arns": [TOPIC_ARN]}}
    config_path = state / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        **{
            k: v
            for k, v in stack.client_env().items()
            if k in ("GOOGLE_CLOUD_PROJECT", "FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")
        },
        "TARSY_API_KEY": stack.api_key,
        "TARSY_PUBLIC_API_URL": stack.api_url,
        "TARSY_STEPS_TOPIC": stack.steps_topic,
        "TARSY_CONFIG_PATH": str(config_path),
        "TARSY_LOG_FORMAT": "console",
        "TARSY_PAGERDUTY_SIGNING_SECRET": PD_SECRET,
        "TARSY_SNS_ENDPOINT_URL": moto.router.url,
    }
    argv = [
        sys.executable, "-m", "functions_framework",
        "--target", "ingest",
        "--source", str(ROOT / "functions" / "ingest" / "main.py"),
        "--signature-type", "http",
        "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip
    process = spawn("sources-ingest", argv, log_dir=state, env=env, cwd=ROOT, url=url)
    try:
        wait_until(http_ok(f"{url}/healthz"), timeout=DEADLINE_S, what="ingest", process=process)
        yield Ingest(url=url, api_key=stack.api_key, process=process)
    finally:
        stop(process)


def pagerduty_headers(body: bytes, secret: str = PD_SECRET) -> dict[str, str]:
    return {"X-PagerDuty-Signature": f"v1={signature_for(secret, body)}"}


# ─── each source, its own auth ────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("source", "name", "auth", "expected"),
    [
        ("alertmanager", "alertmanager_firing_group.json", "basic", ["created", "created"]),
        ("grafana", "grafana_firing.json", "bearer", ["created"]),
        ("pagerduty", "pagerduty_incident_triggered.json", "signature", ["created"]),
        ("pagerduty", "pagerduty_incident_acknowledged.json", "signature", ["ignored"]),
    ],
)
def test_each_source_is_accepted_with_its_own_auth(
    ingest: Ingest,
    db: firestore.Client,
    client: TarsyClient,
    source: str,
    name: str,
    auth: str,
    expected: list[str],
) -> None:
    body = fixture(name)
    headers = {
        "basic": ingest.basic(),
        "bearer": ingest.bearer(),
        "signature": pagerduty_headers(body),
    }[auth]
    response = ingest.post(source, body, headers)
    assert response.status_code == 202, response.text
    entries = response.json()["alerts"]
    assert [e["outcome"] for e in entries] == expected
    created = {e["session_id"] for e in entries if e["outcome"] == "created"}
    assert {s["session_id"] for s in sessions(db, source)} == created
    assert len(documents(db, "alert_fingerprints")) == len(created)
    for session_id in created:
        view = client.session(session_id)  # the api function reads what ingest wrote
        assert view.session["source"] == source
        assert view.session["resolved_at"] is None


def test_concurrent_deliveries_of_one_notification_create_one_session_per_alert(
    ingest: Ingest, db: firestore.Client, tap: Tap
) -> None:
    body = fixture("alertmanager_firing_group.json")
    deliveries = 8
    start = threading.Barrier(deliveries)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def deliver() -> None:
        start.wait(timeout=DEADLINE_S)
        response = ingest.post("alertmanager", body, ingest.basic())
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=deliver) for _ in range(deliveries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE_S)
    assert [a.status_code for a in answers] == [202] * deliveries
    by_fingerprint: dict[str, list[tuple[str, str]]] = {}
    for answer in answers:
        for entry in answer.json()["alerts"]:
            by_fingerprint.setdefault(entry["fingerprint"], []).append(
                (entry["outcome"], entry["session_id"])
            )
    assert sorted(by_fingerprint) == ["5f1a3c2b9e8d7a64", "a07c44e1d2b3f985"]
    for entries in by_fingerprint.values():
        assert sorted(outcome for outcome, _ in entries) == ["created"] + ["duplicate"] * 7
        assert len({session_id for _, session_id in entries}) == 1  # all name the same one
    stored = sessions(db, "alertmanager")
    assert len(stored) == 2
    assert len(documents(db, "alert_fingerprints")) == 2
    started = [m.session_id for m in tap.drain(wait=2.0) if m.kind == "start_session"]
    assert sorted(started) == sorted(s["session_id"] for s in stored)


def test_a_resolution_is_recorded_on_its_session(
    ingest: Ingest, db: firestore.Client, client: TarsyClient
) -> None:
    fired = ingest.post("grafana", fixture("grafana_firing.json"), ingest.bearer())
    [entry] = fired.json()["alerts"]
    resolved = ingest.post("grafana", fixture("grafana_resolved.json"), ingest.basic())
    assert resolved.status_code == 202
    assert resolved.json()["alerts"] == [
        {
            "fingerprint": "3e9b0f61c2d4a857",
            "session_id": entry["session_id"],
            "outcome": "resolved",
        }
    ]
    [stored] = sessions(db)
    assert stored["resolved_at"] is not None
    assert client.session(entry["session_id"]).session["resolved_at"] is not None


def test_grafana_alertmanager_contact_point_creates_dedups_and_resolves(
    ingest: Ingest, db: firestore.Client, client: TarsyClient
) -> None:
    """Grafana's "Alertmanager" contact point, posting to ``{url}/api/v2/alerts``.

    There is no Grafana binary here: the bodies are hand-written from
    grafana/alerting's Alertmanager notifier (a JSON array of Go's
    ``types.Alert``) and Alertmanager's ``postableAlert`` in its OpenAPI spec,
    sent with basic auth as that contact point sends it.
    """
    grafana = {"Authorization": basic_auth("grafana", ingest.api_key)}
    firing = fixture("grafana_alertmanager_firing.json")

    fired = ingest.post(AM_API, firing, grafana)
    assert fired.status_code == 200, fired.text
    entries = fired.json()["alerts"]
    assert [e["outcome"] for e in entries] == ["created", "created"]
    stored = sessions(db, "alertmanager")
    assert {s["session_id"] for s in stored} == {e["session_id"] for e in entries}
    assert {s["runbook"] for s in stored} == {
        "https://runbooks.example.com/checkout/high-latency",
        None,
    }

    again = ingest.post(AM_API, firing, grafana)
    assert again.status_code == 200, again.text
    assert again.json()["alerts"] == [{**e, "outcome": "duplicate"} for e in entries]
    assert len(sessions(db)) == 2 and len(documents(db, "alert_fingerprints")) == 2

    resolved = ingest.post(AM_API, fixture("grafana_alertmanager_resolved.json"), grafana)
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["alerts"] == [{**entries[0], "outcome": "resolved"}]
    assert len(sessions(db)) == 2
    assert client.session(entries[0]["session_id"]).session["resolved_at"] is not None
    assert client.session(entries[1]["session_id"]).session["resolved_at"] is None


def test_a_bad_signature_is_401_and_writes_nothing(ingest: Ingest, db: firestore.Client) -> None:
    body = fixture("pagerduty_incident_triggered.json")
    forged = ingest.post("pagerduty", body, pagerduty_headers(body, "not-the-secret"))
    assert forged.status_code == 401
    assert "does not match" in forged.json()["error"]["message"]
    keyless = ingest.post("sns", fixture("sns_notification_alarm.json"))
    assert keyless.status_code == 401
    assert keyless.headers["WWW-Authenticate"].startswith('Basic realm="tarsy"')
    assert documents(db, "sessions") == [] and documents(db, "alert_fingerprints") == []


# ─── SNS, from moto ───────────────────────────────────────────────────────────


def alarm_message(state: str, changed: str) -> str:
    return json.dumps(
        {
            "AlarmName": "checkout-db-cpu-high",
            "AlarmDescription": "CPU of the checkout database above 90%",
            "AWSAccountId": DEFAULT_ACCOUNT_ID,
            "NewStateValue": state,
            "NewStateReason": "Threshold Crossed",
            "StateChangeTime": changed,
            "Region": "US East (N. Virginia)",
            "AlarmArn": ALARM_ARN,
            "OldStateValue": "OK" if state == "ALARM" else "ALARM",
            "Trigger": {"MetricName": "CPUUtilization", "Namespace": "AWS/RDS"},
        }
    )


def subscription_confirmation(subscription_arn: str) -> dict[str, Any]:
    """A SubscriptionConfirmation as SNS sends it, signed with moto's key for the subscription.

    moto confirms HTTP(S) subscriptions by itself and never posts this message;
    it is built here from AWS's documented fields and signed like moto signs
    its notifications, with the certificate moto serves.
    """
    subscription = sns_backends[DEFAULT_ACCOUNT_ID][REGION].subscriptions[subscription_arn]
    # Signing anything makes moto publish the certificate of the subscription's key.
    cert_url = subscription.get_post_data("seed", str(uuid.uuid4()), None)["SigningCertURL"]
    token = uuid.uuid4().hex * 2
    message: dict[str, Any] = {
        "Type": "SubscriptionConfirmation",
        "MessageId": str(uuid.uuid4()),
        "Token": token,
        "TopicArn": TOPIC_ARN,
        "Message": f"You have chosen to subscribe to the topic {TOPIC_ARN}.",
        "SubscribeURL": (
            f"https://sns.{REGION}.amazonaws.com/?Action=ConfirmSubscription"
            f"&TopicArn={TOPIC_ARN}&Token={token}"
        ),
        "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "SignatureVersion": "2",
        "SigningCertURL": cert_url,
    }
    signed = "".join(
        f"{name}\n{message[name]}\n"
        for name in (
            "Message",
            "MessageId",
            "SubscribeURL",
            "Timestamp",
            "Token",
            "TopicArn",
            "Type",
        )
    ).encode()
    signature = subscription.private_key().sign(signed, padding.PKCS1v15(), hashes.SHA256())
    message["Signature"] = base64.b64encode(signature).decode()
    return message


def test_sns_from_moto_confirms_then_creates_dedups_and_resolves(
    ingest: Ingest, moto: Moto, db: firestore.Client
) -> None:
    sns = moto.sns()
    assert sns.create_topic(Name=TOPIC_NAME)["TopicArn"] == TOPIC_ARN
    endpoint = ingest.url.replace("http://", f"http://tarsy:{ingest.api_key}@") + "/alerts/sns"
    subscription_arn = sns.subscribe(TopicArn=TOPIC_ARN, Protocol="http", Endpoint=endpoint)[
        "SubscriptionArn"
    ]

    confirmation = subscription_confirmation(subscription_arn)
    confirmed = ingest.post("sns", json.dumps(confirmation).encode(), ingest.basic())
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["subscription"] == "confirmed"
    assert documents(db, "sessions") == []

    # moto signs notifications without their Subject: publish without one.
    sns.publish(TopicArn=TOPIC_ARN, Message=alarm_message("ALARM", "2026-11-23T05:15:42.871+0000"))
    eventually(lambda: len(sessions(db, "sns")) == 1, "a session for the ALARM")
    [session] = sessions(db, "sns")
    assert "checkout-db-cpu-high" in session["alert_data"]

    # The same state change delivered again (a new MessageId): a duplicate.
    sns.publish(TopicArn=TOPIC_ARN, Message=alarm_message("ALARM", "2026-11-23T05:15:42.871+0000"))
    sns.publish(TopicArn=TOPIC_ARN, Message=alarm_message("OK", "2026-11-23T05:40:00.000+0000"))
    eventually(
        lambda: sessions(db, "sns")[0].get("resolved_at") is not None, "the OK recorded as resolved"
    )
    assert len(sessions(db, "sns")) == 1
    assert len(documents(db, "alert_fingerprints")) == 1


def test_sns_from_a_topic_not_allowed_is_403(
    ingest: Ingest, moto: Moto, db: firestore.Client
) -> None:
    sns = moto.sns()
    other = sns.create_topic(Name="someone-elses-topic")["TopicArn"]
    endpoint = ingest.url.replace("http://", f"http://tarsy:{ingest.api_key}@") + "/alerts/sns"
    arn = sns.subscribe(TopicArn=other, Protocol="http", Endpoint=endpoint)["SubscriptionArn"]
    post = (
        sns_backends[DEFAULT_ACCOUNT_ID][REGION]
        .subscriptions[arn]
        .get_post_data(
            alarm_message("ALARM", "2026-11-23T06:00:00.000+0000"), str(uuid.uuid4()), None
        )
    )
    answer = ingest.post("sns", json.dumps(post).encode(), ingest.basic())
    assert answer.status_code == 403
    assert documents(db, "sessions") == []


# ─── a real Prometheus Alertmanager ───────────────────────────────────────────


@pytest.fixture
def alertmanager(ingest: Ingest, tmp_path: Path) -> Iterator[Alertmanager]:
    running = start_alertmanager(
        f"{ingest.url}/alerts/alertmanager", ingest.api_key, tmp_path / "alertmanager"
    )
    try:
        yield running
    finally:
        stop_alertmanager(running)


def pod_of(session: dict[str, Any]) -> str:
    return str(json.loads(session["alert_data"])["labels"]["pod"])


def test_a_real_alertmanager_one_session_per_alert_repeats_deduplicated_resolve_recorded(
    alertmanager: Alertmanager, db: firestore.Client
) -> None:
    labels = {
        "a": {"alertname": "TarsyCrashLoop", "namespace": "checkout", "pod": "api-0"},
        "b": {"alertname": "TarsyCrashLoop", "namespace": "checkout", "pod": "worker-0"},
    }
    for pod in labels.values():
        alertmanager.fire(pod, {"summary": "crash looping", "runbook_url": "https://rb.example/cl"})
    eventually(lambda: len(sessions(db, "alertmanager")) == 2, "one session per firing alert")
    sent_at_first, _ = alertmanager.webhook_counts()

    # repeat_interval is 2s: Alertmanager keeps re-sending both alerts; all are duplicates.
    eventually(
        lambda: alertmanager.webhook_counts()[0] >= sent_at_first + 3, "repeated notifications"
    )
    stored = sessions(db, "alertmanager")
    assert len(stored) == 2
    assert {pod_of(s) for s in stored} == {"api-0", "worker-0"}
    assert {s["runbook"] for s in stored} == {"https://rb.example/cl"}
    assert len(documents(db, "alert_fingerprints")) == 2

    alertmanager.resolve(labels["a"])

    def resolved_pods() -> set[str]:
        return {pod_of(s) for s in sessions(db, "alertmanager") if s.get("resolved_at")}

    eventually(lambda: resolved_pods() == {"api-0"}, "the resolution recorded")
    assert len(sessions(db, "alertmanager")) == 2
    assert alertmanager.webhook_counts()[1] == 0  # no delivery failed (auth, shape)


def test_a_real_alertmanager_and_amtool_agree_with_the_alertmanager_api_route(
    alertmanager: Alertmanager, ingest: Ingest, db: firestore.Client
) -> None:
    """The API route's fingerprint is the real Alertmanager's, and amtool can post to it.

    An alert fired into the real Alertmanager reaches tarsy by its webhook;
    the same labels posted to the API route are then a duplicate of that
    session. ``amtool``, a client generated from Alertmanager's v2 OpenAPI
    spec, pointed at tarsy as if it were an Alertmanager, fires a new alert
    and resolves the first one.
    """
    labels = {"alertname": "TarsyDiskFull", "instance": "db-1", "severity": "page"}
    alertmanager.fire(labels, {"summary": "disk full"})
    eventually(lambda: len(sessions(db, "alertmanager")) == 1, "the webhook's session")
    [webhook_session] = sessions(db, "alertmanager")

    same = json.dumps(
        [{"labels": dict(reversed(labels.items())), "endsAt": "0001-01-01T00:00:00Z"}]
    )
    answer = ingest.post(AM_API, same.encode(), ingest.basic())
    assert answer.status_code == 200, answer.text
    assert answer.json()["alerts"] == [
        {
            "fingerprint": webhook_session["metadata"]["fingerprint"],
            "session_id": webhook_session["session_id"],
            "outcome": "duplicate",
        }
    ]

    # amtool sends the URL's user and password as basic auth, to URL + /api/v2/alerts.
    as_alertmanager = ingest.url.replace("http://", f"http://grafana:{ingest.api_key}@")
    tarsy = replace(alertmanager, url=f"{as_alertmanager}/alerts/alertmanager")
    tarsy.fire({"alertname": "TarsyDiskSlow", "instance": "db-2"}, {"runbook_url": "https://rb/ds"})
    tarsy.resolve(labels)  # amtool has its answer: both are done

    stored = {s["session_id"]: s for s in sessions(db, "alertmanager")}
    assert len(stored) == 2
    assert stored[webhook_session["session_id"]].get("resolved_at") is not None
    [new] = [s for s in stored.values() if s["session_id"] != webhook_session["session_id"]]
    assert (new["alert_type"], new["runbook"], new.get("resolved_at")) == (
        "TarsyDiskSlow",
        "https://rb/ds",
        None,
    )


# ─── the store's claims against the Firestore emulator ───────────────────────


def claim_for(session: Session, key: str = "alert-1") -> AlertFingerprint:
    return AlertFingerprint(
        source="alertmanager",
        fingerprint=key,
        alert_key=key,
        resolve_key=f"resolve-{key}",
        session_id=session.session_id,
        created_at=session.created_at,
        expire_at=session.created_at + timedelta(hours=2),
    )


def new_session() -> Session:
    return Session(
        session_id=str(uuid.uuid4()),
        alert_type="TarsyStoreTest",
        alert_data="x" * 300_000,  # long enough to be stored in chunks
        chain_id="default",
        source="alertmanager",
    )


async def test_concurrent_claims_commit_one_session_and_nothing_of_the_others(store: Store) -> None:
    sessions_ = [new_session() for _ in range(5)]
    won = await asyncio.gather(
        *(store.create_alert_session(s, "dedup-1", claim_for(s)) for s in sessions_)
    )
    assert sorted(won) == [False] * 4 + [True]
    [winner] = [s for s, ok in zip(sessions_, won, strict=True) if ok]
    for session in sessions_:
        stored = await store.get_session(session.session_id)
        assert (stored is not None) == (session is winner)
    kept = await store.get_session(winner.session_id)
    assert kept is not None and kept.alert_data == winner.alert_data  # its chunks came along
    found = await store.get_alert_fingerprint("dedup-1")
    assert found is not None and found[0].session_id == winner.session_id


async def test_an_expired_claim_is_replaced_by_one_delivery_only(store: Store) -> None:
    first = new_session()
    assert await store.create_alert_session(first, "dedup-2", claim_for(first))
    found = await store.get_alert_fingerprint("dedup-2")
    assert found is not None
    _, read_at = found
    rivals = [new_session() for _ in range(3)]
    won = await asyncio.gather(
        *(store.create_alert_session(s, "dedup-2", claim_for(s), replacing=read_at) for s in rivals)
    )
    assert sorted(won) == [False, False, True]
    [winner] = [s for s, ok in zip(rivals, won, strict=True) if ok]
    replaced = await store.get_alert_fingerprint("dedup-2")
    assert replaced is not None and replaced[0].session_id == winner.session_id
    # A replacement read before that one is stale now.
    late = new_session()
    assert not await store.create_alert_session(late, "dedup-2", claim_for(late), replacing=read_at)
    assert await store.get_session(late.session_id) is None


async def test_resolution_lookup_and_removal(store: Store) -> None:
    older, newer = new_session(), new_session()
    newer = newer.model_copy(update={"created_at": older.created_at + timedelta(seconds=5)})
    assert await store.create_alert_session(older, "dedup-3a", claim_for(older, "k"))
    assert await store.create_alert_session(newer, "dedup-3b", claim_for(newer, "k"))
    claims = await store.alert_fingerprints_for("resolve-k")
    assert [c.session_id for c in claims] == [newer.session_id, older.session_id]
    now = datetime.now(UTC)
    assert await store.record_alert_resolution(newer.session_id, now)
    resolved = await store.get_session(newer.session_id)
    assert resolved is not None and resolved.resolved_at is not None
    assert not await store.record_alert_resolution(str(uuid.uuid4()), now)
    await store.delete_alert_session(older.session_id, "dedup-3a")
    assert await store.get_session(older.session_id) is None
    assert await store.get_alert_fingerprint("dedup-3a") is None


def test_a_repeat_after_the_dedup_window_starts_a_new_session(
    ingest: Ingest, db: firestore.Client
) -> None:
    body = fixture("pagerduty_incident_triggered.json")
    first = ingest.post("pagerduty", body, pagerduty_headers(body)).json()["alerts"][0]
    session_ref = db.collection("sessions").document(first["session_id"])

    def finished() -> bool:
        status = (session_ref.get().to_dict() or {}).get("status")
        return status in ("completed", "failed", "timed_out", "cancelled")

    eventually(finished, "the first investigation to end")
    again = ingest.post("pagerduty", body, pagerduty_headers(body)).json()["alerts"][0]
    assert (again["outcome"], again["session_id"]) == ("duplicate", first["session_id"])
    # It ended two hours ago: past the default one-hour window.
    session_ref.update({"completed_at": datetime.now(UTC) - timedelta(hours=2)})
    later = ingest.post("pagerduty", body, pagerduty_headers(body)).json()["alerts"][0]
    assert later["outcome"] == "created"
    assert later["session_id"] != first["session_id"]
    [claim] = documents(db, "alert_fingerprints")
    assert claim["session_id"] == later["session_id"]


def test_a_real_alertmanager_kube_pod_crash_looping_runs_the_kubernetes_chain_with_tools(
    alertmanager: Alertmanager, db: firestore.Client, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    """The alert type is the alertname, which no chain lists: the built-in rule routes it."""
    fake_gemini.responder = ScenarioStandIn(SCENARIO)
    data = load_scenario(SCENARIO).alert.data
    assert isinstance(data, dict)
    [alert] = data["alerts"]  # the scenario's own Alertmanager alert
    labels: dict[str, str] = alert["labels"]
    alertmanager.fire(labels, {"summary": alert["annotations"]["summary"]})
    eventually(lambda: len(sessions(db, "alertmanager")) == 1, "the webhook's session")
    [stored] = sessions(db, "alertmanager")
    assert (stored["alert_type"], stored["chain_id"]) == ("KubePodCrashLooping", "kubernetes")
    assert stored["routing"] == {
        "by": "rule",
        "rule": "kube-prometheus",
        "reason": "alertname 'KubePodCrashLooping' matches 'Kube*'",
    }

    *_, view = client.watch(stored["session_id"], poll_interval=0.25, timeout=DEADLINE_S * 2)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    [agent] = [e for e in view.executions if e["role"] == "agent"]
    assert agent["agent"] == "kubernetes-investigator"
    calls = [e for e in agent["timeline"] if e["type"] == "mcp_tool_call"]
    assert calls, "the investigation called no tool"
    assert {e["metadata"]["server_name"] for e in calls} == {"kubernetes"}
    # The model's own calls all answered (the gather step may ask a cluster for a kind it
    # does not serve, such as ResourceQuota here: an error result, recorded as evidence).
    assert not [e for e in calls if e["metadata"]["is_error"] and not is_evidence(e)]
    assert view.session.get("final_analysis")


METRICS_SCENARIO = "cpu-throttling-latency"


def test_a_real_alertmanager_latency_alert_runs_the_metrics_chain_on_the_backfilled_history(
    alertmanager: Alertmanager, db: firestore.Client, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    """Its generator URL carries the rule's PromQL: the metrics chain, answered by Prometheus."""
    scenario = load_scenario(METRICS_SCENARIO)
    fake_gemini.responder = ScenarioStandIn(scenario)
    data = scenario.alert.data
    assert isinstance(data, dict)
    labels: dict[str, str] = data["labels"]
    alertmanager.amtool(
        "alert", "add", *(f"{k}={v}" for k, v in labels.items()),
        f"--annotation=summary={data['annotations']['summary']}",
        f"--generator-url={data['generatorURL']}",
        # When the rule began to fire in the scenario's history, as Prometheus would send it.
        f"--start={data['startsAt']}",
    )  # fmt: skip
    eventually(lambda: len(sessions(db, "alertmanager")) == 1, "the webhook's session")
    [stored] = sessions(db, "alertmanager")
    assert (stored["alert_type"], stored["chain_id"]) == ("PricingAPIHighLatency", "metrics")
    assert stored["routing"] == {
        "by": "rule",
        "rule": "metrics-expression",
        "reason": "the alert has a generatorURL",
    }

    *_, view = client.watch(stored["session_id"], poll_interval=0.25, timeout=DEADLINE_S * 2)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    [agent] = [e for e in view.executions if e["role"] == "agent"]
    assert agent["agent"] == "metrics-investigator"
    # The gather step read the alert's metrics before the model: real answers, read into
    # findings (the new pods throttled under their cut CPU limit).
    gathered = [e for e in agent["timeline"] if is_evidence(e) and e["type"] == "mcp_tool_call"]
    assert any(e["metadata"]["server_name"] == "prometheus" for e in gathered)
    assert not [
        e
        for e in gathered
        if e["metadata"]["is_error"] and e["metadata"]["server_name"] == "prometheus"
    ]
    findings = [e["content"] for e in agent["timeline"] if e["type"] == "detection"]
    assert any("CPU-throttled" in finding for finding in findings), findings
    calls = [
        e
        for e in model_timeline(agent)
        if e["type"] == "mcp_tool_call" and e["metadata"]["server_name"] == "prometheus"
    ]
    metric_steps = [s for s in scenario.playbook.steps if s.tool.startswith("execute_")]
    assert len(calls) == len(metric_steps)
    # Each result is the real Prometheus' answer from the scenario's backfilled history.
    for call, step in zip(calls, metric_steps, strict=True):
        assert not call["metadata"]["is_error"], call["content"][:2000]
        missing = [expected for expected in step.expect if expected not in call["content"]]
        assert not missing, (step.arguments, missing, call["content"][:2000])

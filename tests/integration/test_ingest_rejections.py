"""Every rejection of the ingest function: exact status, error body, and no side effect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.cloud import firestore  # type: ignore[attr-defined]

from tarsy.client import TarsyClient
from tarsy.localstack.stack import Stack

from .conftest import Tap

GOOD = {"alert_type": "generic", "data": {"pod": "api-0"}}


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.ingest_url, timeout=10) as client:
        yield client


def auth(stack: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.api_key}"}


def documents(stack: Stack) -> list[str]:
    db = firestore.Client(project=stack.project_id)
    try:
        return [doc.reference.path for col in db.collections() for doc in col.stream()]
    finally:
        db.close()


def case(
    name: str,
    *,
    method: str = "POST",
    body: bytes | None = None,
    content_type: str | None = "application/json",
    key: str = "good",
    status: int,
    fields: list[str] | None = None,
) -> Any:
    return pytest.param(method, body, content_type, key, status, fields, id=name)


BIG = json.dumps({"alert_type": "x", "data": "a" * (1024 * 1024)}).encode()

CASES = [
    case("get-is-405", method="GET", body=None, status=405),
    case("put-is-405", method="PUT", body=json.dumps(GOOD).encode(), status=405),
    case("405-before-401", method="GET", key="none", status=405),
    case("no-key-is-401", body=json.dumps(GOOD).encode(), key="none", status=401),
    case("wrong-bearer-is-401", body=json.dumps(GOOD).encode(), key="wrong", status=401),
    case("wrong-x-api-key-is-401", body=json.dumps(GOOD).encode(), key="wrong-x", status=401),
    case("401-before-413", body=BIG, key="none", status=401),
    case("over-1mb-is-413", body=BIG, status=413),
    case("text-plain-is-415", body=json.dumps(GOOD).encode(), content_type="text/plain",
         status=415),
    case("no-content-type-is-415", body=json.dumps(GOOD).encode(), content_type=None,
         status=415),
    case("malformed-json-is-400", body=b'{"alert_type": "x", "data": ', status=400),
    case("not-utf8-is-400", body=b"\xff\xfe{}", status=400),
    case("array-body-is-422", body=b"[1, 2]", status=422, fields=["(body)"]),
    case("missing-fields-is-422", body=b"{}", status=422, fields=["alert_type", "data"]),
    case("empty-data-is-422", body=json.dumps({"alert_type": "k8s", "data": ""}).encode(),
         status=422, fields=["data"]),
    case("bad-types-is-422",
         body=json.dumps({"alert_type": 5, "data": {"a": 1}, "runbook": [1]}).encode(),
         status=422, fields=["alert_type", "runbook"]),
    case("unknown-field-is-422", body=json.dumps({**GOOD, "priority": "high"}).encode(),
         status=422, fields=["priority"]),
]  # fmt: skip


@pytest.mark.parametrize(("method", "body", "content_type", "key", "status", "fields"), CASES)
def test_rejection(
    stack: Stack,
    http: httpx.Client,
    tap: Tap,
    method: str,
    body: bytes | None,
    content_type: str | None,
    key: str,
    status: int,
    fields: list[str] | None,
) -> None:
    headers = {
        "good": auth(stack),
        "none": {},
        "wrong": {"Authorization": "Bearer not-the-key"},
        "wrong-x": {"X-API-Key": "not-the-key"},
    }[key]
    if content_type is not None:
        headers = {**headers, "Content-Type": content_type}
    response = http.request(method, "/alerts", content=body, headers=headers)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["status"] == status
    assert error["message"]
    if fields is not None:
        assert sorted(d["field"] for d in error["details"]) == sorted(fields)
        assert all(d["message"] for d in error["details"])
    if status == 401:
        assert response.headers.get("WWW-Authenticate", "").startswith("Bearer")
    # Nothing written, nothing published.
    assert documents(stack) == []
    assert tap.drain(wait=0.5) == []


def test_x_api_key_is_accepted_and_publishes_one_start(
    stack: Stack, http: httpx.Client, tap: Tap, client: TarsyClient
) -> None:
    response = http.post("/alerts", json=GOOD, headers={"X-API-Key": stack.api_key})
    assert response.status_code == 202
    session_id = response.json()["session_id"]
    assert f"sessions/{session_id}" in documents(stack)
    starts = [m for m in tap.drain(wait=1.0) if m.kind == "start_session"]
    assert [m.session_id for m in starts] == [session_id]
    # Let it finish, so that no later test sees its model calls.
    *_, view = client.watch(session_id, poll_interval=0.2, timeout=60)
    assert view.is_finished


def test_healthz(http: httpx.Client) -> None:
    response = http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}

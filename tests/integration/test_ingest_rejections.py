"""Every rejection of the ingest function: exact status, error body, and no side effect."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.cloud import firestore

from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.stack import Stack

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
        db.close()  # type: ignore[no-untyped-call]


def case(
    name: str,
    *,
    method: str = "POST",
    body: bytes | None = None,
    content_type: str | None = "application/json",
    key: str = "good",
    status: int,
    fields: list[str] | None = None,
    encoding: str | None = None,
) -> Any:
    return pytest.param(method, body, content_type, key, status, fields, encoding, id=name)


BIG = json.dumps({"alert_type": "x", "data": "a" * (1024 * 1024)}).encode()


def alert(data: str = '{"pod": "api-0"}', metadata: str = "{}") -> bytes:
    """An alert whose ``data`` and ``metadata`` are raw JSON text (which json.dumps won't write)."""
    return f'{{"alert_type": "generic", "data": {data}, "metadata": {metadata}}}'.encode()


def deep(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


# 4 MiB of spaces in 4 KiB: four times the 1 MiB limit once decompressed.
BOMB = gzip.compress(b" " * (4 * 1024 * 1024), compresslevel=9)

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
    # Hostile bodies (issue 13): each used to be a 500, some after a partial write.
    case("nesting-10000-deep-is-400", body=alert(data=deep(10_000)), status=400),
    case("nesting-10000-deep-arrays-is-400",
         body=alert(data='{"x": ' + "[" * 10_000 + "]" * 10_000 + "}"), status=400),
    case("integer-of-5000-digits-is-400", body=alert(data='{"n": ' + "7" * 5000 + "}"),
         status=400),
    case("integer-2-pow-63-in-metadata-is-400", body=alert(metadata=f'{{"n": {2**63}}}'),
         status=400),
    case("integer-minus-2-pow-63-minus-1-is-400",
         body=alert(metadata=f'{{"n": {-(2**63) - 1}}}'), status=400),
    case("nan-is-400", body=alert(metadata='{"x": NaN}'), status=400),
    case("infinity-is-400", body=alert(data='{"x": Infinity}'), status=400),
    case("minus-infinity-is-400", body=alert(data='{"x": -Infinity}'), status=400),
    case("1e999999-is-400", body=alert(metadata='{"x": 1e999999}'), status=400),
    case("surrogate-value-in-data-is-400", body=alert(data='{"pod": "\\ud800"}'), status=400),
    case("surrogate-key-in-data-is-400", body=alert(data='{"\\ud800": 1}'), status=400),
    case("surrogate-value-in-metadata-is-400", body=alert(metadata='{"t": "\\udfff"}'),
         status=400),
    case("surrogate-key-in-metadata-is-400", body=alert(metadata='{"\\udc00": 1}'),
         status=400),
    case("invalid-utf8-in-a-string-is-400",
         body=b'{"alert_type": "generic", "data": "\xc3\x28"}', status=400),
    case("plain-body-labelled-gzip-is-400", body=json.dumps(GOOD).encode(), encoding="gzip",
         status=400),
    case("gzip-bomb-is-413", body=BOMB, encoding="gzip", status=413),
    case("brotli-is-415", body=json.dumps(GOOD).encode(), encoding="br", status=415),
    case("metadata-deeper-than-firestore-is-422", body=alert(metadata=deep(21)), status=422,
         fields=["metadata" + ".a" * 20]),
    case("metadata-array-in-array-is-422", body=alert(metadata='{"a": [[1]]}'), status=422,
         fields=["metadata.a[0]"]),
    case("metadata-reserved-and-empty-keys-are-422",
         body=alert(metadata='{"__name__": 1, "b": {"": 2}}'), status=422,
         fields=["metadata.__name__", "metadata.b."]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "body", "content_type", "key", "status", "fields", "encoding"), CASES
)
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
    encoding: str | None,
) -> None:
    headers = {
        "good": auth(stack),
        "none": {},
        "wrong": {"Authorization": "Bearer not-the-key"},
        "wrong-x": {"X-API-Key": "not-the-key"},
    }[key]
    if content_type is not None:
        headers = {**headers, "Content-Type": content_type}
    if encoding is not None:
        headers = {**headers, "Content-Encoding": encoding}
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


def test_gzip_alert_is_accepted(
    stack: Stack, http: httpx.Client, tap: Tap, client: TarsyClient
) -> None:
    body = gzip.compress(alert(metadata='{"team": "sre", "n": 9223372036854775807}'))
    headers = {**auth(stack), "Content-Type": "application/json", "Content-Encoding": "gzip"}
    response = http.post("/alerts", content=body, headers=headers)
    assert response.status_code == 202, response.text
    session_id = response.json()["session_id"]
    db = firestore.Client(project=stack.project_id)
    try:
        session = db.document(f"sessions/{session_id}").get().to_dict()
    finally:
        db.close()  # type: ignore[no-untyped-call]
    assert session is not None
    assert session["metadata"] == {"team": "sre", "n": 9223372036854775807}
    assert '"pod": "api-0"' in session["alert_data"]
    starts = [m for m in tap.drain(wait=1.0) if m.kind == "start_session"]
    assert [m.session_id for m in starts] == [session_id]
    *_, view = client.watch(session_id, poll_interval=0.2, timeout=60)
    assert view.is_finished


def test_healthz(http: httpx.Client) -> None:
    response = http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}

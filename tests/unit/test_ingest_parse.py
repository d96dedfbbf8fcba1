"""Ingest request validation: the rejection order and error details, and the handler's outcomes."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import ValidationError

from tarsy.commands.start import status_url
from tarsy.config import load_config
from tarsy.errors import InputError
from tarsy.http.request import HttpRequest
from tarsy.intake.ingest import handle
from tarsy.intake.sources.api import parse_submission, validation_details
from tarsy.models import AlertSubmission, Session, StepMessage
from tarsy.persistence.store import Store
from tarsy.settings import Settings

KEY = "ingest-key"
SETTINGS = Settings(TARSY_API_KEY=KEY, TARSY_MAX_ALERT_BYTES=200)
GOOD = {"alert_type": "PodCrashLooping", "data": {"pod": "api-0"}}


def request(
    *,
    method: str = "POST",
    body: bytes | None = None,
    content_type: str | None = "application/json",
    key: str | None = KEY,
    too_large: bool = False,
    path: str = "/alerts",
    encoding: str | None = None,
) -> HttpRequest:
    headers: dict[str, str] = {}
    if content_type is not None:
        headers["content-type"] = content_type
    if encoding is not None:
        headers["content-encoding"] = encoding
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return HttpRequest(
        method=method,
        path=path,
        headers=headers,
        body=json.dumps(GOOD).encode() if body is None else body,
        body_too_large=too_large,
    )


def rejection(req: HttpRequest, settings: Settings = SETTINGS) -> InputError:
    with pytest.raises(InputError) as failure:
        parse_submission(req, settings)
    return failure.value


def test_good_submission() -> None:
    submission = parse_submission(request(), SETTINGS)
    assert submission == AlertSubmission(alert_type="PodCrashLooping", data={"pod": "api-0"})


BIG = b'{"alert_type": "x", "data": "' + b"a" * 300 + b'"}'


@pytest.mark.parametrize(
    ("req", "status"),
    [
        # each case is also wrong in every later way: the earliest check must win
        pytest.param(
            request(method="GET", key=None, body=BIG, content_type="text/plain"), 405, id="405"
        ),
        pytest.param(request(key=None, body=BIG, content_type="text/plain"), 401, id="401"),
        pytest.param(request(key="wrong", body=BIG, content_type=None), 401, id="401-wrong"),
        pytest.param(request(body=BIG, content_type="text/plain"), 413, id="413"),
        pytest.param(request(body=b"x", too_large=True, content_type=None), 413, id="413-flag"),
        pytest.param(request(body=b"{not json", content_type="text/plain"), 415, id="415"),
        pytest.param(request(body=b"{not json"), 400, id="400"),
        pytest.param(
            request(body=BIG, content_type="text/plain", encoding="br"), 413, id="413-before-415"
        ),
        pytest.param(
            request(body=b"{", content_type="text/plain", encoding="br"), 415, id="415-type"
        ),
        pytest.param(request(body=b"[" * 100, encoding="br"), 415, id="415-encoding"),
        pytest.param(request(body=b"[" * 100), 400, id="400-depth"),
        pytest.param(request(body=b"[1, 2]"), 422, id="422-array"),
        pytest.param(request(body=b'{"alert_type": ""}'), 422, id="422-schema"),
    ],
)
def test_rejection_order(req: HttpRequest, status: int) -> None:
    assert rejection(req).status == status


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "post"])
def test_only_post_is_allowed(method: str) -> None:
    error = rejection(request(method=method))
    assert error.status == 405
    assert error.details == {"allow": "POST"}


def test_auth_disabled_skips_the_key() -> None:
    settings = Settings(TARSY_AUTH_DISABLED=True, TARSY_MAX_ALERT_BYTES=200)
    assert parse_submission(request(key=None), settings).alert_type == "PodCrashLooping"


def test_unconfigured_key_is_503() -> None:
    assert rejection(request(), Settings()).status == 503


def test_body_at_the_limit_is_accepted() -> None:
    body = json.dumps({"alert_type": "t", "data": "x"}).encode()
    body = body[:-1] + b" " * (200 - len(body)) + b"}"
    assert len(body) == 200
    assert parse_submission(request(body=body), SETTINGS).data == "x"
    error = rejection(request(body=body[:-1] + b" }"))
    assert error.status == 413
    assert "200 bytes" in str(error)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        " application/json ;charset=UTF-8",
        "application/vnd.alertmanager+json",
        "application/problem+json",
    ],
)
def test_json_content_types_accepted(content_type: str) -> None:
    assert parse_submission(request(content_type=content_type), SETTINGS)


@pytest.mark.parametrize(
    "content_type",
    [None, "", "text/plain", "text/json", "application/x-www-form-urlencoded", "json"],
)
def test_other_content_types_are_415(content_type: str | None) -> None:
    assert rejection(request(content_type=content_type)).status == 415


@pytest.mark.parametrize("body", [b"", b"{", b"\xff\xfe\x00", b"{'a': 1}", b'{"a": 1} x'])
def test_malformed_json_is_400(body: bytes) -> None:
    error = rejection(request(body=body))
    assert error.status == 400
    assert str(error).startswith("malformed JSON")


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"42", b"null", b"true"])
def test_non_object_json_is_422(body: bytes) -> None:
    error = rejection(request(body=body))
    assert error.status == 422
    assert error.details == [
        {"field": "(body)", "message": "expected an object", "type": "dict_type"}
    ]


def test_schema_errors_list_every_field() -> None:
    body = json.dumps({"alert_type": "bad;type", "data": "", "extra": 1}).encode()
    error = rejection(request(body=body))
    assert error.status == 422
    assert str(error) == "alert does not match the schema"
    details = cast(list[dict[str, str]], error.details)
    by_field = {d["field"]: d for d in details}
    assert set(by_field) == {"alert_type", "data", "extra"}
    assert by_field["alert_type"]["type"] == "string_pattern_mismatch"
    assert by_field["extra"]["type"] == "extra_forbidden"
    assert "must not be empty" in by_field["data"]["message"]
    assert all(set(d) == {"field", "message", "type"} for d in details)


def test_missing_fields_are_reported() -> None:
    error = rejection(request(body=b"{}"))
    fields = {d["field"] for d in cast(list[dict[str, str]], error.details)}
    assert fields == {"alert_type", "data"}


def test_validation_details_paths() -> None:
    with pytest.raises(ValidationError) as failure:
        AlertSubmission.model_validate({"alert_type": "t", "data": {"x": 1}, "metadata": []})
    assert [d["field"] for d in validation_details(failure.value)] == ["metadata"]
    with pytest.raises(ValidationError) as failure:
        AlertSubmission.model_validate("not a dict")
    [detail] = validation_details(failure.value)
    assert detail["field"] == "(body)"


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("https://api.example.com", "https://api.example.com/sessions/abc"),
        ("https://api.example.com/", "https://api.example.com/sessions/abc"),
        ("", "/sessions/abc"),
    ],
)
def test_status_url(base: str, expected: str) -> None:
    assert status_url(Settings(TARSY_PUBLIC_API_URL=base), "abc") == expected


# ─── the handler, with in-memory store and bus ────────────────────────────────


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.deleted: list[str] = []

    async def create_session(self, session: Session) -> None:
        self.sessions[session.session_id] = session

    async def delete_session(self, session_id: str) -> None:
        self.deleted.append(session_id)
        self.sessions.pop(session_id, None)


class MemoryBus:
    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.messages: list[StepMessage] = []

    async def publish(self, message: StepMessage) -> str:
        if self.fail:
            raise ConnectionError("pubsub down")
        self.messages.append(message)
        return str(len(self.messages))


CONFIG = load_config(
    Settings(),
    user_text="agent_chains:\n  kube:\n    alert_types: [PodCrashLooping]\n"
    "    stages: [{name: s, agent: investigator}]\n",
)
HANDLER_SETTINGS = Settings(
    TARSY_API_KEY=KEY, TARSY_MAX_ALERT_BYTES=200, TARSY_PUBLIC_API_URL="https://api.test/"
)


async def run(req: HttpRequest, store: MemoryStore, bus: MemoryBus) -> Any:
    return await handle(req, HANDLER_SETTINGS, CONFIG, cast(Store, store), bus)


async def test_accepted_alert_creates_session_and_publishes_start() -> None:
    store, bus = MemoryStore(), MemoryBus()
    body = json.dumps({**GOOD, "runbook": "rb", "metadata": {"team": "sre"}}).encode()
    response = await run(request(body=body), store, bus)
    assert response.status == 202
    session_id = response.body["session_id"]
    assert response.body["status_url"] == f"https://api.test/sessions/{session_id}"
    session = store.sessions[session_id]
    assert session.chain_id == "kube"
    assert session.alert_data == json.dumps({"pod": "api-0"}, indent=2, sort_keys=True)
    assert (session.runbook, session.metadata) == ("rb", {"team": "sre"})
    assert bus.messages == [StepMessage(session_id=session_id, kind="start_session")]


async def test_unclaimed_alert_type_goes_to_default_chain() -> None:
    store, bus = MemoryStore(), MemoryBus()
    body = json.dumps({"alert_type": "Other", "data": "x"}).encode()
    response = await run(request(body=body), store, bus)
    assert store.sessions[response.body["session_id"]].chain_id == "default"


async def test_rejection_writes_and_publishes_nothing() -> None:
    store, bus = MemoryStore(), MemoryBus()
    response = await run(request(key="wrong"), store, bus)
    assert response.status == 401
    assert response.body["error"]["status"] == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert store.sessions == {} and bus.messages == []


async def test_publish_failure_removes_the_session_and_says_when_to_retry() -> None:
    store, bus = MemoryStore(), MemoryBus(fail=True)
    response = await run(request(), store, bus)
    assert response.status == 503
    assert response.body == {"error": {"status": 503, "message": "queue unavailable, retry"}}
    # The same answer as the native sources' routes give: one intake, one Retry-After.
    assert response.headers["Retry-After"] == "5"
    assert store.sessions == {}
    assert len(store.deleted) == 1


@pytest.mark.parametrize("path", ["/healthz", "/healthz/"])
async def test_healthz_needs_no_key(path: str) -> None:
    response = await run(request(method="GET", key=None, path=path), MemoryStore(), MemoryBus())
    assert (response.status, response.body) == (200, {"status": "ok"})


@pytest.mark.parametrize("path", ["/alerts", "/alerts/", "/", ""])
async def test_alert_paths(path: str) -> None:
    response = await run(request(path=path), MemoryStore(), MemoryBus())
    assert response.status == 202


async def test_unknown_path_is_404() -> None:
    response = await run(request(path="/sessions"), MemoryStore(), MemoryBus())
    assert response.status == 404
    assert "no route" in response.body["error"]["message"]

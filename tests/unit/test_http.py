"""Framework-free HTTP helpers: the API-key check, error bodies, reading requests."""

from __future__ import annotations

import gzip
import hmac
import io
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tarsy.errors import AuthError, InputError, NotFoundError
from tarsy.http.request import (
    DEFAULT_MAX_BODY_BYTES,
    HttpRequest,
    HttpResponse,
    check_api_key,
    error_response,
    presented_key,
    read_json,
    read_request,
    to_framework_response,
)
from tarsy.settings import Settings

KEYED = Settings(TARSY_API_KEY="s3cret-key")


def accepted(headers: dict[str, str], settings: Settings) -> bool:
    """Whether check_api_key lets the request through (it raises to refuse)."""
    try:
        check_api_key(headers, settings)
    except (AuthError, InputError):
        return False
    return True


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({}, None),
        ({"authorization": "Bearer abc"}, "abc"),
        ({"authorization": "bearer abc"}, "abc"),
        ({"authorization": "BEARER   abc  "}, "abc"),
        ({"authorization": "Bearer "}, None),
        ({"authorization": "Bearer"}, None),
        ({"authorization": "Basic dXNlcjpwYXNz"}, None),
        ({"x-api-key": "xyz"}, "xyz"),
        ({"x-api-key": "  xyz "}, "xyz"),
        ({"x-api-key": "   "}, None),
        ({"authorization": "Bearer abc", "x-api-key": "xyz"}, "abc"),
        ({"authorization": "Basic zzz", "x-api-key": "xyz"}, "xyz"),
        ({"authorization": "Bearer ", "x-api-key": "xyz"}, "xyz"),
    ],
)
def test_presented_key(headers: dict[str, str], key: str | None) -> None:
    assert presented_key(headers) == key


@pytest.mark.parametrize(
    "headers",
    [{"authorization": "Bearer s3cret-key"}, {"x-api-key": "s3cret-key"}],
)
def test_check_api_key_accepts_the_key(headers: dict[str, str]) -> None:
    assert accepted(headers, KEYED)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing API key"),
        ({"authorization": "Bearer wrong"}, "invalid API key"),
        ({"x-api-key": "s3cret-key-but-longer"}, "invalid API key"),
        ({"x-api-key": "S3CRET-KEY"}, "invalid API key"),
        ({"authorization": "Basic s3cret-key"}, "missing API key"),
        ({"x-api-key": "s3crët"}, "invalid API key"),
    ],
)
def test_check_api_key_rejects(headers: dict[str, str], message: str) -> None:
    with pytest.raises(AuthError, match=message) as failure:
        check_api_key(headers, KEYED)
    assert failure.value.status == 401


def test_check_api_key_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return bool(real(a, b))

    monkeypatch.setattr(hmac, "compare_digest", spy)
    check_api_key({"x-api-key": "s3cret-key"}, KEYED)
    with pytest.raises(AuthError):
        check_api_key({"x-api-key": "nope"}, KEYED)
    assert seen == [(b"s3cret-key", b"s3cret-key"), (b"nope", b"s3cret-key")]


def test_auth_disabled_accepts_anything() -> None:
    assert accepted({}, Settings(TARSY_AUTH_DISABLED=True))
    assert accepted(
        {"x-api-key": "whatever"}, Settings(TARSY_AUTH_DISABLED=True, TARSY_API_KEY="k")
    )


def test_no_key_configured_is_503_not_open() -> None:
    with pytest.raises(InputError) as failure:
        check_api_key({"x-api-key": "anything"}, Settings())
    assert failure.value.status == 503
    assert not isinstance(failure.value, AuthError)
    assert "TARSY_API_KEY" in str(failure.value)


def test_empty_configured_key_accepts_nothing() -> None:
    settings = Settings(TARSY_API_KEY="")
    for headers in ({}, {"x-api-key": ""}, {"authorization": "Bearer "}):
        with pytest.raises(AuthError):
            check_api_key(headers, settings)


# ─── error responses ──────────────────────────────────────────────────────────


def test_error_response_shape() -> None:
    response = error_response(InputError("bad thing", status=400))
    assert response == HttpResponse(
        status=400, body={"error": {"status": 400, "message": "bad thing"}}, headers={}
    )


def test_error_response_with_details() -> None:
    details = [{"field": "data", "message": "must not be empty", "type": "value_error"}]
    response = error_response(InputError("schema", status=422, details=details))
    assert response.status == 422
    assert response.body == {"error": {"status": 422, "message": "schema", "details": details}}


def test_401_carries_www_authenticate() -> None:
    response = error_response(AuthError("missing API key"))
    assert response.status == 401
    assert response.headers == {"WWW-Authenticate": 'Bearer realm="tarsy"'}


def test_405_carries_allow() -> None:
    response = error_response(InputError("no", status=405, details={"allow": "POST"}))
    assert response.headers == {"Allow": "POST"}
    assert response.body["error"]["details"] == {"allow": "POST"}


def test_405_without_allow_details_has_no_allow_header() -> None:
    assert error_response(InputError("no", status=405)).headers == {}


def test_subclass_default_status() -> None:
    assert error_response(NotFoundError("gone")).status == 404
    assert InputError("x").status == 400


def test_to_framework_response() -> None:
    body, status, headers = to_framework_response(
        HttpResponse(status=401, body={"error": {"message": "ü"}}, headers={"X-A": "1"})
    )
    assert status == 401
    assert json.loads(body) == {"error": {"message": "ü"}}
    assert headers == {
        "Content-Type": "application/json",
        "X-Content-Type-Options": "nosniff",
        "X-A": "1",
    }


def test_framework_response_headers_can_override_content_type() -> None:
    _, _, headers = to_framework_response(
        HttpResponse(status=200, body={}, headers={"Content-Type": "text/plain"})
    )
    assert headers["Content-Type"] == "text/plain"


# ─── reading requests ─────────────────────────────────────────────────────────


class CountingStream(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.requested: list[int] = []

    def read(self, size: int | None = -1, /) -> bytes:
        self.requested.append(-1 if size is None else size)
        return super().read(size)


@dataclass
class FakeRequest:
    body: bytes = b""
    content_length: int | None = None
    method: str = "POST"
    path: str = "/alerts"
    headers: dict[str, Any] = field(default_factory=dict)
    query_string: bytes = b""
    stream: CountingStream = field(init=False)

    def __post_init__(self) -> None:
        self.stream = CountingStream(self.body)


def test_read_request_lowercases_headers_and_reads_body() -> None:
    request = FakeRequest(
        body=b'{"a": 1}',
        content_length=8,
        headers={"Content-Type": "application/json", "X-API-Key": "k"},
    )
    converted = read_request(request, max_bytes=100)
    assert converted.method == "POST"
    assert converted.path == "/alerts"
    assert converted.headers == {"content-type": "application/json", "x-api-key": "k"}
    assert converted.body == b'{"a": 1}'
    assert converted.body_too_large is False


def test_declared_oversize_body_is_not_read() -> None:
    request = FakeRequest(body=b"x" * 50, content_length=50)
    converted = read_request(request, max_bytes=10)
    assert converted.body_too_large is True
    assert converted.body == b""
    assert request.stream.requested == []


@pytest.mark.parametrize(("size", "too_large"), [(9, False), (10, False), (11, True), (500, True)])
def test_undeclared_length_reads_at_most_one_byte_past_the_limit(
    size: int, too_large: bool
) -> None:
    request = FakeRequest(body=b"y" * size, content_length=None)
    converted = read_request(request, max_bytes=10)
    assert request.stream.requested == [11]
    assert converted.body_too_large is too_large
    assert converted.body == b"y" * min(size, 10)


def test_lying_content_length_is_still_bounded() -> None:
    request = FakeRequest(body=b"z" * 100, content_length=5)
    converted = read_request(request, max_bytes=10)
    assert converted.body_too_large is True
    assert len(converted.body) == 10


def test_exact_declared_limit_is_accepted() -> None:
    converted = read_request(FakeRequest(body=b"a" * 10, content_length=10), max_bytes=10)
    assert converted.body_too_large is False
    assert converted.body == b"a" * 10


def test_read_request_keeps_the_query_string() -> None:
    request = FakeRequest(method="GET", path="/sessions", query_string=b"status=failed&limit=5")
    converted = read_request(request, max_bytes=10)
    assert (converted.path, converted.query_string) == ("/sessions", "status=failed&limit=5")
    assert HttpRequest(method="GET", path="/").query_string == ""


def test_read_request_records_its_limit() -> None:
    assert read_request(FakeRequest(body=b"{}"), max_bytes=10).max_body_bytes == 10
    declared = read_request(FakeRequest(body=b"x" * 50, content_length=50), max_bytes=10)
    assert declared.max_body_bytes == 10
    assert HttpRequest(method="GET", path="/").max_body_bytes == DEFAULT_MAX_BODY_BYTES


# ─── reading JSON bodies ──────────────────────────────────────────────────────


def json_request(body: bytes, **headers: str) -> HttpRequest:
    return HttpRequest(method="POST", path="/x", headers=headers, body=body)


def test_read_json_parses_the_body() -> None:
    assert read_json(json_request(b'{"question": "why?"}')) == {"question": "why?"}


def test_read_json_honours_gzip() -> None:
    request = json_request(gzip.compress(b'{"a": 1}'), **{"content-encoding": "gzip"})
    assert read_json(request) == {"a": 1}


def test_read_json_refuses_a_body_read_past_its_limit() -> None:
    converted = read_request(FakeRequest(body=b'{"a": "' + b"x" * 50 + b'"}'), max_bytes=10)
    with pytest.raises(InputError) as failure:
        read_json(converted)
    assert failure.value.status == 413
    assert "10 bytes" in str(failure.value)


def test_read_json_caps_decompression_at_the_read_limit() -> None:
    body = gzip.compress(b'{"a": "' + b"x" * 100 + b'"}')
    converted = read_request(
        FakeRequest(body=body, headers={"Content-Encoding": "gzip"}), max_bytes=len(body)
    )
    with pytest.raises(InputError) as failure:
        read_json(converted)
    assert failure.value.status == 413
    assert read_json(converted, max_bytes=1000) == {"a": "x" * 100}


@pytest.mark.parametrize("body", [b"", b" \n"])
def test_read_json_empty_body(body: bytes) -> None:
    assert read_json(json_request(body), empty={}) == {}
    with pytest.raises(InputError) as failure:
        read_json(json_request(body))
    assert failure.value.status == 400


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"[" * 5_000, {}, 400),
        (b'{"n": 9223372036854775808}', {}, 400),
        (b'{"q": NaN}', {}, 400),
        (b'{"q": "\\ud800"}', {}, 400),
        (b"\xff", {}, 400),
        (b"{}", {"content-encoding": "br"}, 415),
        (b"{}", {"content-encoding": "gzip"}, 400),
    ],
)
def test_read_json_refuses_hostile_bodies(
    body: bytes, headers: dict[str, str], status: int
) -> None:
    with pytest.raises(InputError) as failure:
        read_json(json_request(body, **headers))
    assert failure.value.status == status

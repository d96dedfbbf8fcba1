"""Framework-free HTTP request/response models and the API-key check.

The function entry points translate functions-framework's Flask request into
:class:`HttpRequest`; the handlers in ``ingest`` and ``api`` never see Flask.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Protocol

from pydantic import Field, SecretStr

from tarsy._pydantic import DeferredModel
from tarsy.errors import AuthError, InputError
from tarsy.http.json_body import JsonValue, parse_json_body
from tarsy.settings import Settings

# The body limit of a request built without read_request (tests, direct calls).
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class HttpRequest(DeferredModel):
    """An incoming request. Header names are lower-case.

    ``max_body_bytes`` is the limit the body was read under: :func:`read_json`
    applies it again to the decompressed body.
    """

    method: str
    path: str
    query_string: str = Field(default="", description="the raw query, without the '?'")
    headers: dict[str, str] = Field(default_factory=dict)
    body: bytes = b""
    body_too_large: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


class HttpResponse(DeferredModel):
    """An outgoing JSON response."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = Field(default_factory=dict)


def error_response(error: InputError) -> HttpResponse:
    """Render an InputError as ``{"error": {"status", "message", "details"?}}``."""
    payload: dict[str, Any] = {"status": error.status, "message": str(error)}
    if error.details is not None:
        payload["details"] = error.details
    headers = {"WWW-Authenticate": 'Bearer realm="tarsy"'} if error.status == 401 else {}
    if error.status == 405 and isinstance(error.details, dict) and "allow" in error.details:
        headers["Allow"] = str(error.details["allow"])
    return HttpResponse(status=error.status, body={"error": payload}, headers=headers)


def presented_key(headers: dict[str, str]) -> str | None:
    """Return the API key from ``Authorization: Bearer`` or ``X-API-Key``, if any."""
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


def required_key(settings: Settings) -> SecretStr | None:
    """The key requests must carry; None when auth is disabled (local runs only).

    Raises:
        InputError: 503: no key is configured and auth is not disabled.
    """
    if settings.auth_disabled:
        return None
    if settings.api_key is None:
        raise InputError(
            "authentication is not configured: set TARSY_API_KEY "
            "(or TARSY_AUTH_DISABLED=true for local runs)",
            status=503,
        )
    return settings.api_key


def check_api_key(headers: dict[str, str], settings: Settings) -> None:
    """Raise AuthError unless the request carries the configured key (constant-time compare)."""
    required = required_key(settings)
    if required is None:
        return
    key = presented_key(headers)
    if key is None:
        raise AuthError("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'")
    expected = required.get_secret_value().encode()
    if not hmac.compare_digest(key.encode(), expected):
        raise AuthError("invalid API key")


def check_sweeper(headers: dict[str, str], settings: Settings) -> None:
    """Authorize a sweep: Cloud Scheduler's OIDC token in the cloud, the API key locally.

    Fails closed: the token's audience is always checked (the settings refuse an
    invoker without an audience, and an empty one here refuses every token).
    """
    if not settings.sweeper_invoker:
        check_api_key(headers, settings)
        return
    token = presented_key(headers)
    if token is None:
        raise AuthError("the sweeper needs a Google OIDC token (Authorization: Bearer)")
    # Imported here: only the api function's /sweep route needs google-auth's verifier.
    from google.auth.transport import requests as google_requests
    from google.oauth2 import id_token

    audience = settings.sweeper_audience.strip()
    if not audience:
        # google-auth would skip the check for None: never ask it to.
        raise AuthError("the sweeper's token audience is not configured (TARSY_SWEEPER_AUDIENCE)")
    try:
        claims = id_token.verify_oauth2_token(  # type: ignore[no-untyped-call]
            token, google_requests.Request(), audience=audience
        )
    except ValueError as e:
        raise AuthError(f"invalid OIDC token: {e}") from e
    if claims.get("email") != settings.sweeper_invoker or not claims.get("email_verified"):
        raise AuthError("this identity may not run the sweeper")


class _WsgiStream(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class FrameworkRequest(Protocol):
    """The part of a Flask/Werkzeug request the entry points use."""

    @property
    def method(self) -> str:
        """HTTP method."""

    @property
    def path(self) -> str:
        """Request path."""

    @property
    def query_string(self) -> bytes:
        """The raw query string, without the ``?``."""

    @property
    def content_length(self) -> int | None:
        """Declared body length, if any."""

    @property
    def headers(self) -> Any:
        """Request headers (a Werkzeug ``Headers``)."""

    @property
    def stream(self) -> _WsgiStream:
        """The raw WSGI input stream."""


def read_request(request: FrameworkRequest, max_bytes: int) -> HttpRequest:
    """Convert a framework request, reading at most ``max_bytes + 1`` bytes of body."""
    headers = {str(k).lower(): str(v) for k, v in request.headers.items()}
    query_string = request.query_string.decode("utf-8", errors="replace")
    if request.content_length is not None and request.content_length > max_bytes:
        return HttpRequest(
            method=request.method,
            path=request.path,
            query_string=query_string,
            headers=headers,
            body_too_large=True,
            max_body_bytes=max_bytes,
        )
    body = request.stream.read(max_bytes + 1)
    return HttpRequest(
        method=request.method,
        path=request.path,
        query_string=query_string,
        headers=headers,
        body=body[:max_bytes],
        body_too_large=len(body) > max_bytes,
        max_body_bytes=max_bytes,
    )


def read_json(
    request: HttpRequest,
    max_bytes: int | None = None,
    *,
    empty: dict[str, JsonValue] | None = None,
) -> JsonValue:
    """Return the request's body as JSON, or raise InputError (400, 413 or 415).

    The one reader of JSON bodies for every route (see :mod:`tarsy.http.json_body`
    for the limits: Content-Encoding, UTF-8, depth, numbers, lone surrogates).
    ``max_bytes`` defaults to the limit the request was read under and bounds
    the body before and after decompression. An empty body is malformed JSON
    unless ``empty`` is given (for instance ``{}``), which is then returned.
    The content type is the caller's to check (the api's actions take only
    ``application/json``: :mod:`tarsy.http.same_origin`).
    """
    limit = request.max_body_bytes if max_bytes is None else max_bytes
    if request.body_too_large:
        raise InputError(f"body exceeds {limit} bytes", status=413)
    return parse_json_body(request.body, request.headers, limit, empty=empty)


def to_framework_response(response: HttpResponse) -> tuple[str, int, dict[str, str]]:
    """Return ``(body, status, headers)`` as functions-framework handlers return them.

    ``nosniff``: a browser takes the JSON as JSON, never as a script or a page.
    """
    headers = {
        "Content-Type": "application/json",
        "X-Content-Type-Options": "nosniff",
        **response.headers,
    }
    return json.dumps(response.body), response.status, headers

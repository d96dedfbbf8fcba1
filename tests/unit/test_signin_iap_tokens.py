"""IAP's programmatic access, locally: identity tokens checked as IAP checks them (issue 42).

The proxy's key stands in for Google's: google-auth's own ``fetch_id_token``, given
a service-account key file whose ``token_uri`` is the proxy, gets a token from it;
the proxy lets a request with a valid token through as the token's e-mail and
refuses a forged, expired, wrong-audience or wrongly-issued one without forwarding.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import google.auth.transport.requests
import google.oauth2.id_token
import httpx
import pytest

from tarsy.access.iap import ASSERTION_HEADER, verify_assertion
from tarsy_dev.client import IapIdentity
from tarsy_dev.localstack.processes import free_port
from tarsy_dev.localstack.signin import (
    LOCAL_AUDIENCE,
    TOKEN_PATH,
    SignInProxy,
    TokenRefused,
    assertion,
    bearer_token,
    id_token,
    new_key,
    public_keys,
    verify_id_token,
    write_service_account,
)

CLIENT_ID = "1234-tarsy.apps.googleusercontent.com"
ROBOT = "robot@tarsy-local.iam.gserviceaccount.com"
KEY = new_key()


def test_a_valid_identity_token_names_its_email() -> None:
    assert verify_id_token(KEY, id_token(KEY, ROBOT, audience=CLIENT_ID), CLIENT_ID) == ROBOT


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(id_token(new_key(), ROBOT, audience=CLIENT_ID), id="forged"),
        pytest.param(
            id_token(KEY, ROBOT, audience=CLIENT_ID, issued_at=time.time() - 7200), id="expired"
        ),
        pytest.param(
            id_token(KEY, ROBOT, audience="another.apps.googleusercontent.com"), id="wrong-audience"
        ),
        pytest.param(assertion(KEY, ROBOT, audience=CLIENT_ID), id="iap-issued-not-google"),
        pytest.param("not-a-jwt", id="garbage"),
    ],
)
def test_iap_refuses_a_token_that_fails_any_check(token: str) -> None:
    with pytest.raises(TokenRefused):
        verify_id_token(KEY, token, CLIENT_ID)


def test_the_bearer_token_is_read_from_either_header() -> None:
    assert bearer_token({"authorization": "Bearer abc"}) == "abc"
    assert bearer_token({"proxy-authorization": "bearer xyz"}) == "xyz"
    assert bearer_token({"authorization": "Basic abc"}) is None
    assert bearer_token({}) is None


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback api that answers 200 and records each request's headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy(upstream: tuple[str, list[dict[str, str]]], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The proxy in a thread, trusting one service account; yields its URL and the key file."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    key_file = tmp_path / "robot.json"
    info = write_service_account(key_file, ROBOT, url + TOKEN_PATH)
    server = SignInProxy(port, upstream[0], KEY, "you@tarsy.local", client_id=CLIENT_ID,
                         service_accounts=[info])  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield url, key_file
    finally:
        server.shutdown()
        server.server_close()


def test_google_auth_gets_an_identity_token_and_the_api_gets_its_person(
    proxy: tuple[str, Path],
    upstream: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, key_file = proxy
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    request = google.auth.transport.requests.Request()
    token = google.oauth2.id_token.fetch_id_token(request, CLIENT_ID)  # type: ignore[no-untyped-call]
    assert verify_id_token(KEY, token, CLIENT_ID) == ROBOT

    response = httpx.get(url + "/sessions", headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 200
    (headers,) = upstream[1]
    assert "authorization" not in headers  # the token was for IAP, not the api
    identity = verify_assertion(headers[ASSERTION_HEADER], public_keys(KEY), LOCAL_AUDIENCE)
    assert identity.email == ROBOT


def test_a_bad_token_is_refused_and_nothing_reaches_the_api(
    proxy: tuple[str, Path], upstream: tuple[str, list[dict[str, str]]]
) -> None:
    url, _ = proxy
    forged = id_token(new_key(), ROBOT, audience=CLIENT_ID)
    response = httpx.get(url + "/sessions", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401
    assert upstream[1] == []


def test_a_grant_from_an_unknown_service_account_gets_no_token(
    proxy: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = proxy
    stranger = tmp_path / "stranger.json"
    write_service_account(stranger, "stranger@example.com", url + TOKEN_PATH)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(stranger))
    request = google.auth.transport.requests.Request()
    with pytest.raises(google.auth.exceptions.RefreshError):
        google.oauth2.id_token.fetch_id_token(request, CLIENT_ID)  # type: ignore[no-untyped-call]


def test_the_cli_sends_the_identity_token_to_the_api_only() -> None:
    seen: dict[str, str | None] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[request.url.host] = request.headers.get("authorization")
        return httpx.Response(200, json={})

    auth = IapIdentity(CLIENT_ID, "https://tarsy.example.com", token="id-token")
    with httpx.Client(auth=auth, transport=httpx.MockTransport(handler),
                      headers={"Authorization": "Bearer api-key"}) as http:  # fmt: skip
        http.get("https://tarsy.example.com/sessions")
        http.post("https://ingest.example.com/alerts")
    assert seen == {"tarsy.example.com": "Bearer id-token", "ingest.example.com": "Bearer api-key"}

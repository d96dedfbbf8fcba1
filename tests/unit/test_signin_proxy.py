"""The local sign-in proxy plays Identity-Aware Proxy: it signs as its user, never as the caller.

A real proxy process (the module the stack runs) in front of a loopback upstream
that records what reaches it; the assertion it forwards is checked with the
api's own verification.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tarsy.access.iap import ASSERTION_HEADER, verify_assertion
from tarsy_dev.localstack.processes import free_port, http_ok, wait_until
from tarsy_dev.localstack.signin import (
    KEYS_PATH,
    LOCAL_AUDIENCE,
    assertion,
    new_key,
    public_keys,
    write_key,
)

USER = "you@tarsy.local"


# Paths whose first request the upstream drops unanswered, as a server does that
# closes an idle kept-alive connection just as a request arrives on it.
DROPPED_ONCE = {"/dropped-once", "/posted"}


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback api that answers 200 and records each request's headers."""
    seen: list[dict[str, str]] = []
    to_drop = set(DROPPED_ONCE)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            if self.path in to_drop:
                to_drop.discard(self.path)
                self.close_connection = True
                return
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()


@pytest.fixture
def proxy(
    tmp_path: Path, upstream: tuple[str, list[dict[str, str]]]
) -> Iterator[tuple[str, bytes]]:
    key_path = tmp_path / "signin-key.pem"
    key = write_key(key_path)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tarsy_dev.localstack.signin", "--port", str(port),
         "--upstream", upstream[0], "--key", str(key_path), "--user", USER],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(http_ok(url + "/healthz"), timeout=30, what="sign-in proxy")
        yield url, key
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_key_is_written_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    first = write_key(path)
    assert write_key(path) == first
    assert path.stat().st_mode & 0o077 == 0


def test_the_proxy_serves_its_public_key_as_google_auth_reads_it(
    proxy: tuple[str, bytes],
) -> None:
    url, key = proxy
    served = httpx.get(url + KEYS_PATH).json()
    assert served == public_keys(key)
    verify_assertion(assertion(key, USER), served, LOCAL_AUDIENCE)


def test_the_proxy_signs_every_request_as_its_user_and_drops_the_callers_assertion(
    proxy: tuple[str, bytes], upstream: tuple[str, list[dict[str, str]]]
) -> None:
    url, key = proxy
    _, seen = upstream
    forged = assertion(new_key(), "mallory@elsewhere.example")
    response = httpx.get(url + "/sessions", headers={ASSERTION_HEADER: forged})
    assert response.status_code == 200 and response.json() == {"ok": True}
    forwarded = seen[-1][ASSERTION_HEADER]
    assert forwarded != forged
    identity = verify_assertion(forwarded, public_keys(key), LOCAL_AUDIENCE)
    assert identity.email == USER
    assert json.dumps(seen).count(forged) == 0


@pytest.mark.parametrize(
    ("method", "path", "status", "upstream_requests"),
    [("GET", "/dropped-once", 200, 2), ("POST", "/posted", 502, 1)],
    ids=["a GET is sent again once", "a POST is never sent twice and answers 502"],
)
def test_a_request_the_api_drops_unanswered(
    proxy: tuple[str, bytes],
    upstream: tuple[str, list[dict[str, str]]],
    method: str,
    path: str,
    status: int,
    upstream_requests: int,
) -> None:
    url, _ = proxy
    _, seen = upstream
    before = len(seen)
    response = httpx.request(method, url + path, json={"verdict": "wrong"})
    assert response.status_code == status
    if status == 200:
        assert response.json() == {"ok": True}
    else:
        assert "the api is not answering" in response.text
    assert len(seen) - before == upstream_requests

"""``make up``'s sign-in proxy mints the identity token the CLI uses through IAP (issue 42).

The stack writes a service-account key file for its user and starts the proxy
trusting it (:func:`signin_argv`), so ``tarsy`` with :func:`iap_env` gets a
token from google-auth at the proxy's ``/_signin/token`` and reaches the api as
that user. Here the proxy runs from the very command line the stack spawns
(its ``main``, in a thread), in front of a loopback stand-in for the api.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tarsy.access.iap import ASSERTION_HEADER, verify_assertion
from tarsy_dev import cli
from tarsy_dev.localstack import signin
from tarsy_dev.localstack.processes import free_port
from tarsy_dev.localstack.signin import (
    LOCAL_AUDIENCE,
    LOCAL_CLIENT_ID,
    TOKEN_PATH,
    public_keys,
    write_key,
    write_service_account,
)
from tarsy_dev.localstack.stack import SERVICE_ACCOUNT_FILE, iap_env, signin_argv

USER = "you@tarsy.local"


@pytest.fixture
def api() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback api that answers an empty session page and records each request's headers."""
    seen: list[dict[str, str]] = []
    body = json.dumps({"sessions": [], "next_cursor": None}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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
def stack_proxy(
    api: tuple[str, list[dict[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[dict[str, str], bytes]]:
    """The proxy as the stack starts it: its key file written, its argv from signin_argv."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    key = tmp_path / "signin-key.pem"
    pem = write_key(key)
    key_file = tmp_path / SERVICE_ACCOUNT_FILE
    write_service_account(key_file, USER, url + TOKEN_PATH)
    argv = signin_argv(port, api[0], key, USER, key_file)
    assert argv[1:3] == ["-m", "tarsy_dev.localstack.signin"]

    servers: list[signin.SignInProxy] = []
    listening = threading.Event()

    class Started(signin.SignInProxy):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)  # bound and listening: connections queue
            servers.append(self)
            listening.set()

    monkeypatch.setattr(signin, "SignInProxy", Started)
    thread = threading.Thread(target=signin.main, args=(argv[3:],), daemon=True)
    thread.start()
    assert listening.wait(timeout=30), "the proxy did not start"
    try:
        yield iap_env(url, str(key_file)), pem
    finally:
        servers[0].shutdown()
        servers[0].server_close()
        thread.join(timeout=10)


def test_the_cli_through_the_stacks_proxy_reaches_the_api_as_the_stack_user(
    stack_proxy: tuple[dict[str, str], bytes],
    api: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    environment, pem = stack_proxy
    monkeypatch.chdir(tmp_path)  # no .local/stack.env
    for name in ("TARSY_SIGNIN_KEY", "TARSY_USER", "TARSY_API_KEY", "TARSY_IAP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    assert cli.main(["list", "--json"]) == cli.EXIT_OK, capsys.readouterr().err

    (headers,) = api[1]
    assert "authorization" not in headers  # the token was for the proxy (IAP), not the api
    identity = verify_assertion(headers[ASSERTION_HEADER], public_keys(pem), LOCAL_AUDIENCE)
    assert identity.email == USER


def test_the_cli_environment_names_the_proxy_its_client_id_and_the_key_file(
    tmp_path: Path,
) -> None:
    assert iap_env("http://127.0.0.1:1", "/k.json") == {
        "TARSY_API_URL": "http://127.0.0.1:1",
        "TARSY_IAP_AUDIENCE": LOCAL_CLIENT_ID,
        "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    }
    # A stack recorded before the proxy had a key file: nothing to offer.
    assert iap_env("http://127.0.0.1:1", "") == {}
    argv = signin_argv(1, "http://api", tmp_path / "k.pem", USER, tmp_path / "sa.json")
    assert argv[argv.index("--service-account") + 1] == str(tmp_path / "sa.json")
    assert argv[argv.index("--client-id") + 1] == LOCAL_CLIENT_ID

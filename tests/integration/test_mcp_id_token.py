"""An http MCP server behind an IAM check, reached with a Google ID token minted by google-auth.

Deployed, the step function's identity comes from the metadata server. Here
google-auth takes the other road it offers to the same code,
``GOOGLE_APPLICATION_CREDENTIALS``: a service-account key generated for the
test whose ``token_uri`` is a loopback token endpoint. That endpoint checks
the signed assertion google-auth sends (signature, audience, the
``target_audience`` it asks a token for) and answers with an ID token; the MCP
server (flaky_mcp_server.py with ``--audience``) refuses any request whose
token is not for its own URL, as Cloud Run does.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import crypt, jwt

from tarsy.config.schema import TarsyConfig
from tarsy.models import ToolCall
from tarsy.settings import Settings
from tarsy.tools.base import ToolListing
from tarsy.tools.id_token import IdTokenSource
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.localstack.processes import free_port

from .test_mcp_retries import Servers, calls_received, servers  # noqa: F401  (fixture)

# google-auth addresses its assertion to Google's token endpoint, wherever it posts it.
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
ECHO = ToolListing.model_validate(
    {"tools": [{"name": "k8s.echo", "description": "", "parameters": {"type": "object"}}]}
)


class TokenEndpoint:
    """A loopback OAuth token endpoint for the JWT-bearer grant of one service account."""

    def __init__(self, private_pem: bytes, public_pem: bytes) -> None:
        self.signer = crypt.RSASigner.from_string(private_pem)  # type: ignore[no-untyped-call]
        self.public_pem = public_pem
        self.minted: list[str] = []  # target audiences, one per token issued
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                status, body = endpoint.grant(form)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def grant(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = jwt.decode(  # type: ignore[no-untyped-call]
                form["assertion"][0], certs=self.public_pem, audience=GOOGLE_TOKEN_AUDIENCE
            )
        except (KeyError, ValueError) as e:
            return 400, {"error": "invalid_grant", "error_description": str(e)}
        audience = claims["target_audience"]
        self.minted.append(audience)
        now = int(time.time())
        token = jwt.encode(  # type: ignore[no-untyped-call]
            self.signer,
            {"aud": audience, "iss": "https://accounts.google.com", "iat": now, "exp": now + 3600},
        )
        return 200, {"id_token": token.decode()}


@pytest.fixture
def token_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TokenEndpoint]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    endpoint = TokenEndpoint(private_pem, public_pem)
    endpoint.thread.start()
    account = {
        "type": "service_account",
        "project_id": "tarsy-test",
        "private_key_id": "test-key",
        "private_key": private_pem.decode(),
        "client_email": "tarsy-step@tarsy-test.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": endpoint.url,
    }
    path = tmp_path / "step-account.json"
    path.write_text(json.dumps(account))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def executor(url: str, *, auth: str = "google-id-token") -> MCPToolExecutor:
    config = TarsyConfig.model_validate(
        {"mcp_servers": {"k8s": {"transport": "http", "url": url, "auth": auth}}}
    )
    store: Any = None  # call_tools reads nothing from Firestore
    return MCPToolExecutor(config, Settings(), store, tokens=IdTokenSource())


async def test_calls_carry_an_id_token_for_the_service_and_it_is_minted_once(
    servers: Servers,  # noqa: F811
    token_endpoint: TokenEndpoint,
) -> None:
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    url = servers.start(port, audience=origin)
    tools = executor(url)
    for text in ("one", "two"):
        [result] = await tools.call_tools(
            [ToolCall(id=text, name="k8s.echo", arguments=json.dumps({"text": text}))], ECHO
        )
        assert (result.is_error, result.content) == (False, f"echo: {text}"), result.content
    # The audience is the service's URL without the /mcp path; the token is reused.
    assert token_endpoint.minted == [origin]
    assert calls_received(url) == 2


async def test_without_the_id_token_the_service_refuses_and_nothing_is_retried(
    servers: Servers,  # noqa: F811
) -> None:
    port = free_port()
    url = servers.start(port, audience=f"http://127.0.0.1:{port}")
    [result] = await executor(url, auth="none").call_tools(
        [ToolCall(id="x", name="k8s.echo", arguments='{"text": "x"}')], ECHO
    )
    assert result.is_error
    assert "cannot connect to MCP server 'k8s'" in result.content
    assert "attempts" not in result.content  # a 401 is not transient

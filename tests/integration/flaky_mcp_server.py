"""An MCP server over streamable HTTP whose first tool calls fail at the HTTP level, on purpose.

The retry tests (test_mcp_retries.py) need a real server that fails the way a
Cloud Run service does while it starts or is overloaded: the HTTP request of a
``tools/call`` answered ``503`` (or any status given), before the MCP layer
sees it. ``--fail-first N`` fails the first N such requests, then the server
behaves; every ``tools/call`` request is counted, so a test can tell how many
attempts were made (``GET /calls``); so is every MCP handshake (``initialize``, or
``server/discover`` since 2026), so a test can tell how many connections were
opened (``GET /sessions``). Listing
tools and the handshake are never failed, so only the call's own retries are
measured.

With ``--audience AUD`` it also stands in for Cloud Run's IAM check: every
request needs ``Authorization: Bearer`` with an ID token (a JWT) whose ``aud``
is AUD, else 401. The signature is the token endpoint's business
(test_mcp_id_token.py checks it there).
"""

from __future__ import annotations

import argparse
import base64
import json

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

server = MCPServer("flaky")
# What a client sends first on a new connection: the 2025 protocols' initialize, or
# the stateless discovery of the protocol revisions since.
HANDSHAKES = frozenset({"initialize", "server/discover"})


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def broken() -> str:
    """A tool that fails by itself (a tool error, not a transport one)."""
    raise ValueError("the tool itself failed")


class FailFirstCalls:
    """ASGI middleware: the first ``failures`` ``tools/call`` POSTs get ``status``."""

    def __init__(
        self, app: ASGIApp, failures: int, status: int, audience: str | None = None
    ) -> None:
        self.app = app
        self.failures = failures
        self.status = status
        self.audience = audience
        self.calls = 0
        self.sessions = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/calls":
            await JSONResponse({"calls": self.calls})(scope, receive, send)
            return
        if scope["path"] == "/sessions":
            await JSONResponse({"sessions": self.sessions})(scope, receive, send)
            return
        if self.audience is not None and _audience(scope) != self.audience:
            await PlainTextResponse("no ID token for this audience", 401)(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await request.body()
        if _method(body) in HANDSHAKES:
            self.sessions += 1
        if _method(body) == "tools/call":
            self.calls += 1
            if self.calls <= self.failures:
                response: Response = PlainTextResponse("starting up", status_code=self.status)
                await response(scope, receive, send)
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _audience(scope: Scope) -> str | None:
    """The ``aud`` claim of the request's bearer token, if it carries one."""
    headers = dict(scope["headers"])
    value = headers.get(b"authorization", b"").decode()
    if not value.startswith("Bearer "):
        return None
    try:
        payload = value.removeprefix("Bearer ").split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    audience = claims.get("aud") if isinstance(claims, dict) else None
    return audience if isinstance(audience, str) else None


def _method(body: bytes) -> str | None:
    """The JSON-RPC method of a request body, if it is one."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def main() -> None:
    """Serve on 127.0.0.1:PORT until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=503)
    parser.add_argument("--audience", default=None)
    args = parser.parse_args()
    app = FailFirstCalls(
        server.streamable_http_app(host="127.0.0.1"), args.fail_first, args.status, args.audience
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

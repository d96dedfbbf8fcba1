"""An MCP server over streamable HTTP whose first tool calls fail at the HTTP level, on purpose.

The retry tests (test_mcp_retries.py) need a real server that fails the way a
Cloud Run service does while it starts or is overloaded: the HTTP request of a
``tools/call`` answered ``503`` (or any status given), before the MCP layer
sees it. ``--fail-first N`` fails the first N such requests, then the server
behaves; every ``tools/call`` request is counted, so a test can tell how many
attempts were made (``GET /calls``). Listing tools and the MCP handshake are
never failed, so only the call's own retries are measured.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

server = MCPServer("flaky")


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

    def __init__(self, app: ASGIApp, failures: int, status: int) -> None:
        self.app = app
        self.failures = failures
        self.status = status
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/calls":
            await JSONResponse({"calls": self.calls})(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await request.body()
        if _is_tool_call(body):
            self.calls += 1
            if self.calls <= self.failures:
                response: Response = PlainTextResponse("starting up", status_code=self.status)
                await response(scope, receive, send)
                return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _is_tool_call(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


def main() -> None:
    """Serve on 127.0.0.1:PORT until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=503)
    args = parser.parse_args()
    app = FailFirstCalls(server.streamable_http_app(host="127.0.0.1"), args.fail_first, args.status)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

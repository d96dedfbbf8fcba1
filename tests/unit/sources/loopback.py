"""A loopback HTTP server and an httpx transport that sends https requests to it.

The SNS code fetches certificates and confirms subscriptions only over https
from SNS hosts. The tests keep that code path whole — real httpx client, real
HTTP exchange — and change only where the bytes go: the transport rewrites
``https://sns.<region>.amazonaws.com/...`` to ``http://127.0.0.1:<port>/...``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


@dataclass
class Loopback:
    """What the server serves (path → status, body) and every path it was asked for."""

    port: int = 0
    routes: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)

    def hits_for(self, path: str) -> int:
        return sum(1 for hit in self.hits if hit.split("?", 1)[0] == path)


@contextmanager
def loopback_server() -> Iterator[Loopback]:
    """Serve ``Loopback.routes`` on 127.0.0.1 in a thread for the duration of the block."""
    state = Loopback()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                state.hits.append(self.path)
            status, body = state.routes.get(self.path.split("?", 1)[0], (404, b"not found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class LoopbackTransport(httpx.AsyncBaseTransport):
    """Send every request to ``http://127.0.0.1:port`` instead of its own host."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.requested: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requested.append(str(request.url))
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        # A fresh inner transport per request: the code under test closes its client
        # (and so this transport) after each fetch.
        async with httpx.AsyncHTTPTransport() as inner:
            response = await inner.handle_async_request(request)
            body = await response.aread()
            await response.aclose()
        return httpx.Response(response.status_code, headers=response.headers, content=body)

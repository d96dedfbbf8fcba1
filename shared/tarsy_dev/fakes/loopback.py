"""The machinery the vendor fakes share: a loopback HTTP server, a script of replies, a record.

Design constraint: a fake speaks its vendor's REST protocol byte for byte, so
the real SDK runs against it; only the model is scripted. Each fake
(:mod:`fake_openai`, :mod:`fake_anthropic`) supplies the request parser and the
response writer; this module serves, records and scripts.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field


class ScriptedToolCall(BaseModel):
    """A tool call the fake model makes; ``raw_arguments`` sends arguments that are not JSON."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    id: str | None = None

    def arguments_text(self) -> str:
        """The arguments as the wire carries them."""
        return self.raw_arguments if self.raw_arguments is not None else json.dumps(self.args)


class ScriptedReply(BaseModel):
    """One scripted model turn, or an HTTP error in place of one."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    thinking: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    # The vendor's own finish/stop reason; None: the natural one (stop, or tool calls).
    finish_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 20
    # An error reply: the HTTP status, the message, Retry-After if any.
    status: int = 200
    error_message: str = ""
    retry_after: float | None = None
    delay: float = 0.0
    stream_chunks: int = 1


class RecordedCall(BaseModel):
    """A request the fake received, as the SDK sent it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = Field(default_factory=dict)
    received_at: float = Field(default_factory=time.monotonic)


Responder = Callable[[RecordedCall], ScriptedReply]


def split_text(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` streamed parts (one when it is short)."""
    if pieces <= 1 or len(text) < pieces:
        return [text]
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


class LoopbackFake(ABC):
    """A scripted vendor on 127.0.0.1: start it, script replies, read what the SDK sent."""

    # Paths (exact, after any prefix) this vendor serves.
    paths: tuple[str, ...] = ()

    def __init__(self, *, responder: Responder | None = None, port: int = 0) -> None:
        self._script: deque[ScriptedReply] = deque()
        self._lock = threading.Lock()
        self.calls: list[RecordedCall] = []
        self.responder = responder
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's root URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def script(self, *replies: ScriptedReply) -> None:
        """Queue replies; each call takes the next one before asking the responder."""
        with self._lock:
            self._script.extend(replies)

    def next_reply(self, call: RecordedCall) -> ScriptedReply:
        """Record the call and decide its reply (an error 500 when nothing is scripted)."""
        with self._lock:
            self.calls.append(call)
            scripted = self._script.popleft() if self._script else None
        if scripted is not None:
            return scripted
        if self.responder is not None:
            return self.responder(call)
        return ScriptedReply(status=500, error_message="the fake has no reply scripted")

    # ── what each vendor supplies ──

    @abstractmethod
    def error_body(self, reply: ScriptedReply) -> dict[str, Any]:
        """The vendor's JSON error body."""

    @abstractmethod
    def events(self, reply: ScriptedReply, call: RecordedCall) -> Iterator[bytes]:
        """The vendor's server-sent events for a streamed reply."""

    @abstractmethod
    def whole(self, reply: ScriptedReply, call: RecordedCall) -> dict[str, Any]:
        """The vendor's JSON body for a reply that is not streamed."""


def _handler_for(fake: LoopbackFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests read ``fake.calls``."""

        def do_POST(self) -> None:
            """Serve the vendor's paths."""
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if not any(path.endswith(p) for p in fake.paths):
                self._json(404, {"error": {"message": f"no route {path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            call = RecordedCall(
                path=path, body=body, headers={k.lower(): v for k, v in self.headers.items()}
            )
            reply = fake.next_reply(call)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                headers = {}
                if reply.retry_after is not None:
                    headers["Retry-After"] = f"{reply.retry_after:g}"
                self._json(reply.status, fake.error_body(reply), headers)
            elif body.get("stream"):
                data = b"".join(fake.events(reply, call))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._json(200, fake.whole(reply, call))

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler

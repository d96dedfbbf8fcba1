"""A local HTTP server that speaks the Gemini REST protocol, for tests, benchmarks and the demo.

The real google-genai and LangChain SDKs are pointed at it with a base URL, so
every byte they send and parse is the real protocol; only the model is fake.
Replies come from a script (a queue of :class:`FakeReply`) and, when the
script is empty, from a responder callable.

Served paths (any API version prefix, Gemini API or Vertex style)::

    POST .../models/{model}:generateContent
    POST .../models/{model}:streamGenerateContent[?alt=sse]

Run it alone with ``python -m tarsy_dev.fakes.fake_gemini --port N``; by default
it answers with the clearly labelled :class:`StandInResponder`.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

STAND_IN_LABEL = "[scripted stand-in model — not a real LLM]"

_PATH = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")


class FakeToolCall(BaseModel):
    """A function call the fake model makes (``name`` in Gemini's ``server__tool`` form)."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    # Gemini puts a signature on the first function call of a turn when thinking is on.
    thought_signature: bytes | None = None


class FakeCodeExecution(BaseModel):
    """Code the model ran with the native code_execution tool, and what it printed."""

    code: str
    outcome: str = "OUTCOME_OK"
    output: str = ""


class FakeReply(BaseModel):
    """One scripted model turn, or an HTTP error in place of one."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    thinking: str = ""
    tool_calls: list[FakeToolCall] = Field(default_factory=list)
    code_executions: list[FakeCodeExecution] = Field(default_factory=list)
    thought_signature: bytes | None = None
    grounding: dict[str, Any] | None = None
    # A 200 answer with no candidates at all (the SDK sees an empty response).
    empty: bool = False
    # The last candidate's finishReason (MAX_TOKENS: cut at the limit; SAFETY: blocked).
    finish_reason: str = "STOP"
    input_tokens: int = 10
    output_tokens: int = 20
    thinking_tokens: int = 0
    # An error reply: the HTTP status and message Google would send, and Retry-After if any.
    status: int = 200
    error_message: str = ""
    retry_after: float | None = None
    # Seconds to wait before answering (latency, or to provoke client timeouts).
    delay: float = 0.0
    # Split text into this many streamed chunks (streamGenerateContent only).
    stream_chunks: int = 1
    # Seconds between streamed chunks (SSE only), to watch a call stream.
    chunk_delay: float = 0.0


class FakeCall(BaseModel):
    """A request the fake received, as the SDK sent it."""

    model: str
    method: str
    path: str
    body: dict[str, Any]
    # The Gemini API key the SDK sent (``x-goog-api-key``), None on Vertex AI.
    api_key: str | None = None
    # The ``Authorization`` header (``Bearer <token>`` on Vertex AI), None with an API key.
    authorization: str | None = None
    received_at: float = Field(default_factory=time.monotonic)

    @property
    def streaming(self) -> bool:
        """Whether this was a ``streamGenerateContent`` call."""
        return self.method == "streamGenerateContent"

    def system_text(self) -> str:
        """The system instruction's text."""
        system = self.body.get("systemInstruction") or self.body.get("system_instruction") or {}
        return "".join(part.get("text", "") for part in system.get("parts", []))

    def texts(self, role: str) -> list[str]:
        """The text of every content with this role, in order."""
        return [
            "".join(part.get("text", "") for part in content.get("parts", []))
            for content in self.body.get("contents", [])
            if content.get("role") == role
        ]

    def generation_config(self) -> dict[str, Any]:
        """The ``generationConfig`` the SDK sent (thinking config, temperature, ...)."""
        config: dict[str, Any] = self.body.get("generationConfig") or {}
        return config

    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` the SDK sent."""
        tools: list[dict[str, Any]] = self.body.get("tools") or []
        return tools

    def function_calling_config(self) -> dict[str, Any] | None:
        """The ``toolConfig.functionCallingConfig`` the SDK sent (tool_choice), if any."""
        tool_config = self.body.get("toolConfig") or self.body.get("tool_config") or {}
        config = tool_config.get("functionCallingConfig") or tool_config.get(
            "function_calling_config"
        )
        return dict(config) if config is not None else None

    def function_names(self) -> list[str]:
        """Names of the function declarations sent."""
        return [
            declaration["name"]
            for tool in self.tools()
            for declaration in tool.get("functionDeclarations") or []
        ]

    def model_parts(self) -> list[list[dict[str, Any]]]:
        """The parts of every model turn replayed in the request, in order."""
        return [
            list(content.get("parts", []))
            for content in self.body.get("contents", [])
            if content.get("role") == "model"
        ]

    def last_user_text(self) -> str:
        """The text of the last user content (empty if none)."""
        texts = self.texts("user")
        return texts[-1] if texts else ""


Responder = Callable[[FakeCall], FakeReply]


def _usage(reply: FakeReply) -> dict[str, int]:
    total = reply.input_tokens + reply.output_tokens + reply.thinking_tokens
    usage = {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": total,
    }
    if reply.thinking_tokens:
        usage["thoughtsTokenCount"] = reply.thinking_tokens
    return usage


def _split(text: str, pieces: int) -> list[str]:
    if pieces <= 1 or len(text) < pieces:
        return [text]
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def response_bodies(reply: FakeReply, model: str, *, streaming: bool) -> list[dict[str, Any]]:
    """The ``GenerateContentResponse`` JSON bodies for a reply (several when streamed)."""
    parts_per_body: list[list[dict[str, Any]]] = []
    if reply.thinking:
        parts_per_body.append([{"text": reply.thinking, "thought": True}])
    texts = _split(reply.text, reply.stream_chunks if streaming else 1) if reply.text else []
    parts_per_body.extend([{"text": text}] for text in texts)
    for execution in reply.code_executions:
        parts_per_body.append(
            [
                {"executableCode": {"language": "PYTHON", "code": execution.code}},
                {
                    "codeExecutionResult": {
                        "outcome": execution.outcome,
                        "output": execution.output,
                    }
                },
            ]
        )
    calls: list[dict[str, Any]] = []
    for call in reply.tool_calls:
        function_call: dict[str, Any] = {"name": call.name, "args": call.args}
        if call.id:
            function_call["id"] = call.id
        part: dict[str, Any] = {"functionCall": function_call}
        if call.thought_signature is not None:
            part["thoughtSignature"] = base64.b64encode(call.thought_signature).decode()
        calls.append(part)
    if calls:
        parts_per_body.append(calls)
    if not parts_per_body:
        parts_per_body.append([{"text": ""}])
    if reply.thought_signature is not None:
        # The API attaches the signature to the first part after the thoughts.
        target = (
            parts_per_body[1] if reply.thinking and len(parts_per_body) > 1 else parts_per_body[0]
        )
        target[0]["thoughtSignature"] = base64.b64encode(reply.thought_signature).decode()
    if reply.empty:
        return [{"candidates": [], "usageMetadata": _usage(reply), "modelVersion": model}]
    if not streaming:
        parts_per_body = [[part for parts in parts_per_body for part in parts]]
    bodies: list[dict[str, Any]] = []
    for index, parts in enumerate(parts_per_body):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        body: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
        if index == len(parts_per_body) - 1:
            candidate["finishReason"] = reply.finish_reason
            body["usageMetadata"] = _usage(reply)
            if reply.grounding is not None:
                candidate["groundingMetadata"] = reply.grounding
        bodies.append(body)
    return bodies


def _error_status(code: int) -> str:
    return {
        400: "INVALID_ARGUMENT",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
    }.get(code, "UNKNOWN")


class StandInResponder:
    """Answers every call with a labelled analysis built from what it was shown.

    It never pretends to be a model: every answer starts with
    :data:`STAND_IN_LABEL` and only restates the alert it received.
    """

    def __call__(self, call: FakeCall) -> FakeReply:
        """Build the stand-in analysis for one call."""
        prompt = call.last_user_text()
        excerpt = _alert_excerpt(prompt)
        text = (
            f"{STAND_IN_LABEL}\n\n"
            "## Root cause analysis\n\n"
            "No model was configured (set GEMINI_API_KEY or Vertex credentials for a real "
            "investigation), so this stand-in only restates the alert it was given:\n\n"
            f"{excerpt}\n\n"
            "## Recommended next steps\n\n"
            "1. Configure a real Gemini model and re-submit the alert.\n"
            "2. Check the affected workload's recent events and logs."
        )
        return FakeReply(text=text, input_tokens=max(1, len(prompt) // 4), output_tokens=80)


# The untrusted blocks of a prompt (tarsy.agent.prompts.delimit); the first is what it restates.
_DELIMITED = re.compile(r"<<<BEGIN ([^>]+)>>>\n(.*?)\n<<<END \1>>>", re.DOTALL)
# delimit() defuses markers inside the data with a zero-width space; a person never sees it.
_DEFUSED = "\u200b"


def restated(prompt: str) -> str:
    """What the stand-in restates: the data of the prompt's first delimited block.

    That is the alert data, or the analysis a summary or chat is about; never the
    prompt's markers and instructions.

    The zero-width spaces that defused markers inside the data are dropped first, so a
    block inside it (an analysis that quoted its own prompt) is unwrapped the same way.
    """
    text = prompt.replace(_DEFUSED, "")
    while (block := _DELIMITED.search(text)) is not None:
        text = block.group(2)
    return text


def _alert_excerpt(prompt: str, limit: int = 1200) -> str:
    lines = [line for line in restated(prompt).splitlines() if line.strip()]
    excerpt = "\n".join(f"> {line}" for line in lines)
    return excerpt if len(excerpt) <= limit else excerpt[:limit] + "\n> …"


class FakeGemini:
    """The fake server: start it, script replies, read what the SDK sent.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
    ) -> None:
        self._script: deque[FakeReply] = deque()
        self._lock = threading.Lock()
        self.calls: list[FakeCall] = []
        self.responder: Responder = responder or StandInResponder()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL to give the SDK (``http_options.base_url`` / ``GEMINI_BASE_URL``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeGemini:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-gemini", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def script(self, *replies: FakeReply) -> None:
        """Queue replies; each call takes the next one before asking the responder."""
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        """Forget queued replies and recorded calls."""
        with self._lock:
            self._script.clear()
            self.calls.clear()

    def next_reply(self, call: FakeCall) -> FakeReply:
        """Record the call and decide its reply."""
        with self._lock:
            self.calls.append(call)
            scripted = self._script.popleft() if self._script else None
        return scripted if scripted is not None else self.responder(call)


class _Handler(BaseHTTPRequestHandler):
    """The fake's HTTP side; a subclass per fake names it (:func:`_handler_for`)."""

    fake: FakeGemini
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read :attr:`FakeGemini.calls` instead."""

    def do_POST(self) -> None:
        """Serve generateContent and streamGenerateContent."""
        parsed = urlsplit(self.path)
        call = self._read_call(parsed.path)
        if call is None:
            return
        reply = self.fake.next_reply(call)
        if reply.delay:
            time.sleep(reply.delay)
        self._answer(call, reply, sse="alt=sse" in (parsed.query or ""))

    def _read_call(self, path: str) -> FakeCall | None:
        """The request as a call; None once a 404 or 400 has been answered."""
        match = _PATH.search(path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if match is None:
            self._send_json(404, {"error": {"code": 404, "message": f"no route {path}"}})
            return None
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"code": 400, "message": "body is not JSON"}})
            return None
        return FakeCall(
            model=match["model"],
            method=match["method"],
            path=path,
            body=body,
            api_key=self.headers.get("x-goog-api-key"),
            authorization=self.headers.get("Authorization"),
        )

    def _answer(self, call: FakeCall, reply: FakeReply, *, sse: bool) -> None:
        if reply.status != 200:
            self._send_error(reply)
        elif call.streaming and sse:
            bodies = response_bodies(reply, call.model, streaming=True)
            if reply.chunk_delay:
                self._send_sse_paced(bodies, reply.chunk_delay)
            else:
                self._send_sse(bodies)
        elif call.streaming:
            self._send_json(200, response_bodies(reply, call.model, streaming=True))
        else:
            self._send_json(200, response_bodies(reply, call.model, streaming=False)[0])

    def _send_error(self, reply: FakeReply) -> None:
        error = {
            "code": reply.status,
            "message": reply.error_message or HTTPStatus(reply.status).phrase,
            "status": _error_status(reply.status),
        }
        headers = {}
        if reply.retry_after is not None:
            headers["Retry-After"] = f"{reply.retry_after:g}"
        self._send_json(reply.status, {"error": error}, headers)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, bodies: list[dict[str, Any]]) -> None:
        data = b"".join(_sse_events(bodies))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse_paced(self, bodies: list[dict[str, Any]], delay: float) -> None:
        # No length is known up front: stream the events and close the connection.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for n, event in enumerate(_sse_events(bodies)):
            if n:
                time.sleep(delay)
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True


def _handler_for(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"fake": fake})


def _sse_events(bodies: list[dict[str, Any]]) -> Iterator[bytes]:
    for body in bodies:
        yield b"data: " + json.dumps(body).encode() + b"\r\n\r\n"

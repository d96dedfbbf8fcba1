"""A loopback server speaking OpenAI chat completions (SSE, ``tool_calls``, ``response_format``).

The real ``openai`` SDK is pointed at it (``base_url=fake.url + "/v1"``), for
the openai, xai and openai-compatible types. Served: ``POST .../chat/completions``,
streamed (``stream: true``, server-sent ``chat.completion.chunk`` events ending
with ``data: [DONE]``) or whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from tarsy_dev.fakes.loopback import LoopbackFake, RecordedCall, ScriptedReply, split_text


def _finish(reply: ScriptedReply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _usage(reply: ScriptedReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


class FakeOpenAI(LoopbackFake):
    """OpenAI chat completions on loopback; ``calls[n].body`` is what the SDK sent."""

    paths = ("/chat/completions",)

    @property
    def base_url(self) -> str:
        """What to give the SDK (``…/v1``)."""
        return f"{self.url}/v1"

    def error_body(self, reply: ScriptedReply) -> dict[str, Any]:
        """OpenAI's error object."""
        return {
            "error": {
                "message": reply.error_message or f"error {reply.status}",
                "type": "rate_limit_exceeded" if reply.status == 429 else "server_error",
                "param": None,
                "code": None,
            }
        }

    def _chunk(self, call: RecordedCall, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": call.body.get("model", "fake"),
            "choices": choices,
            **extra,
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def events(self, reply: ScriptedReply, call: RecordedCall) -> Iterator[bytes]:
        """Role, reasoning, text pieces, tool-call deltas, the finish reason, usage, [DONE]."""
        yield self._chunk(call, [{"index": 0, "delta": {"role": "assistant"}}])
        if reply.thinking:
            yield self._chunk(call, [{"index": 0, "delta": {"reasoning_content": reply.thinking}}])
        if reply.text:
            for piece in split_text(reply.text, reply.stream_chunks):
                yield self._chunk(call, [{"index": 0, "delta": {"content": piece}}])
        for n, tool in enumerate(reply.tool_calls):
            arguments = tool.arguments_text()
            half = len(arguments) // 2  # arguments arrive in pieces, as they do from OpenAI
            first = {
                "index": n,
                "id": tool.id or f"call_{n}",
                "type": "function",
                "function": {"name": tool.name, "arguments": arguments[:half]},
            }
            yield self._chunk(call, [{"index": 0, "delta": {"tool_calls": [first]}}])
            rest = {"index": n, "function": {"arguments": arguments[half:]}}
            yield self._chunk(call, [{"index": 0, "delta": {"tool_calls": [rest]}}])
        yield self._chunk(call, [{"index": 0, "delta": {}, "finish_reason": _finish(reply)}])
        if (call.body.get("stream_options") or {}).get("include_usage"):
            yield self._chunk(call, [], usage=_usage(reply))
        yield b"data: [DONE]\n\n"

    def whole(self, reply: ScriptedReply, call: RecordedCall) -> dict[str, Any]:
        """One ``chat.completion``."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tool.id or f"call_{n}",
                    "type": "function",
                    "function": {"name": tool.name, "arguments": tool.arguments_text()},
                }
                for n, tool in enumerate(reply.tool_calls)
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
            "usage": _usage(reply),
        }

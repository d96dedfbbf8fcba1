"""A loopback server speaking Anthropic's messages API (SSE events, ``tool_use`` blocks).

The real ``anthropic`` SDK is pointed at it (``base_url=fake.url``). Served:
``POST /v1/messages``, streamed (``message_start`` … ``message_stop``) or whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tarsy_dev.fakes.loopback import LoopbackFake, RecordedCall, ScriptedReply, split_text


def _stop(reply: ScriptedReply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_use" if reply.tool_calls else "end_turn"


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


class FakeAnthropic(LoopbackFake):
    """Anthropic messages on loopback; ``calls[n].body`` is what the SDK sent."""

    paths = ("/v1/messages",)

    def error_body(self, reply: ScriptedReply) -> dict[str, Any]:
        """Anthropic's error object."""
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(reply.status, "api_error")
        message = reply.error_message or f"error {reply.status}"
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _message(
        self, reply: ScriptedReply, call: RecordedCall, content: list[Any]
    ) -> dict[str, Any]:
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": call.body.get("model", "fake"),
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
        }

    def events(self, reply: ScriptedReply, call: RecordedCall) -> Iterator[bytes]:
        """message_start, a block per text / tool_use with deltas, message_delta, message_stop."""
        yield _event("message_start", {"message": self._message(reply, call, [])})
        index = 0
        if reply.thinking:
            yield _event(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
            yield _event(
                "content_block_delta",
                {"index": index, "delta": {"type": "thinking_delta", "thinking": reply.thinking}},
            )
            yield _event("content_block_stop", {"index": index})
            index += 1
        if reply.text:
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for piece in split_text(reply.text, reply.stream_chunks):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": piece}},
                )
            yield _event("content_block_stop", {"index": index})
            index += 1
        for n, tool in enumerate(reply.tool_calls):
            block = {
                "type": "tool_use",
                "id": tool.id or f"toolu_{n}",
                "name": tool.name,
                "input": {},
            }
            yield _event("content_block_start", {"index": index, "content_block": block})
            arguments = tool.arguments_text()
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": part}},
                )
            yield _event("content_block_stop", {"index": index})
            index += 1
        yield _event(
            "message_delta",
            {
                "delta": {"stop_reason": _stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            },
        )
        yield _event("message_stop", {})

    def whole(self, reply: ScriptedReply, call: RecordedCall) -> dict[str, Any]:
        """One message."""
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for n, tool in enumerate(reply.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": tool.id or f"toolu_{n}",
                    "name": tool.name,
                    "input": tool.args,
                }
            )
        message = self._message(reply, call, content)
        message["stop_reason"] = _stop(reply)
        message["usage"]["output_tokens"] = reply.output_tokens
        return message

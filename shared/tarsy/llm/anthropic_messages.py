"""Anthropic's messages API through the official ``anthropic`` SDK (the ``anthropic`` type).

Design constraint: this is the only module that imports ``anthropic``; its
exceptions are translated here, once, into :class:`~tarsy.errors.LLMError`,
and the SDK's own retries are off (the transport layer owns them).

Why the official SDK (not LangChain's integration): its raw stream events carry
text, ``tool_use`` blocks with their JSON arriving in pieces, ``stop_reason``
and usage, and its errors carry the HTTP response (``Retry-After``), with no
wrapper in between.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import anthropic
from anthropic import AsyncAnthropic

from tarsy.errors import LLMError
from tarsy.llm.base import (
    Chunk,
    FinalChunk,
    GenerateRequest,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolDefinition,
    UsageChunk,
    finish_reason,
)
from tarsy.llm.provider import StreamingProvider, api_key
from tarsy.llm.retry import classify_status, parse_retry_after
from tarsy.llm.tool_names import from_function_name, to_function_name
from tarsy.models import ConversationMessage, TokenUsage
from tarsy.settings import Settings

if TYPE_CHECKING:
    from tarsy.llm.backends.base import Backend

logger = logging.getLogger(__name__)

# The messages API requires max_tokens; this is every current Claude model's floor.
DEFAULT_MAX_TOKENS = 8192

_clients: dict[tuple[str | None, str | None], AsyncAnthropic] = {}
_clients_lock = threading.Lock()


def _client(key: str | None, base_url: str | None) -> AsyncAnthropic:
    """The process-wide client for this key and URL, created on first use (no SDK retries)."""
    with _clients_lock:
        client = _clients.get((key, base_url))
        if client is None:
            client = AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0)
            _clients[(key, base_url)] = client
        return client


def llm_error(exc: BaseException) -> LLMError | None:
    """Translate an SDK exception, once, into LLMError; None if it is not one."""
    if isinstance(exc, anthropic.APIStatusError):
        return LLMError(
            # 529 "overloaded" is a server-side condition like 503.
            classify_status(exc.status_code),
            str(exc.message),
            code=str(exc.status_code),
            retry_after=parse_retry_after(exc.response.headers.get("retry-after")),
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError("timeout", f"timeout: {exc}", code="timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMError("connection", f"connection error: {exc}", code="connection")
    if isinstance(exc, anthropic.APIError):
        return LLMError("server", f"unreadable response: {exc}", code="bad_response")
    return None


# ─── conversion ───────────────────────────────────────────────────────────────


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def to_messages(messages: Sequence[ConversationMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The conversation as (system, messages): roles alternate, tool results are user blocks.

    Consecutive user-side messages (text and tool results) merge into one user
    turn, as the API requires. A tool result whose call is not in the
    conversation becomes text.
    """
    system: list[str] = []
    converted: list[dict[str, Any]] = []
    calls: set[str] = set()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if converted and converted[-1]["role"] == role:
            converted[-1]["content"].extend(blocks)
        else:
            converted.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            add("user", [{"type": "text", "text": message.content}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": to_function_name(call.name),
                        "input": _arguments(call.arguments),
                    }
                )
                calls.add(call.id)
            add("assistant", blocks or [{"type": "text", "text": "(no answer)"}])
        elif message.tool_call_id is not None and message.tool_call_id in calls:
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id,
                        "content": message.content,
                    }
                ],
            )
        else:
            name = message.tool_name or "unknown tool"
            add("user", [{"type": "text", "text": f"Result of {name}:\n{message.content}"}])
    return "\n\n".join(system), converted


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as Anthropic tools (``input_schema``)."""
    return [
        {
            "name": to_function_name(tool.name),
            "description": tool.description,
            "input_schema": tool.parameters,
        }
        for tool in tools
    ]


def tool_choice(choice: str | None) -> dict[str, Any] | None:
    """The API's ``tool_choice`` for ours (None: not sent, the API's default "auto")."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": to_function_name(choice)}


class AnthropicProvider(StreamingProvider):
    """Messages API, streamed: text, thinking, tool use, usage and the stop reason."""

    name = "anthropic-messages"

    def __init__(self, backend: Backend, settings: Settings) -> None:
        self._backend = backend
        self._settings = settings

    def _arguments(self, request: GenerateRequest) -> dict[str, Any]:
        config = request.config
        system, messages = to_messages(request.messages)
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "max_tokens": config.max_output_tokens or DEFAULT_MAX_TOKENS,
            "stream": True,
        }
        if system:
            # One cache breakpoint after the static part (tools, then the system prompt: the
            # order Anthropic caches in): an agent's sessions share it, and below the
            # model's minimum cacheable length the marker is simply not used.
            kwargs["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        if config.temperature is not None:
            kwargs["temperature"] = min(config.temperature, 1.0)  # Anthropic's range is 0-1
        if request.tools:
            kwargs["tools"] = to_tools(request.tools)
            choice = tool_choice(request.tool_choice)
            if choice is not None:
                kwargs["tool_choice"] = choice
        return kwargs

    async def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """One streamed call: text and thinking as they arrive, then tool calls and usage."""
        names = {to_function_name(tool.name): tool.name for tool in request.tools}
        client = _client(
            api_key(self._backend, request.config, self._settings), request.config.base_url
        )
        uses: dict[int, tuple[str, str, list[str]]] = {}  # block index → (id, name, JSON parts)
        input_tokens = output_tokens = 0
        raw_finish: str | None = None
        try:
            stream = await client.messages.create(**self._arguments(request))
            async for event in stream:
                if event.type == "message_start":
                    input_tokens = event.message.usage.input_tokens or 0
                    output_tokens = event.message.usage.output_tokens or 0
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        uses[event.index] = (block.id, block.name, [])
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta" and delta.text:
                        yield TextChunk(text=delta.text)
                    elif delta.type == "thinking_delta" and delta.thinking:
                        yield ThinkingChunk(text=delta.thinking)
                    elif delta.type == "input_json_delta" and event.index in uses:
                        uses[event.index][2].append(delta.partial_json)
                elif event.type == "message_delta":
                    raw_finish = event.delta.stop_reason or raw_finish
                    output_tokens = event.usage.output_tokens or output_tokens
        except Exception as exc:
            error = llm_error(exc)
            if error is None:
                raise
            raise error from exc
        for index in sorted(uses):
            call_id, name, parts = uses[index]
            yield ToolCallChunk(
                call_id=call_id or f"call-{uuid.uuid4().hex[:12]}",
                name=names.get(name) or _canonical(name),
                arguments=_normalized("".join(parts)),
            )
        yield UsageChunk(
            usage=TokenUsage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            )
        )
        yield FinalChunk(finish_reason=finish_reason(raw_finish), raw_finish_reason=raw_finish)


def _normalized(arguments: str) -> str:
    """Arguments with sorted keys when they are JSON; as sent otherwise (the tool says why)."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        logger.warning("a tool_use block's input is not JSON: %.200s", arguments)
        return arguments


def _canonical(function_name: str) -> str:
    try:
        return from_function_name(function_name)
    except ValueError:
        return function_name

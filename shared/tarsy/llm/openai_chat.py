"""OpenAI chat completions through the official ``openai`` SDK: openai, xai, openai-compatible.

Design constraint: this is the only module that imports ``openai``; its
exceptions are translated here, once, into :class:`~tarsy.errors.LLMError`
(status, ``Retry-After``), and the SDK's own retries are off (the transport
layer, :mod:`tarsy.llm.retry`, owns them).

Why the official SDK rather than LangChain's integration: it streams typed
chunks with the tool-call deltas, ``finish_reason`` and usage (with
``stream_options.include_usage``) as the API sends them, takes ``base_url``
for any compatible server, passes ``response_format`` through unchanged, and
raises typed errors carrying the HTTP response, which is all this adapter
needs; LangChain would wrap the same SDK and hide the finish reason in
response metadata.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import openai
from openai import AsyncOpenAI

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

# A compatible server usually wants no key, but the SDK refuses to start without one;
# this one is sent as "Bearer not-needed" and ignored by such servers.
NO_KEY = "not-needed"

_clients: dict[tuple[str | None, str | None, str | None], AsyncOpenAI] = {}
_clients_lock = threading.Lock()


def _client(api_key: str, base_url: str | None, organization: str | None) -> AsyncOpenAI:
    """The process-wide client for this key and URL, created on first use (no SDK retries)."""
    key = (api_key, base_url, organization)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = AsyncOpenAI(
                api_key=api_key, base_url=base_url, organization=organization, max_retries=0
            )
            _clients[key] = client
        return client


def llm_error(exc: BaseException) -> LLMError | None:
    """Translate an SDK exception, once, into LLMError; None if it is not one."""
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        retry_after = parse_retry_after(headers.get("retry-after"))
        if retry_after is None and headers.get("retry-after-ms"):
            milliseconds = parse_retry_after(headers.get("retry-after-ms"))
            retry_after = milliseconds / 1000 if milliseconds is not None else None
        return LLMError(
            classify_status(exc.status_code),
            str(exc.message),
            code=str(exc.status_code),
            retry_after=retry_after,
        )
    if isinstance(exc, openai.APITimeoutError):
        return LLMError("timeout", f"timeout: {exc}", code="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return LLMError("connection", f"connection error: {exc}", code="connection")
    if isinstance(exc, openai.APIResponseValidationError | openai.APIError):
        return LLMError("server", f"unreadable response: {exc}", code="bad_response")
    return None


# ─── conversion ───────────────────────────────────────────────────────────────


def to_messages(messages: Sequence[ConversationMessage]) -> list[dict[str, Any]]:
    """The conversation as chat-completion messages; tool names as ``server__tool``.

    System messages merge into one leading system message. A tool result whose
    call is not in the conversation becomes a user message (the API rejects a
    ``tool`` message that answers no call).
    """
    system: list[str] = []
    converted: list[dict[str, Any]] = []
    calls: set[str] = set()
    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            converted.append({"role": "user", "content": message.content})
        elif message.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": to_function_name(call.name),
                            "arguments": call.arguments or "{}",
                        },
                    }
                    for call in message.tool_calls
                ]
                calls.update(call.id for call in message.tool_calls)
            converted.append(turn)
        elif message.tool_call_id is not None and message.tool_call_id in calls:
            converted.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        else:
            name = message.tool_name or "unknown tool"
            converted.append({"role": "user", "content": f"Result of {name}:\n{message.content}"})
    if system:
        converted.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return converted


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as chat-completion function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": to_function_name(tool.name),
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def tool_choice(choice: str | None) -> str | dict[str, Any] | None:
    """The API's ``tool_choice`` for ours (None: not sent, the API's default "auto")."""
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": to_function_name(choice)}}


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """``response_format`` constraining every reply to ``schema``.

    Not ``strict``: OpenAI's strict mode rejects schemas with optional
    properties or ``anyOf`` at the top, which tool parameter schemas have;
    compatible servers (llama.cpp, vLLM) constrain decoding either way.
    """
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


def _usage(usage: Any) -> TokenUsage:
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = (getattr(details, "reasoning_tokens", None) or 0) if details else 0
    completion = usage.completion_tokens or 0
    return TokenUsage(
        input_tokens=usage.prompt_tokens or 0,
        # Reasoning tokens are counted in completion_tokens; TokenUsage keeps them apart.
        output_tokens=max(0, completion - reasoning),
        total_tokens=usage.total_tokens or 0,
        thinking_tokens=reasoning,
    )


class _PendingCall:
    """A tool call assembled from its streamed deltas."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class OpenAIChatProvider(StreamingProvider):
    """Chat completions, streamed: text, reasoning text (compatible servers), tool calls, usage."""

    name = "openai-chat"

    def __init__(self, backend: Backend, settings: Settings) -> None:
        self._backend = backend
        self._settings = settings

    def _api_key(self, request: GenerateRequest) -> str:
        key = api_key(self._backend, request.config, self._settings)
        return NO_KEY if key is None else key

    def _arguments(self, request: GenerateRequest) -> dict[str, Any]:
        config = request.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": to_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.max_output_tokens is not None:
            kwargs["max_completion_tokens"] = config.max_output_tokens
        if request.tools:
            kwargs["tools"] = to_tools(request.tools)
            choice = tool_choice(request.tool_choice)
            if choice is not None:
                kwargs["tool_choice"] = choice
        if request.response_schema is not None:
            kwargs["response_format"] = response_format(request.response_schema)
        return kwargs

    async def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """One streamed call: text and reasoning as they arrive, then calls, usage, the reason."""
        names = {to_function_name(tool.name): tool.name for tool in request.tools}
        client = _client(
            self._api_key(request),
            request.config.base_url or self._backend.default_base_url,
            request.config.organization,
        )
        pending: dict[int, _PendingCall] = {}
        usage: TokenUsage | None = None
        raw_finish: str | None = None
        timings: dict[str, float] = {}
        try:
            stream = await client.chat.completions.create(**self._arguments(request))
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                timings = server_timings(getattr(chunk, "timings", None)) or timings
                for choice in chunk.choices:
                    delta = choice.delta
                    # llama.cpp, vLLM and DeepSeek stream reasoning as an extra field.
                    reasoning = getattr(delta, "reasoning_content", None)
                    if isinstance(reasoning, str) and reasoning:
                        yield ThinkingChunk(text=reasoning)
                    if delta.content:
                        yield TextChunk(text=delta.content)
                    for part in delta.tool_calls or []:
                        call = pending.setdefault(part.index, _PendingCall())
                        call.id = part.id or call.id
                        if part.function is not None:
                            call.name += part.function.name or ""
                            call.arguments.append(part.function.arguments or "")
                    if choice.finish_reason:
                        raw_finish = choice.finish_reason
        except Exception as exc:
            error = llm_error(exc)
            if error is None:
                raise
            raise error from exc
        for index in sorted(pending):
            call = pending[index]
            yield ToolCallChunk(
                call_id=call.id or f"call-{uuid.uuid4().hex[:12]}",
                name=names.get(call.name) or _canonical(call.name),
                arguments=_normalized("".join(call.arguments)),
            )
        if usage is not None:
            yield UsageChunk(usage=usage)
        yield FinalChunk(
            finish_reason=finish_reason(raw_finish),
            raw_finish_reason=raw_finish,
            metadata={"server_timings": timings} if timings else {},
        )


# llama-server's own account of a call (an extra field of its last chunk): how many prompt
# tokens it read and how long that took, and the same for what it wrote.
_TIMING_KEYS = ("cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms")


def server_timings(raw: Any) -> dict[str, float]:
    """The server's timings of a call, where it reports them (llama-server), else empty."""
    if not isinstance(raw, dict):
        return {}
    return {k: float(raw[k]) for k in _TIMING_KEYS if isinstance(raw.get(k), int | float)}


def _normalized(arguments: str) -> str:
    """Arguments with sorted keys when they are JSON; as sent otherwise (the tool says why)."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        logger.warning("a tool call's arguments are not JSON: %.200s", arguments)
        return arguments


def _canonical(function_name: str) -> str:
    """A called name that was not offered: canonical if it has the form, else as is."""
    try:
        return from_function_name(function_name)
    except ValueError:
        return function_name

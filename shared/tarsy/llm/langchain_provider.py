"""The ``langchain`` backend: LangChain chat models, streamed (ReAct and synthesis).

Gemini, on the Gemini API or on Vertex AI, goes through langchain-google-genai's
``ChatGoogleGenerativeAI`` (``vertexai=True`` for Vertex: ``ChatVertexAI`` is
deprecated since langchain-google-vertexai 3.2). Model Garden partner models
(Claude on Vertex) go through langchain-google-vertexai, imported only when
such a model is configured.

LangChain's own retries are turned off: the transport layer in
:mod:`tarsy.llm.retry` owns them. SDK exceptions are translated here, once,
into :class:`~tarsy.errors.LLMError`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
from google.auth import exceptions as auth_errors
from google.genai import errors as genai_errors
from langchain_core import exceptions as lc_errors
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call
from langchain_google_genai import ChatGoogleGenerativeAI

from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError, FailureKind, LLMError
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
from tarsy.llm.endpoint import Endpoint, resolve_endpoint
from tarsy.llm.partner_models import is_partner_model
from tarsy.llm.provider import StreamingProvider
from tarsy.llm.retry import classify_status, parse_retry_after
from tarsy.llm.tool_names import from_function_name, to_function_name
from tarsy.models import ConversationMessage, TokenUsage
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

# One HTTP request per call. ChatGoogleGenerativeAI passes max_retries to
# google-genai as HttpRetryOptions(attempts=...), where 1 means "no retry"; its
# docs warn that 0 may mean "the SDK default" (5 retries), so 0 is not used.
SINGLE_ATTEMPT = 1

_models: dict[tuple[Any, ...], BaseChatModel] = {}
_models_lock = threading.Lock()


def chat_model(
    config: LLMProviderConfig, endpoint: Endpoint, credentials: Any = None
) -> BaseChatModel:
    """Return the process-wide chat model for this endpoint and model, creating it once.

    ``credentials`` (a ``google.auth`` credentials object) is for Vertex AI;
    without it, Application Default Credentials are used. An endpoint with an
    API key talks to the Gemini API; Claude is on Vertex AI only.
    """
    key = (
        *endpoint.cache_key(),
        id(credentials),  # the cached model keeps the object alive, so the id stays unique
        config.model,
        config.temperature,
        config.max_output_tokens,
    )
    with _models_lock:
        model = _models.get(key)
        if model is None:
            if is_partner_model(config.model):
                model = _partner_model(config, endpoint, credentials)
            else:
                model = _gemini_model(config, endpoint, credentials)
            _models[key] = model
        return model


def _gemini_model(config: LLMProviderConfig, endpoint: Endpoint, credentials: Any) -> BaseChatModel:
    common: dict[str, Any] = {
        "model": config.model,
        # None leaves the model's default (LangChain's own default is 0.7).
        "temperature": config.temperature,
        "max_output_tokens": config.max_output_tokens,
        "max_retries": SINGLE_ATTEMPT,
        "base_url": endpoint.base_url,
    }
    if endpoint.api_key is not None:
        return ChatGoogleGenerativeAI(api_key=endpoint.api_key, vertexai=False, **common)
    return ChatGoogleGenerativeAI(
        vertexai=True,
        project=endpoint.project,
        location=endpoint.location,
        credentials=credentials,
        **common,
    )


def _partner_model(
    config: LLMProviderConfig, endpoint: Endpoint, credentials: Any
) -> BaseChatModel:
    from langchain_google_vertexai.model_garden import ChatAnthropicVertex

    kwargs: dict[str, Any] = {}
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if config.max_output_tokens is not None:
        kwargs["max_output_tokens"] = config.max_output_tokens
    model: BaseChatModel = ChatAnthropicVertex(
        model_name=config.model,
        project=endpoint.project,
        location=endpoint.location,
        credentials=credentials,
        max_retries=SINGLE_ATTEMPT,
        **kwargs,
    )
    return model


# ─── errors ───────────────────────────────────────────────────────────────────

_RETRY_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (LangChain wraps the SDK's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _retry_info_delay(details: Any) -> float | None:
    """The ``google.rpc.RetryInfo`` delay in a Google error body (``"retryDelay": "7s"``)."""
    error = details.get("error") if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _RETRY_DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _headers(exc: BaseException) -> Any:
    return getattr(getattr(exc, "response", None), "headers", None) or {}


def _from_status(status: int, message: str, exc: BaseException, details: Any = None) -> LLMError:
    retry_after = parse_retry_after(_headers(exc).get("retry-after"))
    if retry_after is None:
        retry_after = _retry_info_delay(details)
    return LLMError(classify_status(status), message, code=str(status), retry_after=retry_after)


_MODEL_ERROR_KINDS: tuple[tuple[type[lc_errors.ModelError], FailureKind, str], ...] = (
    (lc_errors.ModelRateLimitError, "rate_limit", "429"),
    (lc_errors.ModelTimeoutError, "timeout", "timeout"),
    (lc_errors.ModelConnectionError, "connection", "connection"),
    (lc_errors.ModelAPIError, "server", "server"),
)


def llm_error(exc: BaseException) -> LLMError | None:
    """Translate an SDK or transport exception, once, into LLMError; None if it is not one."""
    chain = list(_causes(exc))
    for cause in chain:
        if isinstance(cause, genai_errors.APIError):
            status = int(cause.code) if cause.code else 0
            return _from_status(status, str(cause.message or cause), cause, cause.details)
    for cause in chain:
        # Partner SDKs (anthropic's APIStatusError) carry the HTTP status here.
        status_code = getattr(cause, "status_code", None)
        if isinstance(status_code, int):
            return _from_status(status_code, str(cause), cause)
    for cause in chain:
        if isinstance(cause, httpx.TimeoutException):
            return LLMError("timeout", f"timeout: {cause}", code="timeout")
        if isinstance(cause, httpx.TransportError | auth_errors.TransportError):
            return LLMError("connection", f"connection error: {cause}", code="connection")
        if isinstance(cause, auth_errors.GoogleAuthError):
            auth_kind: FailureKind = (
                "connection" if getattr(cause, "retryable", False) else "client"
            )
            return LLMError(auth_kind, f"authentication failed: {cause}", code="auth")
    if isinstance(exc, lc_errors.ModelError):
        for error_type, kind, code in _MODEL_ERROR_KINDS:
            if isinstance(exc, error_type):
                return LLMError(kind, str(exc), code=code)
        return LLMError("client", str(exc), code="client")
    return None


# ─── conversion ───────────────────────────────────────────────────────────────


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def to_messages(messages: Sequence[ConversationMessage]) -> list[BaseMessage]:
    """Convert the conversation to LangChain messages.

    System messages are merged into one leading ``SystemMessage`` (Gemini takes a
    single system instruction). Tool names become ``server__tool``. A tool
    result whose call is not in the conversation becomes a user message, since
    LangChain would otherwise drop it silently.
    """
    system: list[str] = []
    converted: list[BaseMessage] = []
    calls: dict[str, str] = {}  # call id → function name
    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            converted.append(HumanMessage(content=message.content))
        elif message.role == "assistant":
            tool_calls = [
                tool_call(name=to_function_name(c.name), args=_arguments(c.arguments), id=c.id)
                for c in message.tool_calls
            ]
            calls.update((c.id, to_function_name(c.name)) for c in message.tool_calls)
            converted.append(AIMessage(content=message.content, tool_calls=tool_calls))
        elif message.tool_call_id is not None and message.tool_call_id in calls:
            converted.append(
                ToolMessage(
                    content=message.content,
                    tool_call_id=message.tool_call_id,
                    name=calls[message.tool_call_id],
                )
            )
        else:
            name = message.tool_name or "unknown tool"
            converted.append(HumanMessage(content=f"Result of {name}:\n{message.content}"))
    if system:
        converted.insert(0, SystemMessage(content="\n\n".join(system)))
    return converted


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions in the OpenAI function format ``bind_tools`` takes, Gemini-safe names."""
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


def _content_chunks(message: AIMessageChunk) -> list[Chunk]:
    chunks: list[Chunk] = []
    for block in message.content_blocks:
        if block["type"] == "text" and block["text"]:
            chunks.append(TextChunk(text=block["text"]))
        elif block["type"] == "reasoning" and block.get("reasoning"):
            chunks.append(ThinkingChunk(text=block.get("reasoning", "")))
    return chunks


def _usage(message: AIMessageChunk) -> TokenUsage | None:
    usage = message.usage_metadata
    if usage is None:
        return None
    reasoning = (usage.get("output_token_details") or {}).get("reasoning", 0) or 0
    return TokenUsage(
        input_tokens=usage["input_tokens"],
        # LangChain counts thoughts in output_tokens; TokenUsage keeps them apart.
        output_tokens=max(0, usage["output_tokens"] - reasoning),
        total_tokens=usage["total_tokens"],
        thinking_tokens=reasoning,
    )


def _thinking_kwargs(config: LLMProviderConfig) -> dict[str, Any]:
    """Call-time thinking options for Gemini (partner models take none)."""
    if not config.thinking or is_partner_model(config.model):
        return {}
    kwargs: dict[str, Any] = {"include_thoughts": True}
    if config.thinking_budget is not None:
        kwargs["thinking_budget"] = config.thinking_budget
    if config.thinking_level is not None:
        kwargs["thinking_level"] = config.thinking_level.lower()
    return kwargs


def lc_tool_choice(choice: str | None, model: str) -> str | dict[str, str] | None:
    """LangChain's ``tool_choice`` for ours (None: not set, the model's default).

    Gemini takes "auto" / "any" / "none" / a function name; Claude on Vertex takes
    "auto" / "any" / a tool name, and {"type": "none"} passes through to its API.
    """
    if choice is None or choice == "auto":
        return choice
    if choice == "required":
        return "any"
    if choice == "none":
        return {"type": "none"} if is_partner_model(model) else "none"
    return to_function_name(choice)


class LangChainProvider(StreamingProvider):
    """LangChain chat models: streaming, function calling via ``bind_tools``, or plain text."""

    name = "langchain"

    def __init__(self, settings: Settings, *, credentials: Any = None) -> None:
        self._settings = settings
        self._credentials = credentials

    async def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """One streamed call: text and thinking as they arrive, then tool calls and usage."""
        config = request.config
        metadata: dict[str, Any] = {}
        if config.native_tools:
            logger.warning(
                "native tools %s ignored: the langchain backend does not offer them",
                config.native_tools,
            )
            metadata["native_tools_suppressed"] = list(config.native_tools)
        names = {to_function_name(tool.name): tool.name for tool in request.tools}
        endpoint = resolve_endpoint(config, self._settings)
        try:
            model = chat_model(config, endpoint, self._credentials)
        except (ImportError, ValueError) as exc:
            raise ConfigError(f"cannot create chat model {config.model!r}: {exc}") from exc
        kwargs = _thinking_kwargs(config)
        choice = lc_tool_choice(request.tool_choice, config.model)
        if request.tools and choice is not None:
            kwargs["tool_choice"] = choice
        runnable = (
            model.bind_tools(to_tools(request.tools), **kwargs)
            if request.tools
            else model.bind(**kwargs)
        )
        whole: AIMessageChunk | None = None
        raw_finish: str | None = None
        try:
            async for piece in runnable.astream(to_messages(request.messages)):
                if not isinstance(piece, AIMessageChunk):
                    continue
                for chunk in _content_chunks(piece):
                    yield chunk
                whole = piece if whole is None else whole + piece
        except Exception as exc:
            error = llm_error(exc)
            if error is None:
                raise
            raise error from exc
        if whole is not None:
            for call in whole.tool_calls:
                yield ToolCallChunk(
                    call_id=call["id"] or f"call-{uuid.uuid4().hex[:12]}",
                    name=names.get(call["name"]) or _canonical(call["name"]),
                    arguments=json.dumps(call["args"], sort_keys=True),
                )
            for invalid in whole.invalid_tool_calls:
                logger.warning("dropped an unparseable tool call: %s", invalid)
            usage = _usage(whole)
            if usage is not None:
                yield UsageChunk(usage=usage)
            reported = whole.response_metadata.get("finish_reason") or whole.response_metadata.get(
                "stop_reason"
            )
            raw_finish = str(reported) if reported else None
        yield FinalChunk(
            metadata=metadata, finish_reason=finish_reason(raw_finish), raw_finish_reason=raw_finish
        )


def _canonical(function_name: str) -> str:
    """A called name that was not offered: canonical if it has the form, else as is."""
    try:
        return from_function_name(function_name)
    except ValueError:
        return function_name

"""The ``google-native`` backend: Gemini through the google-genai SDK, streamed.

SDK exceptions are translated here, once, into ErrorInfo; nothing else imports
google-genai.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import LLMError
from tarsy.llm.base import (
    Chunk,
    CodeExecutionChunk,
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
from tarsy.llm.provider import StreamingProvider
from tarsy.llm.retry import classify_status, parse_retry_after
from tarsy.llm.tool_names import from_function_name, to_function_name
from tarsy.models import ConversationMessage, TokenUsage
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

_clients: dict[tuple[str | None, ...], genai.Client] = {}
_clients_lock = threading.Lock()


def _client(endpoint: Endpoint) -> genai.Client:
    """Return the process-wide client for this endpoint, creating it on first use."""
    key = endpoint.cache_key()
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            http_options = types.HttpOptions(base_url=endpoint.base_url)
            if endpoint.api_key is not None:
                client = genai.Client(
                    api_key=endpoint.api_key.get_secret_value(), http_options=http_options
                )
            else:
                client = genai.Client(
                    vertexai=True,
                    project=endpoint.project,
                    location=endpoint.location,
                    http_options=http_options,
                )
            _clients[key] = client
        return client


def llm_error(exc: BaseException) -> LLMError | None:
    """Translate an SDK or transport exception, once, into LLMError; None if it is not one."""
    if isinstance(exc, genai_errors.APIError):
        status = int(exc.code) if exc.code else 0
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        return LLMError(
            classify_status(status),
            str(exc.message or exc),
            code=str(status),
            retry_after=parse_retry_after(headers.get("retry-after")),
        )
    if isinstance(exc, httpx.TimeoutException):
        return LLMError("timeout", f"timeout: {exc}", code="timeout")
    if isinstance(exc, httpx.TransportError):
        return LLMError("connection", f"connection error: {exc}", code="connection")
    return None


# ─── thinking ─────────────────────────────────────────────────────────────────

# Thinking budgets per model family (seed 000 Q3); Gemini 3 takes a level instead.
THINKING_BUDGETS = (("gemini-2.5-pro", 32768), ("gemini-2.5-flash", 24576))
DEFAULT_THINKING_BUDGET = 24576


def thinking_config(config: LLMProviderConfig) -> types.ThinkingConfig | None:
    """The thinking settings for a model, or None when thinking is off."""
    if not config.thinking:
        return None
    model = config.model.removeprefix("models/")
    if model.startswith("gemini-3"):
        level = types.ThinkingLevel(config.thinking_level or "HIGH")
        return types.ThinkingConfig(include_thoughts=True, thinking_level=level)
    budget = config.thinking_budget
    if budget is None:
        budget = next(
            (b for prefix, b in THINKING_BUDGETS if model.startswith(prefix)),
            DEFAULT_THINKING_BUDGET,
        )
    return types.ThinkingConfig(include_thoughts=True, thinking_budget=budget)


# ─── thought signatures ───────────────────────────────────────────────────────
#
# Gemini returns opaque signatures on some parts of a model turn and requires
# them back on the same parts when that turn is replayed. The conversation is
# stored as messages (one text, then the function calls), so per model turn we
# keep where each signature sat: on the text, or on the n-th function call.
# The state lives in Firestore (thought_signatures/{execution_id}); the next
# step, in another process, puts them back.


class TurnSignatures(DeferredModel):
    """The signatures of one model turn, by position in the stored message."""

    text: str | None = None
    calls: dict[str, str] = Field(default_factory=dict)


def turn_key(assistant_index: int) -> str:
    """Provider-state key of the ``assistant_index``-th model turn of an execution."""
    return f"model-turn-{assistant_index:04d}"


def _b64(signature: bytes) -> str:
    return base64.b64encode(signature).decode()


def signatures_of(parts: Sequence[types.Part]) -> TurnSignatures | None:
    """Where the signatures of one model turn's parts go when it is replayed."""
    turn = TurnSignatures()
    calls = 0
    for part in parts:
        if part.function_call is not None:
            if part.thought_signature:
                turn.calls[str(calls)] = _b64(part.thought_signature)
            calls += 1
        elif part.thought_signature and turn.text is None:
            # On a text or thought part: the replayed turn carries it on its text part.
            turn.text = _b64(part.thought_signature)
    return turn if turn.text is not None or turn.calls else None


def to_contents(
    messages: list[ConversationMessage], signatures: dict[str, str] | None = None
) -> tuple[str | None, list[types.Content]]:
    """Convert the conversation to Gemini's (system instruction, contents).

    ``signatures`` is the execution's provider state: each model turn gets its
    thought signatures back on the parts that carried them.
    """
    system: list[str] = []
    contents: list[types.Content] = []
    assistant_turns = 0
    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            contents.append(types.Content(role="user", parts=[types.Part(text=message.content)]))
        elif message.role == "assistant":
            stored = (signatures or {}).get(turn_key(assistant_turns))
            turn = TurnSignatures.model_validate_json(stored) if stored else TurnSignatures()
            assistant_turns += 1
            parts: list[types.Part] = []
            if message.content or turn.text:
                parts.append(
                    types.Part(
                        text=message.content,
                        thought_signature=base64.b64decode(turn.text) if turn.text else None,
                    )
                )
            for n, call in enumerate(message.tool_calls):
                signature = turn.calls.get(str(n))
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(
                            id=call.id,
                            name=to_function_name(call.name),
                            args=json.loads(call.arguments or "{}"),
                        ),
                        thought_signature=base64.b64decode(signature) if signature else None,
                    )
                )
            contents.append(types.Content(role="model", parts=parts or [types.Part(text="")]))
        else:
            contents.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id=message.tool_call_id,
                                name=to_function_name(message.tool_name or "unknown.unknown"),
                                response={"result": message.content},
                            )
                        )
                    ],
                )
            )
    return ("\n\n".join(system) if system else None), contents


def _usage(metadata: types.GenerateContentResponseUsageMetadata) -> TokenUsage:
    return TokenUsage(
        input_tokens=metadata.prompt_token_count or 0,
        output_tokens=metadata.candidates_token_count or 0,
        total_tokens=metadata.total_token_count or 0,
        thinking_tokens=metadata.thoughts_token_count or 0,
    )


def _chunks_of(response: types.GenerateContentResponse) -> list[Chunk]:
    chunks: list[Chunk] = []
    for candidate in response.candidates or []:
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.text is not None and part.thought:
                chunks.append(ThinkingChunk(text=part.text))
            elif part.text:
                chunks.append(TextChunk(text=part.text))
            elif part.function_call is not None and part.function_call.name:
                call = part.function_call
                chunks.append(
                    ToolCallChunk(
                        call_id=call.id or f"call-{uuid.uuid4().hex[:12]}",
                        name=from_function_name(call.name or ""),
                        arguments=json.dumps(call.args or {}, sort_keys=True),
                    )
                )
            elif part.executable_code is not None:
                chunks.append(CodeExecutionChunk(code=part.executable_code.code or ""))
            elif part.code_execution_result is not None:
                result = part.code_execution_result
                chunks.append(
                    CodeExecutionChunk(
                        outcome=str(result.outcome.value if result.outcome else ""),
                        output=result.output or "",
                    )
                )
    return chunks


def _native_tools(names: Sequence[str]) -> list[types.Tool]:
    tools: list[types.Tool] = []
    for name in names:
        if name == "google_search":
            tools.append(types.Tool(google_search=types.GoogleSearch()))
        elif name == "code_execution":
            tools.append(types.Tool(code_execution=types.ToolCodeExecution()))
        elif name == "url_context":
            tools.append(types.Tool(url_context=types.UrlContext()))
    return tools


def _function_tools(tools: Sequence[ToolDefinition]) -> list[types.Tool]:
    declarations = [
        types.FunctionDeclaration(
            name=to_function_name(tool.name),
            description=tool.description,
            parameters_json_schema=tool.parameters,
        )
        for tool in tools
    ]
    return [types.Tool(function_declarations=declarations)]


_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def tool_config(choice: str | None) -> types.ToolConfig | None:
    """Gemini's function-calling config for a ``tool_choice`` (None: the API default, AUTO).

    A named function is mode ANY restricted to that one function.
    """
    if choice is None:
        return None
    if choice in _MODES:
        calling = types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode(_MODES[choice]))
    else:
        calling = types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY,
            allowed_function_names=[to_function_name(choice)],
        )
    return types.ToolConfig(function_calling_config=calling)


class GoogleNativeProvider(StreamingProvider):
    """Gemini via google-genai: streaming, function calling, thinking, native tools."""

    name = "google-native"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _config(
        self, request: GenerateRequest, system: str | None, metadata: dict[str, Any]
    ) -> types.GenerateContentConfig:
        provider = request.config
        config: dict[str, Any] = {"system_instruction": system}
        if provider.temperature is not None:
            config["temperature"] = provider.temperature
        if provider.max_output_tokens is not None:
            config["max_output_tokens"] = provider.max_output_tokens
        if request.response_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.response_schema
        thinking = thinking_config(provider)
        if thinking is not None:
            config["thinking_config"] = thinking
        if request.tools:
            config["tools"] = _function_tools(request.tools)
            choice = tool_config(request.tool_choice)
            if choice is not None:
                config["tool_config"] = choice
            if provider.native_tools:
                # Gemini cannot mix native tools with function calling (seed 000).
                logger.warning(
                    "native tools %s suppressed: MCP tools are in use", provider.native_tools
                )
                metadata["native_tools_suppressed"] = list(provider.native_tools)
        elif provider.native_tools:
            config["tools"] = _native_tools(provider.native_tools)
        return types.GenerateContentConfig(**config)

    async def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """One streamed call: chunks as they arrive, then the turn's signatures and notes."""
        system, contents = to_contents(request.messages, request.thought_signatures)
        metadata: dict[str, Any] = {}
        config = self._config(request, system, metadata)
        client = _client(resolve_endpoint(request.config, self._settings))
        parts: list[types.Part] = []
        usage: TokenUsage | None = None
        grounding: list[dict[str, Any]] = []
        raw_finish: str | None = None
        try:
            stream = await client.aio.models.generate_content_stream(
                model=request.config.model, contents=contents, config=config
            )
            async for response in stream:
                for chunk in _chunks_of(response):
                    yield chunk
                for candidate in response.candidates or []:
                    if candidate.content and candidate.content.parts:
                        parts.extend(candidate.content.parts)
                    if candidate.finish_reason is not None:
                        raw_finish = str(candidate.finish_reason.value)
                    if candidate.grounding_metadata is not None:
                        grounding.append(
                            candidate.grounding_metadata.model_dump(mode="json", exclude_none=True)
                        )
                if response.usage_metadata is not None:
                    usage = _usage(response.usage_metadata)
                feedback = response.prompt_feedback
                if feedback is not None and feedback.block_reason is not None:
                    # The prompt itself was blocked: no candidate carries a reason.
                    raw_finish = str(feedback.block_reason.value)
        except Exception as exc:
            error = llm_error(exc)
            if error is None:
                raise
            raise error from exc
        if usage is not None:
            yield UsageChunk(usage=usage)
        state: dict[str, str] = {}
        turn = signatures_of(parts)
        if turn is not None:
            assistant_turns = sum(1 for m in request.messages if m.role == "assistant")
            state[turn_key(assistant_turns)] = turn.model_dump_json(exclude_defaults=True)
        if grounding:
            metadata["grounding"] = grounding
        yield FinalChunk(
            provider_state=state,
            metadata=metadata,
            finish_reason=finish_reason(raw_finish),
            raw_finish_reason=raw_finish,
        )

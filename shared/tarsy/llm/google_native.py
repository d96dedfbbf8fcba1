"""The ``google-native`` backend: Gemini through the google-genai SDK, streamed.

SDK exceptions are translated here, once, into ErrorInfo; nothing else imports
google-genai.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tarsy.llm.base import (
    Capabilities,
    Chunk,
    CodeExecutionChunk,
    ErrorChunk,
    FinalChunk,
    GenerateRequest,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from tarsy.llm.tool_names import from_function_name, to_function_name
from tarsy.models import ConversationMessage, ErrorInfo, TokenUsage
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

_clients: dict[tuple[str | None, ...], genai.Client] = {}
_clients_lock = threading.Lock()


def _client(settings: Settings) -> genai.Client:
    """Return the process-wide client for this credential set, creating it on first use."""
    api_key = settings.gemini_api_key.get_secret_value() if settings.gemini_api_key else None
    project = settings.vertex_project or settings.project_id
    key = (api_key, settings.gemini_base_url, project, settings.vertex_location)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            http_options = types.HttpOptions(base_url=settings.gemini_base_url)
            if api_key:
                client = genai.Client(api_key=api_key, http_options=http_options)
            else:
                client = genai.Client(
                    vertexai=True,
                    project=project,
                    location=settings.vertex_location,
                    http_options=http_options,
                )
            _clients[key] = client
        return client


def error_info(exc: BaseException) -> ErrorInfo | None:
    """Translate an SDK or transport exception into ErrorInfo; None if it is not one."""
    if isinstance(exc, genai_errors.APIError):
        code = int(exc.code) if exc.code else 0
        retryable = code in (408, 429) or code >= 500
        return ErrorInfo(message=str(exc.message or exc), code=str(code), retryable=retryable)
    if isinstance(exc, httpx.TimeoutException):
        return ErrorInfo(message=f"timeout: {exc}", code="timeout", retryable=True)
    if isinstance(exc, httpx.TransportError):
        return ErrorInfo(message=f"connection error: {exc}", code="connection", retryable=True)
    return None


def to_contents(
    messages: list[ConversationMessage],
) -> tuple[str | None, list[types.Content]]:
    """Convert the conversation to Gemini's (system instruction, contents)."""
    system: list[str] = []
    contents: list[types.Content] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "user":
            contents.append(types.Content(role="user", parts=[types.Part(text=message.content)]))
        elif message.role == "assistant":
            parts: list[types.Part] = []
            if message.content:
                parts.append(types.Part(text=message.content))
            for call in message.tool_calls:
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(
                            id=call.id,
                            name=to_function_name(call.name),
                            args=json.loads(call.arguments or "{}"),
                        )
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


class GoogleNativeProvider:
    """Gemini via google-genai: streaming, function calling, thinking."""

    name = "google-native"
    capabilities = Capabilities(
        streaming=True, thinking=True, function_calling=True, native_tools=True, code_execution=True
    )

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _config(self, request: GenerateRequest, system: str | None) -> types.GenerateContentConfig:
        config: dict[str, Any] = {"system_instruction": system}
        if request.config.temperature is not None:
            config["temperature"] = request.config.temperature
        if request.config.max_output_tokens is not None:
            config["max_output_tokens"] = request.config.max_output_tokens
        if request.tools:
            config["tools"] = [
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=to_function_name(tool.name),
                            description=tool.description,
                            parameters_json_schema=tool.parameters,
                        )
                        for tool in request.tools
                    ]
                )
            ]
        return types.GenerateContentConfig(**config)

    async def generate(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """Stream one call; errors end the stream as an ErrorChunk."""
        system, contents = to_contents(request.messages)
        config = self._config(request, system)
        client = _client(self._settings)
        usage: TokenUsage | None = None
        try:
            stream = await client.aio.models.generate_content_stream(
                model=request.config.model, contents=list(contents), config=config
            )
            async for response in stream:
                for chunk in _chunks_of(response):
                    yield chunk
                if response.usage_metadata is not None:
                    usage = _usage(response.usage_metadata)
        except Exception as exc:
            info = error_info(exc)
            if info is None:
                raise
            yield ErrorChunk(error=info)
        if usage is not None:
            yield UsageChunk(usage=usage)
        yield FinalChunk()

"""The langchain backend against the local fake: the real LangChain SDK, no patching."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from google.oauth2.credentials import Credentials
from langchain_core import exceptions as lc_errors

from tarsy.config.schema import Backend, LLMProviderConfig, RetryPolicy, SecretRef
from tarsy.errors import ConfigError, LLMError
from tarsy.llm.base import (
    Chunk,
    FinalChunk,
    GenerateRequest,
    LLMResult,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolDefinition,
    UsageChunk,
)
from tarsy.llm.endpoint import endpoint_for
from tarsy.llm.langchain_provider import (
    LangChainProvider,
    chat_model,
    lc_tool_choice,
    llm_error,
    to_messages,
)
from tarsy.llm.provider import StreamingProvider
from tarsy.llm.registry import get_provider
from tarsy.models import ConversationMessage, TokenUsage, ToolCall
from tarsy.settings import Settings
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply, FakeToolCall

FAST = RetryPolicy(initial_delay=0.01, max_delay=2.0, empty_response_delay=0.01)
TOOL = ToolDefinition(
    name="kubernetes.pods_get",
    description="Get a pod",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)


def api_key_settings(url: str) -> Settings:
    return Settings(GEMINI_API_KEY="test-key", GEMINI_BASE_URL=url)


def provider(fake: FakeGemini) -> LangChainProvider:
    return LangChainProvider(api_key_settings(fake.url))


def request(
    *,
    model: str = "gemini-2.5-flash",
    messages: list[ConversationMessage] | None = None,
    tools: list[ToolDefinition] | None = None,
    **config: Any,
) -> GenerateRequest:
    return GenerateRequest(
        execution_id="exec-1",
        messages=messages
        or [
            ConversationMessage(role="system", content="You investigate alerts."),
            ConversationMessage(role="user", content="Pod api-0 is crash looping."),
        ],
        config=LLMProviderConfig(backend="langchain", model=model, retry=FAST, **config),
        tools=tools or [],
    )


async def stream(p: LangChainProvider, req: GenerateRequest) -> list[Chunk]:
    """The chunks of one attempt, as they arrive."""
    return [chunk async for chunk in p.attempt(req)]


async def generate(fake: FakeGemini, req: GenerateRequest) -> LLMResult:
    return await provider(fake).generate(req)


async def failure(p: LangChainProvider, req: GenerateRequest) -> LLMError:
    """The error a call ends with once the transport retries are spent."""
    with pytest.raises(LLMError) as raised:
        await p.generate(req)
    return raised.value


def thinking_config(body: dict[str, Any]) -> dict[str, Any]:
    """The thinking config sent, with keys in snake case whatever the SDK used."""
    raw = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    snake = {"includeThoughts": "include_thoughts", "thinkingBudget": "thinking_budget"}
    return {snake.get(k, k): v for k, v in raw.items()}


# ─── streaming and content ────────────────────────────────────────────────────


async def test_text_is_streamed_in_several_chunks(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="The pod is OOM killed; raise its memory limit.", stream_chunks=3))

    chunks = await stream(provider(fake), request())

    texts = [c for c in chunks if isinstance(c, TextChunk)]
    assert len(texts) == 3
    assert "".join(c.text for c in texts) == "The pod is OOM killed; raise its memory limit."
    assert isinstance(chunks[-1], FinalChunk)
    [call] = fake.calls
    assert call.streaming
    assert call.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert call.tools() == []  # no tools: plain text (ReAct)


async def test_tool_call_round_trips_through_bind_tools(fake: FakeGemini) -> None:
    fake.script(
        FakeReply(
            text="Checking the pod.",
            tool_calls=[FakeToolCall(name="kubernetes__pods_get", args={"name": "api-0"})],
        )
    )

    result = await generate(fake, request(tools=[TOOL]))

    [call] = fake.calls
    assert call.function_names() == ["kubernetes__pods_get"]
    [declaration] = call.tools()[0]["functionDeclarations"]
    assert declaration["description"] == "Get a pod"
    assert set(declaration["parameters"]["properties"]) == {"name"}
    assert declaration["parameters"]["required"] == ["name"]
    assert result.text == "Checking the pod."
    [tool_call] = result.tool_calls
    assert tool_call.name == "kubernetes.pods_get"
    assert json.loads(tool_call.arguments) == {"name": "api-0"}
    assert tool_call.id


async def test_tool_call_ids_from_the_model_are_kept(fake: FakeGemini) -> None:
    fake.script(
        FakeReply(
            tool_calls=[
                FakeToolCall(name="kubernetes__pods_get", args={"name": "a"}, id="call-a"),
                FakeToolCall(name="kubernetes__pods_get", args={"name": "b"}, id="call-b"),
            ]
        )
    )

    result = await generate(fake, request(tools=[TOOL]))

    assert [(c.id, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("call-a", {"name": "a"}),
        ("call-b", {"name": "b"}),
    ]


async def test_usage_metadata_maps_to_a_usage_chunk(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok", input_tokens=12, output_tokens=34, thinking_tokens=5))

    chunks = await stream(provider(fake), request())

    [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
    # LangChain folds thoughts into output_tokens; TokenUsage keeps them apart.
    assert usage.usage == TokenUsage(
        input_tokens=12, output_tokens=34, total_tokens=51, thinking_tokens=5
    )
    assert [c.type for c in chunks][-2:] == ["usage", "final"]


async def test_thoughts_become_thinking_chunks(fake: FakeGemini) -> None:
    fake.script(FakeReply(thinking="The pod restarts every minute.", text="OOM."))

    chunks = await stream(provider(fake), request(thinking_budget=1024))

    assert [c.type for c in chunks] == ["thinking", "text", "usage", "final"]
    assert isinstance(chunks[0], ThinkingChunk)
    assert chunks[0].text == "The pod restarts every minute."
    assert thinking_config(fake.calls[0].body) == {
        "include_thoughts": True,
        "thinking_budget": 1024,
    }


async def test_gemini_3_gets_the_configured_thinking_level(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok"))

    await generate(fake, request(model="gemini-3-pro-preview", thinking_level="LOW"))

    assert thinking_config(fake.calls[0].body) == {
        "include_thoughts": True,
        "thinking_level": "LOW",
    }


async def test_thinking_off_sends_no_thinking_config(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok"))

    await generate(fake, request(thinking=False, temperature=0.2, max_output_tokens=256))

    config = fake.calls[0].generation_config()
    assert "thinkingConfig" not in config
    assert config["temperature"] == pytest.approx(0.2)
    assert config["maxOutputTokens"] == 256


# ─── conversation conversion ──────────────────────────────────────────────────


async def test_conversation_reaches_the_fake_in_gemini_shape(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="The pod is out of memory."))
    messages = [
        ConversationMessage(role="system", content="You investigate alerts."),
        ConversationMessage(role="system", content="Be brief."),
        ConversationMessage(role="user", content="Pod api-0 is crash looping."),
        ConversationMessage(
            role="assistant",
            content="Let me look.",
            tool_calls=[
                ToolCall(id="c1", name="kubernetes.pods_get", arguments='{"name": "api-0"}')
            ],
        ),
        ConversationMessage(
            role="tool",
            content="status: OOMKilled",
            tool_call_id="c1",
            tool_name="kubernetes.pods_get",
        ),
    ]

    result = await generate(fake, request(messages=messages, tools=[TOOL]))

    assert result.text == "The pod is out of memory."
    [call] = fake.calls
    assert call.system_text() == "You investigate alerts.\n\nBe brief."
    contents = call.body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[0]["parts"] == [{"text": "Pod api-0 is crash looping."}]
    model_parts = contents[1]["parts"]
    assert model_parts[0] == {"text": "Let me look."}
    assert model_parts[1]["functionCall"] == {
        "name": "kubernetes__pods_get",
        "args": {"name": "api-0"},
    }
    [response] = contents[2]["parts"]
    assert response["functionResponse"]["name"] == "kubernetes__pods_get"
    assert response["functionResponse"]["response"] == {"output": "status: OOMKilled"}


def test_a_tool_result_without_its_call_becomes_a_user_message() -> None:
    messages = to_messages(
        [
            ConversationMessage(role="user", content="Go."),
            ConversationMessage(
                role="tool", content="42", tool_call_id="gone", tool_name="metrics.query"
            ),
        ]
    )

    assert [m.type for m in messages] == ["human", "human"]
    assert messages[1].content == "Result of metrics.query:\n42"


# ─── errors and retries ───────────────────────────────────────────────────────


async def test_rate_limit_waits_retry_after_then_succeeds(fake: FakeGemini) -> None:
    fake.script(FakeReply(status=429, retry_after=0.3), FakeReply(text="ok"))

    started = time.monotonic()
    result = await generate(fake, request())

    assert time.monotonic() - started >= 0.3  # Retry-After, not the 0.01 s backoff
    assert result.text == "ok"
    assert result.attempts == 2
    assert len(fake.calls) == 2


async def test_server_errors_exhaust_retries_into_a_retryable_error(fake: FakeGemini) -> None:
    fake.script(*[FakeReply(status=500)] * 4)

    error = await failure(provider(fake), request())

    assert error.retryable is True
    assert error.code == "500"
    assert error.attempts == 4
    assert len(fake.calls) == 4  # LangChain and google-genai retry nothing themselves


async def test_client_error_fails_at_once(fake: FakeGemini) -> None:
    fake.script(FakeReply(status=400, error_message="Invalid JSON payload"))

    error = await failure(provider(fake), request())

    assert error.retryable is False
    assert error.code == "400"
    assert "Invalid JSON payload" in str(error)
    assert error.attempts == 1
    assert len(fake.calls) == 1


async def test_empty_reply_is_retried(fake: FakeGemini) -> None:
    fake.script(FakeReply(empty=True), FakeReply(thinking="only thoughts"), FakeReply(text="ok"))

    result = await generate(fake, request())

    assert result.text == "ok"
    assert result.attempts == 3


async def test_unreachable_endpoint_is_a_retryable_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    p = LangChainProvider(api_key_settings(f"http://127.0.0.1:{port}"))

    error = await failure(p, request())

    assert error.code == "connection"
    assert error.retryable is True
    assert error.attempts == 4


@pytest.mark.parametrize(
    ("exc", "kind", "retry_after"),
    [
        (lc_errors.ModelRateLimitError("slow down"), "rate_limit", None),
        (lc_errors.ModelAPIError("boom"), "server", None),
        (lc_errors.ModelInvalidRequestError("bad"), "client", None),
    ],
)
def test_langchain_model_errors_without_an_sdk_cause_are_classified(
    exc: BaseException, kind: str, retry_after: float | None
) -> None:
    error = llm_error(exc)

    assert error is not None
    assert (error.kind, error.retry_after) == (kind, retry_after)


def test_retry_info_in_a_google_error_body_gives_the_delay() -> None:
    from google.genai import errors as genai_errors

    body = {
        "error": {
            "code": 429,
            "message": "Resource exhausted",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    error = llm_error(genai_errors.ClientError(429, body))

    assert error is not None
    assert (error.kind, error.code, error.retry_after) == ("rate_limit", "429", 7.0)


def test_unknown_exceptions_are_not_classified() -> None:
    assert llm_error(KeyError("bug")) is None


# ─── credentials and caching ──────────────────────────────────────────────────


async def test_vertex_mode_reaches_the_fake_with_token_credentials(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok from vertex"))
    settings = Settings(
        GEMINI_API_KEY=None,
        GEMINI_BASE_URL=fake.url,
        TARSY_VERTEX_PROJECT="proj-x",
        TARSY_VERTEX_LOCATION="europe-west4",
    )
    p = LangChainProvider(settings, credentials=Credentials(token="fake"))  # type: ignore[no-untyped-call]

    result = await p.generate(request())

    assert result.text == "ok from vertex"
    [call] = fake.calls
    assert call.path == (
        "/v1beta1/projects/proj-x/locations/europe-west4/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent"
    )


def test_chat_models_are_cached_per_credentials_and_model_settings(fake: FakeGemini) -> None:
    settings = api_key_settings(fake.url)
    config = LLMProviderConfig(backend="langchain", model="gemini-2.5-flash")

    def model(config: LLMProviderConfig, settings: Settings) -> object:
        return chat_model(config, endpoint_for(config, settings))

    first = model(config, settings)

    assert model(config.model_copy(), api_key_settings(fake.url)) is first
    assert model(config.model_copy(update={"temperature": 0.1}), settings) is not first
    assert model(config, Settings(GEMINI_API_KEY="other", GEMINI_BASE_URL=fake.url)) is not first


async def test_a_provider_with_a_vertex_project_uses_vertex_despite_a_process_api_key(
    fake: FakeGemini,
) -> None:
    fake.script(FakeReply(text="ok from vertex"))
    settings = Settings(GEMINI_API_KEY="process-key", GEMINI_BASE_URL=fake.url)
    config = LLMProviderConfig(
        backend="langchain",
        model="gemini-2.5-pro",
        vertex_project="team-proj",
        vertex_location="us-east5",
        retry=FAST,
    )
    p = LangChainProvider(settings, credentials=Credentials(token="fake"))  # type: ignore[no-untyped-call]

    assert (await p.generate(request().model_copy(update={"config": config}))).text == (
        "ok from vertex"
    )
    [call] = fake.calls
    assert call.path.startswith("/v1beta1/projects/team-proj/locations/us-east5/")
    assert call.api_key is None


# ─── both backends ────────────────────────────────────────────────────────────


@pytest.mark.parametrize("backend", ["google-native", "langchain"])
async def test_a_provider_api_key_from_the_environment_overrides_the_process_key(
    fake: FakeGemini, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_GEMINI_KEY", "team-key-123")
    settings = Settings(GEMINI_API_KEY="process-key", GEMINI_BASE_URL=fake.url)
    own = LLMProviderConfig(
        backend=backend,
        model="gemini-2.5-flash",
        api_key=SecretRef(env="TEAM_GEMINI_KEY"),
        retry=FAST,
    )
    shared = own.model_copy(update={"api_key": None})
    request_of = request().model_copy

    for config in (own, shared):
        fake.script(FakeReply(text="ok"))
        result = await get_provider(config, settings).generate(
            request_of(update={"config": config})
        )
        assert result.text == "ok"

    assert [call.api_key for call in fake.calls] == ["team-key-123", "process-key"]


@pytest.mark.parametrize("backend", ["google-native", "langchain"])
async def test_an_unset_provider_key_variable_fails_the_call_without_retries(
    fake: FakeGemini, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAM_GEMINI_KEY", raising=False)
    config = LLMProviderConfig(
        backend=backend, model="gemini-2.5-flash", api_key=SecretRef(env="TEAM_GEMINI_KEY")
    )
    settings = Settings(GEMINI_API_KEY="process-key", GEMINI_BASE_URL=fake.url)

    # A configuration error, not a model failure: no retry, and the step engine
    # fails the session with this reason at once.
    with pytest.raises(ConfigError) as raised:
        await get_provider(config, settings).generate(
            request().model_copy(update={"config": config})
        )

    assert str(raised.value) == (
        "no credentials for model 'gemini-2.5-flash': environment variable "
        "'TEAM_GEMINI_KEY' named in the config is not set"
    )
    assert fake.calls == []


@pytest.mark.parametrize("backend", ["google-native", "langchain"])
async def test_both_backends_stream_the_same_chunk_types(
    fake: FakeGemini, backend: Backend
) -> None:
    fake.script(
        FakeReply(
            text="Pod api-0 needs a look.",
            tool_calls=[FakeToolCall(name="kubernetes__pods_get", args={"name": "api-0"})],
            input_tokens=11,
            output_tokens=22,
        )
    )
    config = LLMProviderConfig(backend=backend, model="gemini-2.5-flash", retry=FAST)
    p = get_provider(config, Settings(GEMINI_API_KEY="k", GEMINI_BASE_URL=fake.url))
    req = GenerateRequest(
        execution_id="exec-1",
        messages=[ConversationMessage(role="user", content="Pod api-0 is crash looping.")],
        config=config,
        tools=[TOOL],
    )

    assert isinstance(p, StreamingProvider)
    chunks = [chunk async for chunk in p.attempt(req)]

    assert [c.type for c in chunks] == ["text", "tool_call", "usage", "final"]
    text, call, usage, final = chunks
    assert isinstance(text, TextChunk)
    assert text.text == "Pod api-0 needs a look."
    assert isinstance(call, ToolCallChunk)
    assert (call.name, json.loads(call.arguments)) == ("kubernetes.pods_get", {"name": "api-0"})
    assert isinstance(usage, UsageChunk)
    assert usage.usage == TokenUsage(input_tokens=11, output_tokens=22, total_tokens=33)
    assert isinstance(final, FinalChunk)
    assert fake.calls[0].function_names() == ["kubernetes__pods_get"]


# ─── tool_choice (seed 001 R6) ────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY", "allowedFunctionNames": ["kubernetes__pods_get"]}),
        ("none", {"mode": "NONE"}),
        ("kubernetes.pods_get", {"mode": "ANY", "allowedFunctionNames": ["kubernetes__pods_get"]}),
    ],
)
async def test_tool_choice_reaches_gemini_through_bind_tools(
    fake: FakeGemini, choice: str, expected: dict[str, Any]
) -> None:
    fake.script(FakeReply(text="ok"))
    req = request(tools=[TOOL]).model_copy(update={"tool_choice": choice})
    await generate(fake, req)
    [call] = fake.calls
    assert call.function_names() == ["kubernetes__pods_get"]
    assert call.function_calling_config() == expected


async def test_no_tool_choice_or_no_tools_sends_no_tool_config(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="a"), FakeReply(text="b"))
    await generate(fake, request(tools=[TOOL]))
    await generate(fake, request().model_copy(update={"tool_choice": "none"}))
    assert [c.function_calling_config() for c in fake.calls] == [None, None]
    assert fake.calls[1].tools() == []


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, None),
        ("auto", "auto"),
        ("required", "any"),
        ("none", {"type": "none"}),
        ("k8s.pods_get", "k8s__pods_get"),
    ],
)
def test_tool_choice_for_claude_on_vertex(choice: str | None, expected: object) -> None:
    assert lc_tool_choice(choice, "claude-sonnet-4-5@20250929") == expected

"""The google-native backend: conversion and error mapping, then the real SDK against FakeGemini."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from google.genai import errors as genai_errors
from google.genai import types

from tarsy.config.schema import LLMProviderConfig, RetryPolicy
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
)
from tarsy.llm.endpoint import endpoint_for
from tarsy.llm.google_native import (
    GoogleNativeProvider,
    TurnSignatures,
    _chunks_of,
    _client,
    llm_error,
    signatures_of,
    to_contents,
    turn_key,
)
from tarsy.models import ConversationMessage, ErrorInfo, TokenUsage, ToolCall
from tarsy.settings import Settings
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply, FakeToolCall

# ─── to_contents ─────────────────────────────────────────────────────────────


def msg(role: str, content: str = "", **kwargs: object) -> ConversationMessage:
    return ConversationMessage.model_validate({"role": role, "content": content, **kwargs})


def test_system_messages_become_the_system_instruction() -> None:
    system, contents = to_contents([msg("system", "one"), msg("user", "hi"), msg("system", "two")])
    assert system == "one\n\ntwo"
    assert [c.role for c in contents] == ["user"]
    assert contents[0].parts == [types.Part(text="hi")]


def test_no_system_message_is_none() -> None:
    system, contents = to_contents([msg("user", "hi")])
    assert system is None
    assert len(contents) == 1


def test_full_conversation() -> None:
    calls = [
        ToolCall(id="c1", name="kubernetes.pods_get", arguments='{"name": "api-0"}'),
        ToolCall(id="c2", name="prom-1.query", arguments=""),
    ]
    system, contents = to_contents(
        [
            msg("system", "sys"),
            msg("user", "alert"),
            msg("assistant", "let me look", tool_calls=calls),
            msg("tool", "pod is Running", tool_call_id="c1", tool_name="kubernetes.pods_get"),
            msg("tool", "up=1", tool_call_id="c2", tool_name="prom-1.query"),
            msg("assistant", "final answer"),
        ]
    )
    assert system == "sys"
    assert [c.role for c in contents] == ["user", "model", "user", "user", "model"]
    model_parts = contents[1].parts or []
    assert model_parts[0].text == "let me look"
    assert [(p.function_call.id, p.function_call.name, p.function_call.args)
            for p in model_parts[1:] if p.function_call] == [
        ("c1", "kubernetes__pods_get", {"name": "api-0"}),
        ("c2", "prom-1__query", {}),
    ]  # fmt: skip
    responses = [c.parts[0].function_response for c in contents[2:4] if c.parts]
    assert [(r.id, r.name, r.response) for r in responses if r] == [
        ("c1", "kubernetes__pods_get", {"result": "pod is Running"}),
        ("c2", "prom-1__query", {"result": "up=1"}),
    ]
    assert contents[4].parts == [types.Part(text="final answer")]


def test_assistant_with_only_tool_calls_has_no_text_part() -> None:
    call = ToolCall(id="c1", name="k.get", arguments="{}")
    _, [content] = to_contents([msg("assistant", tool_calls=[call])])
    assert len(content.parts or []) == 1
    assert content.parts and content.parts[0].function_call is not None


def test_empty_assistant_turn_keeps_one_empty_part() -> None:
    _, [content] = to_contents([msg("assistant")])
    assert content.role == "model"
    assert content.parts == [types.Part(text="")]


def test_tool_message_without_tool_name() -> None:
    _, [content] = to_contents([msg("tool", "out", tool_call_id="c9")])
    assert content.parts and content.parts[0].function_response is not None
    assert content.parts[0].function_response.name == "unknown__unknown"


def test_non_canonical_tool_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"server\.tool"):
        to_contents([msg("assistant", tool_calls=[ToolCall(id="c", name="nodot")])])


def test_signatures_go_back_on_the_right_turn_and_parts() -> None:
    calls = [ToolCall(id="a", name="k.x"), ToolCall(id="b", name="k.y")]
    state = {
        turn_key(0): TurnSignatures(text=base64.b64encode(b"t0").decode()).model_dump_json(),
        turn_key(1): TurnSignatures(
            calls={"1": base64.b64encode(b"c1").decode()}
        ).model_dump_json(),
    }
    _, contents = to_contents(
        [msg("user", "q"), msg("assistant", "first"), msg("user", "more"),
         msg("assistant", "", tool_calls=calls)],
        state,
    )  # fmt: skip
    first, second = contents[1].parts or [], contents[3].parts or []
    assert [p.thought_signature for p in first] == [b"t0"]
    assert [p.thought_signature for p in second] == [None, b"c1"]


def test_text_signature_on_an_empty_turn_still_gets_a_text_part() -> None:
    state = {turn_key(0): TurnSignatures(text=base64.b64encode(b"s").decode()).model_dump_json()}
    _, [content] = to_contents([msg("assistant")], state)
    assert content.parts == [types.Part(text="", thought_signature=b"s")]


def test_turn_key_sorts() -> None:
    assert turn_key(0) == "model-turn-0000"
    assert sorted([turn_key(10), turn_key(9)]) == [turn_key(9), turn_key(10)]


def test_signatures_of() -> None:
    parts = [
        types.Part(text="thinking", thought=True, thought_signature=b"first"),
        types.Part(text="answer", thought_signature=b"second"),
        types.Part(function_call=types.FunctionCall(name="k__a")),
        types.Part(function_call=types.FunctionCall(name="k__b"), thought_signature=b"call"),
    ]
    turn = signatures_of(parts)
    assert turn is not None
    assert turn.text == base64.b64encode(b"first").decode()
    assert turn.calls == {"1": base64.b64encode(b"call").decode()}
    assert signatures_of([types.Part(text="no signature")]) is None


# ─── response parts to chunks ────────────────────────────────────────────────


def test_chunks_of_response() -> None:
    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(text="hmm", thought=True),
                        types.Part(text=""),
                        types.Part(text="answer"),
                        types.Part(
                            function_call=types.FunctionCall(
                                id="c1", name="srv__tool", args={"b": 2, "a": 1}
                            )
                        ),
                        types.Part(function_call=types.FunctionCall(name="srv__other")),
                    ],
                )
            )
        ]
    )
    chunks = _chunks_of(response)
    assert chunks[:3] == [
        ThinkingChunk(text="hmm"),
        TextChunk(text="answer"),
        ToolCallChunk(call_id="c1", name="srv.tool", arguments='{"a": 1, "b": 2}'),
    ]
    last = chunks[3]
    assert isinstance(last, ToolCallChunk)
    assert (last.name, last.arguments) == ("srv.other", "{}")
    assert last.call_id.startswith("call-")
    assert _chunks_of(types.GenerateContentResponse()) == []


# ─── error mapping ───────────────────────────────────────────────────────────


def api_error(code: int, message: str = "boom", headers: dict[str, str] | None = None) -> Exception:
    response = httpx.Response(code, headers=headers or {})
    return genai_errors.APIError(
        code, {"error": {"code": code, "message": message}}, response=response
    )


@pytest.mark.parametrize(
    ("code", "retryable"),
    [(400, False), (401, False), (403, False), (404, False), (408, True),
     (429, True), (500, True), (502, True), (503, True), (504, True)],
)  # fmt: skip
def test_api_error_mapping(code: int, retryable: bool) -> None:
    error = llm_error(api_error(code, "quota exceeded"))
    assert error is not None
    assert error.info == ErrorInfo(message="quota exceeded", code=str(code), retryable=retryable)


def test_retry_after_is_read_from_the_response() -> None:
    error = llm_error(api_error(429, headers={"Retry-After": "7"}))
    assert error is not None
    assert (error.kind, error.retry_after) == ("rate_limit", 7.0)
    no_header = llm_error(api_error(429))
    assert no_header is not None and no_header.retry_after is None


@pytest.mark.parametrize(
    ("exc", "code", "kind"),
    [
        (httpx.ReadTimeout("slow"), "timeout", "timeout"),
        (httpx.ConnectTimeout("slow"), "timeout", "timeout"),
        (httpx.ConnectError("refused"), "connection", "connection"),
        (httpx.RemoteProtocolError("eof"), "connection", "connection"),
    ],
)
def test_transport_error_mapping(exc: Exception, code: str, kind: str) -> None:
    error = llm_error(exc)
    assert error is not None
    assert (error.kind, error.code, error.retryable) == (kind, code, True)
    assert error.info.retryable and error.info.code == code


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), RuntimeError("r")])
def test_other_exceptions_are_not_mapped(exc: Exception) -> None:
    assert llm_error(exc) is None


# ─── the real SDK against the fake ───────────────────────────────────────────

FAST = RetryPolicy(max_retries=1, initial_delay=0.01, max_delay=0.05, empty_response_delay=0.01)
TOOL = ToolDefinition(
    name="kubernetes.pods_log",
    description="Read a pod's log",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}},
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture
def provider(fake: FakeGemini) -> GoogleNativeProvider:
    fake.reset()
    return GoogleNativeProvider(Settings(GEMINI_API_KEY="unit-key", GEMINI_BASE_URL=fake.url))


def req(
    *,
    tools: list[ToolDefinition] | None = None,
    messages: list[ConversationMessage] | None = None,
    **config: object,
) -> GenerateRequest:
    return GenerateRequest(
        execution_id="e1",
        messages=messages or [msg("system", "You are careful."), msg("user", "pod down")],
        config=LLMProviderConfig.model_validate(
            {"backend": "google-native", "model": "gemini-2.5-flash", "retry": FAST, **config}
        ),
        tools=tools or [],
    )


async def chunks(provider: GoogleNativeProvider, request: GenerateRequest) -> list[Chunk]:
    """The chunks of one attempt, as they arrive."""
    return [chunk async for chunk in provider.attempt(request)]


async def test_text_stream(provider: GoogleNativeProvider, fake: FakeGemini) -> None:
    fake.script(FakeReply(text="The config map is wrong.", stream_chunks=3, input_tokens=12,
                          output_tokens=8))  # fmt: skip
    stream = await chunks(provider, req(temperature=0.2, max_output_tokens=512))
    texts = [c for c in stream if isinstance(c, TextChunk)]
    assert len(texts) == 3
    assert "".join(t.text for t in texts) == "The config map is wrong."
    assert stream[-2] == UsageChunk(
        usage=TokenUsage(input_tokens=12, output_tokens=8, total_tokens=20, thinking_tokens=0)
    )
    final = stream[-1]
    assert isinstance(final, FinalChunk)
    assert final.provider_state == {}

    [call] = fake.calls
    assert call.streaming
    assert call.model == "gemini-2.5-flash"
    assert call.system_text() == "You are careful."
    assert call.texts("user") == ["pod down"]
    assert call.generation_config()["temperature"] == 0.2
    assert call.generation_config()["maxOutputTokens"] == 512


async def test_thinking_chunks_and_usage(provider: GoogleNativeProvider, fake: FakeGemini) -> None:
    fake.script(FakeReply(text="answer", thinking="first I check env", thinking_tokens=9))
    stream = await chunks(provider, req())
    assert [c.type for c in stream] == ["thinking", "text", "usage", "final"]
    assert stream[0] == ThinkingChunk(text="first I check env")
    assert stream[2] == UsageChunk(
        usage=TokenUsage(input_tokens=10, output_tokens=20, total_tokens=39, thinking_tokens=9)
    )


async def test_tool_calls_come_back_canonical(
    provider: GoogleNativeProvider, fake: FakeGemini
) -> None:
    fake.script(
        FakeReply(
            tool_calls=[
                FakeToolCall(name="kubernetes__pods_log", args={"name": "api-0", "tail": 5},
                             id="call-a"),
                FakeToolCall(name="kubernetes__pods_log", args={"name": "api-1"}),
            ]
        )
    )  # fmt: skip
    result = await provider.generate(req(tools=[TOOL]))
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("kubernetes.pods_log", {"name": "api-0", "tail": 5}),
        ("kubernetes.pods_log", {"name": "api-1"}),
    ]
    assert result.tool_calls[0].id == "call-a"
    assert result.tool_calls[1].id.startswith("call-")
    assert result.text == ""
    [declaration] = fake.calls[0].tools()[0]["functionDeclarations"]
    assert declaration["name"] == "kubernetes__pods_log"
    assert declaration["description"] == "Read a pod's log"


async def test_turn_signature_becomes_provider_state(
    provider: GoogleNativeProvider, fake: FakeGemini
) -> None:
    fake.script(FakeReply(text="a", thinking="t", thought_signature=b"sig"))
    history = [msg("user", "q"), msg("assistant", "earlier"), msg("user", "again")]
    result = await provider.generate(req(messages=history))
    stored = TurnSignatures.model_validate_json(result.provider_state[turn_key(1)])
    assert stored.text == base64.b64encode(b"sig").decode()
    assert stored.calls == {}


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retryable_errors_end_in_a_retryable_llm_error(
    provider: GoogleNativeProvider, fake: FakeGemini, status: int
) -> None:
    fake.script(*[FakeReply(status=status, error_message="try later")] * 2)
    with pytest.raises(LLMError) as failure:
        await provider.generate(req())
    assert failure.value.info == ErrorInfo(message="try later", code=str(status), retryable=True)
    assert failure.value.attempts == 2
    assert len(fake.calls) == 2


async def test_retryable_error_then_success(
    provider: GoogleNativeProvider, fake: FakeGemini
) -> None:
    fake.script(FakeReply(status=429), FakeReply(text="ok now"))
    result = await provider.generate(req())
    assert (result.text, result.attempts) == ("ok now", 2)


async def test_400_is_not_retryable(provider: GoogleNativeProvider, fake: FakeGemini) -> None:
    fake.script(FakeReply(status=400, error_message="bad schema"), FakeReply(text="unused"))
    with pytest.raises(LLMError) as failure:
        await provider.generate(req())
    assert failure.value.info == ErrorInfo(message="bad schema", code="400", retryable=False)
    assert failure.value.attempts == 1
    assert len(fake.calls) == 1


async def test_empty_responses_exhaust_as_retryable(
    provider: GoogleNativeProvider, fake: FakeGemini
) -> None:
    fake.script(FakeReply(empty=True), FakeReply(thinking="only thoughts"))
    with pytest.raises(LLMError) as failure:
        await provider.generate(req())
    assert failure.value.info.code == "empty_response"
    assert failure.value.info.retryable is True
    assert failure.value.attempts == 2


async def test_unreachable_endpoint_is_a_retryable_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now: the connection is refused at once.
    unreachable = GoogleNativeProvider(
        Settings(GEMINI_API_KEY="unit-key", GEMINI_BASE_URL=f"http://127.0.0.1:{port}")
    )
    with pytest.raises(LLMError) as failure:
        await unreachable.generate(req())
    assert (failure.value.code, failure.value.retryable) == ("connection", True)
    assert failure.value.attempts == 2


def test_sdk_clients_are_shared_per_credential_set(fake: FakeGemini) -> None:
    settings = Settings(GEMINI_API_KEY="unit-key", GEMINI_BASE_URL=fake.url)
    same = Settings(GEMINI_API_KEY="unit-key", GEMINI_BASE_URL=fake.url)
    other = Settings(GEMINI_API_KEY="other-key", GEMINI_BASE_URL=fake.url)
    config = LLMProviderConfig(backend="google-native", model="gemini-2.5-flash")

    def client(settings: Settings) -> object:
        return _client(endpoint_for(config, settings))

    assert client(settings) is client(same)
    assert client(settings) is not client(other)

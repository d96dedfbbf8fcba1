"""The google-native backend against the local fake: the real google-genai SDK, no patching."""

from __future__ import annotations

import base64
import re

import pytest

from tarsy.config.schema import LLMProviderConfig, RetryPolicy
from tarsy.errors import LLMError
from tarsy.llm.base import GenerateRequest, LLMResult, ToolDefinition
from tarsy.llm.google_native import GoogleNativeProvider, thinking_config, turn_key
from tarsy.models import ConversationMessage, ToolCall
from tarsy.settings import Settings
from tarsy_dev.fakes.fake_gemini import FakeCodeExecution, FakeGemini, FakeReply, FakeToolCall

FAST = RetryPolicy(initial_delay=0.01, max_delay=2.0, empty_response_delay=0.01)
TOOL = ToolDefinition(
    name="kubernetes.pods_get",
    description="Get a pod",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}},
)


def provider(fake: FakeGemini) -> GoogleNativeProvider:
    return GoogleNativeProvider(Settings(GEMINI_API_KEY="test-key", GEMINI_BASE_URL=fake.url))


def request(
    *,
    model: str = "gemini-2.5-flash",
    messages: list[ConversationMessage] | None = None,
    tools: list[ToolDefinition] | None = None,
    signatures: dict[str, str] | None = None,
    **config: object,
) -> GenerateRequest:
    return GenerateRequest(
        execution_id="exec-1",
        messages=messages
        or [
            ConversationMessage(role="system", content="You investigate alerts."),
            ConversationMessage(role="user", content="Pod api-0 is crash looping."),
        ],
        config=LLMProviderConfig(backend="google-native", model=model, retry=FAST, **config),
        tools=tools or [],
        thought_signatures=signatures or {},
    )


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


async def generate(fake: FakeGemini, req: GenerateRequest) -> LLMResult:
    return await provider(fake).generate(req)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gemini-2.5-pro", {"include_thoughts": True, "thinking_budget": 32768}),
        ("gemini-2.5-flash", {"include_thoughts": True, "thinking_budget": 24576}),
        ("gemini-2.5-flash-lite", {"include_thoughts": True, "thinking_budget": 24576}),
        ("gemini-3-pro-preview", {"include_thoughts": True, "thinking_level": "HIGH"}),
        ("gemini-2.0-flash", {"include_thoughts": True, "thinking_budget": 24576}),
    ],
)
async def test_thinking_config_per_model_family(
    fake: FakeGemini, model: str, expected: dict[str, object]
) -> None:
    fake.script(FakeReply(text="ok"))
    await generate(fake, request(model=model))
    sent = fake.calls[0].generation_config()["thinkingConfig"]
    # The API takes proto-JSON field names in either case; compare them in snake_case.
    assert {snake(key): value for key, value in sent.items()} == expected
    assert fake.calls[0].model == model


async def test_thinking_off_sends_no_thinking_config(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok"))
    await generate(fake, request(thinking=False))
    assert "thinkingConfig" not in fake.calls[0].generation_config()
    assert thinking_config(LLMProviderConfig(model="m", thinking=False)) is None


async def test_thoughts_stream_as_thinking_and_usage_counts_them(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="The config map is wrong.", thinking="Look at env first.",
                          thinking_tokens=7))  # fmt: skip
    result = await generate(fake, request())
    assert result.thinking == "Look at env first."
    assert result.text == "The config map is wrong."
    assert result.usage.thinking_tokens == 7
    assert result.usage.total_tokens == 37


async def test_text_signature_is_captured_and_sent_back_on_the_text_part(
    fake: FakeGemini,
) -> None:
    fake.script(FakeReply(text="First answer.", thinking="hmm", thought_signature=b"sig-one"))
    first = await generate(fake, request())
    state = first.provider_state
    assert set(state) == {turn_key(0)}

    messages = [
        *request().messages,
        ConversationMessage(role="assistant", content=first.text),
        ConversationMessage(role="user", content="Go on."),
    ]
    fake.script(FakeReply(text="Second answer."))
    await generate(fake, request(messages=messages, signatures=state))

    [model_turn] = fake.calls[1].model_parts()
    assert model_turn == [
        {"text": "First answer.", "thoughtSignature": base64.b64encode(b"sig-one").decode()}
    ]


async def test_function_call_signature_goes_back_on_that_call(fake: FakeGemini) -> None:
    fake.script(
        FakeReply(
            tool_calls=[
                FakeToolCall(name="kubernetes__pods_get", args={"name": "api-0"}, id="c1",
                             thought_signature=b"sig-call"),
                FakeToolCall(name="kubernetes__pods_get", args={"name": "api-1"}, id="c2"),
            ]
        )
    )  # fmt: skip
    first = await generate(fake, request(tools=[TOOL]))
    assert [c.name for c in first.tool_calls] == ["kubernetes.pods_get"] * 2
    assert fake.calls[0].function_names() == ["kubernetes__pods_get"]

    messages = [
        *request().messages,
        ConversationMessage(role="assistant", content="", tool_calls=first.tool_calls),
        *[
            ConversationMessage(role="tool", content="Running", tool_call_id=c.id,
                                tool_name=c.name)
            for c in first.tool_calls
        ],
    ]  # fmt: skip
    fake.script(FakeReply(text="done"))
    await generate(fake, request(messages=messages, tools=[TOOL], signatures=first.provider_state))

    [model_turn] = fake.calls[1].model_parts()
    assert model_turn[0]["functionCall"]["name"] == "kubernetes__pods_get"
    assert model_turn[0]["thoughtSignature"] == base64.b64encode(b"sig-call").decode()
    assert "thoughtSignature" not in model_turn[1]
    responses = [
        part["functionResponse"]
        for content in fake.calls[1].body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert [r["name"] for r in responses] == ["kubernetes__pods_get"] * 2


async def test_native_tools_sent_without_mcp_tools(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="ok"))
    result = await generate(fake, request(native_tools=["google_search", "code_execution"]))
    assert fake.calls[0].tools() == [{"googleSearch": {}}, {"codeExecution": {}}]
    assert "native_tools_suppressed" not in result.metadata


async def test_native_tools_suppressed_with_mcp_tools(
    fake: FakeGemini, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(FakeReply(text="ok"))
    result = await generate(fake, request(tools=[TOOL], native_tools=["google_search"]))
    assert fake.calls[0].function_names() == ["kubernetes__pods_get"]
    assert not any("googleSearch" in tool for tool in fake.calls[0].tools())
    assert result.metadata["native_tools_suppressed"] == ["google_search"]
    assert "suppressed" in caplog.text


async def test_code_execution_and_grounding(fake: FakeGemini) -> None:
    grounding = {"webSearchQueries": ["kubernetes crashloop config map"]}
    fake.script(
        FakeReply(
            text="The ratio is 0.5.",
            code_executions=[FakeCodeExecution(code="print(1/2)", output="0.5\n")],
            grounding=grounding,
        )
    )
    result = await generate(fake, request(native_tools=["code_execution"]))
    # The code part and its result part are one record.
    assert [(c.code, c.outcome, c.output) for c in result.code_executions] == [
        ("print(1/2)", "OUTCOME_OK", "0.5\n"),
    ]
    assert result.metadata["grounding"] == [
        {"web_search_queries": ["kubernetes crashloop config map"]}
    ]


async def test_429_with_retry_after_then_500_then_success(fake: FakeGemini) -> None:
    fake.script(
        FakeReply(status=429, retry_after=1),
        FakeReply(status=500),
        FakeReply(text="third time lucky"),
    )
    result = await generate(fake, request())
    assert result.text == "third time lucky"
    assert result.attempts == 3
    assert len(fake.calls) == 3


async def test_four_500s_fail_retryable(fake: FakeGemini) -> None:
    fake.script(*[FakeReply(status=500, error_message="backend down")] * 4)
    with pytest.raises(LLMError) as failure:
        await generate(fake, request())
    assert failure.value.info.retryable is True
    assert failure.value.attempts == 4
    assert len(fake.calls) == 4


async def test_400_fails_at_once(fake: FakeGemini) -> None:
    fake.script(FakeReply(status=400, error_message="bad request"), FakeReply(text="never"))
    with pytest.raises(LLMError) as failure:
        await generate(fake, request())
    assert failure.value.info.retryable is False
    assert failure.value.info.code == "400"
    assert failure.value.attempts == 1
    assert len(fake.calls) == 1


async def test_empty_response_is_retried(fake: FakeGemini) -> None:
    fake.script(FakeReply(empty=True), FakeReply(text="now with content"))
    result = await generate(fake, request())
    assert result.text == "now with content"
    assert result.attempts == 2


def test_tool_call_arguments_round_trip_through_messages() -> None:
    call = ToolCall(id="c1", name="kubernetes.pods_get", arguments='{"name": "api-0"}')
    from tarsy.llm.google_native import to_contents

    system, contents = to_contents(
        [
            ConversationMessage(role="system", content="sys"),
            ConversationMessage(role="assistant", content="", tool_calls=[call]),
        ]
    )
    assert system == "sys"
    part = contents[0].parts[0]  # type: ignore[index]
    assert part.function_call is not None
    assert part.function_call.name == "kubernetes__pods_get"
    assert part.function_call.args == {"name": "api-0"}


# ─── tool_choice (seed 001 R6) ────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("kubernetes.pods_get", {"mode": "ANY", "allowedFunctionNames": ["kubernetes__pods_get"]}),
    ],
)
async def test_tool_choice_reaches_gemini_as_function_calling_config(
    fake: FakeGemini, choice: str, expected: dict[str, object]
) -> None:
    fake.script(FakeReply(text="ok"))
    req = request(tools=[TOOL]).model_copy(update={"tool_choice": choice})
    await generate(fake, req)
    [call] = fake.calls
    assert call.function_names() == ["kubernetes__pods_get"]
    assert call.function_calling_config() == expected


async def test_no_tool_choice_or_no_tools_sends_no_function_calling_config(
    fake: FakeGemini,
) -> None:
    fake.script(FakeReply(text="a"), FakeReply(text="b"))
    await generate(fake, request(tools=[TOOL]))  # tool_choice unset: the API default
    # A conclusion call: "none", and no functions to configure.
    await generate(fake, request().model_copy(update={"tool_choice": "none"}))
    assert [c.function_calling_config() for c in fake.calls] == [None, None]
    assert fake.calls[1].tools() == []

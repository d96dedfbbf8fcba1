"""The openai, xai, openai-compatible and anthropic types: the real SDKs against loopback fakes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tarsy.config.schema import LLMProviderConfig, ProviderType, RetryPolicy
from tarsy.errors import ConfigError, LLMError
from tarsy.llm.base import GenerateRequest, ToolDefinition
from tarsy.llm.registry import get_provider
from tarsy.models import ConversationMessage, ToolCall
from tarsy.settings import Settings
from tarsy_dev.fakes.fake_anthropic import FakeAnthropic
from tarsy_dev.fakes.fake_openai import FakeOpenAI
from tarsy_dev.fakes.loopback import ScriptedReply, ScriptedToolCall

FAST = RetryPolicy(initial_delay=0.01, max_delay=2.0, empty_response_delay=0.01, max_retries=3)
TOOL = ToolDefinition(
    name="kubernetes.pods_log",
    description="Read a pod's log",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}, "previous": {"type": "boolean"}},
    },
)
CONVERSATION = [
    ConversationMessage(role="system", content="You investigate alerts."),
    ConversationMessage(role="user", content="Pod api-0 is crash looping."),
    ConversationMessage(
        role="assistant",
        content="Reading its log.",
        tool_calls=[ToolCall(id="c1", name="kubernetes.pods_log", arguments='{"name": "api-0"}')],
    ),
    ConversationMessage(
        role="tool", content="FATAL: password authentication failed", tool_call_id="c1",
        tool_name="kubernetes.pods_log",
    ),
]  # fmt: skip


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def anthropic_fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(autouse=True)
def vendor_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "XAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, f"key-of-{name}")


def request(
    provider_type: ProviderType, model: str, base_url: str, **extra: object
) -> GenerateRequest:
    config = LLMProviderConfig(type=provider_type, model=model, base_url=base_url, retry=FAST)
    return GenerateRequest(
        execution_id="exec-1", messages=CONVERSATION, config=config, tools=[TOOL], **extra
    )


OPENAI_STYLE: list[tuple[ProviderType, str, str]] = [
    ("openai", "gpt-4.1", "Bearer key-of-OPENAI_API_KEY"),
    ("xai", "grok-4", "Bearer key-of-XAI_API_KEY"),
    ("openai-compatible", "qwen2.5-coder-1.5b", "Bearer not-needed"),
]


@pytest.mark.parametrize(("provider_type", "model", "authorization"), OPENAI_STYLE)
async def test_openai_style_types_stream_text_tool_calls_usage_and_finish_reason(
    openai_fake: FakeOpenAI, provider_type: ProviderType, model: str, authorization: str
) -> None:
    openai_fake.script(
        ScriptedReply(
            text="Checking events too.",
            stream_chunks=3,
            tool_calls=[
                ScriptedToolCall(
                    name="kubernetes__pods_log", args={"name": "api-0", "previous": True}
                )
            ],
            input_tokens=120,
            output_tokens=30,
        )
    )
    req = request(provider_type, model, openai_fake.base_url, tool_choice="required")
    result = await get_provider(req.config, Settings()).generate(req)

    assert result.text == "Checking events too."
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("kubernetes.pods_log", {"name": "api-0", "previous": True})
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 30)
    assert result.finish_reason == "tool_calls"
    sent = openai_fake.calls[0]
    assert sent.headers["authorization"] == authorization
    assert sent.body["tool_choice"] == "required"
    assert sent.body["tools"][0]["function"]["name"] == "kubernetes__pods_log"
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent.body["messages"][2]["tool_calls"][0]["function"]["name"] == "kubernetes__pods_log"


async def test_a_response_schema_is_sent_as_response_format_json_schema(
    openai_fake: FakeOpenAI,
) -> None:
    schema = {"type": "object", "properties": {"action": {"const": "final_answer"}}}
    openai_fake.script(ScriptedReply(text='{"action": "final_answer"}'))
    req = request("openai-compatible", "local", openai_fake.base_url, response_schema=schema)
    await get_provider(req.config, Settings()).generate(req)
    assert openai_fake.calls[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": schema},
    }


async def test_a_reply_cut_at_the_token_limit_says_length(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(ScriptedReply(text="The root cause is the data", finish_reason="length"))
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    result = await get_provider(req.config, Settings()).generate(req)
    assert (result.finish_reason, result.raw_finish_reason, result.cut_short) == (
        "length", "length", True,
    )  # fmt: skip


async def test_a_429_waits_its_retry_after_then_succeeds(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(
        ScriptedReply(status=429, error_message="slow down", retry_after=0.2),
        ScriptedReply(text="done"),
    )
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    result = await get_provider(req.config, Settings()).generate(req)
    assert (result.text, result.attempts) == ("done", 2)
    gap = openai_fake.calls[1].received_at - openai_fake.calls[0].received_at
    assert gap >= 0.2


async def test_a_500_storm_exhausts_the_transport_retries_as_a_retryable_server_error(
    openai_fake: FakeOpenAI,
) -> None:
    openai_fake.script(*[ScriptedReply(status=500, error_message="boom")] * 4)
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    with pytest.raises(LLMError) as caught:
        await get_provider(req.config, Settings()).generate(req)
    assert (caught.value.kind, caught.value.code, caught.value.attempts) == ("server", "500", 4)
    assert caught.value.retryable
    assert len(openai_fake.calls) == 4


async def test_a_400_is_not_retried(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(ScriptedReply(status=400, error_message="bad tool schema"))
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    with pytest.raises(LLMError) as caught:
        await get_provider(req.config, Settings()).generate(req)
    assert (caught.value.kind, caught.value.retryable, len(openai_fake.calls)) == (
        "client", False, 1,
    )  # fmt: skip


async def test_malformed_tool_call_arguments_arrive_as_sent_for_the_tool_layer_to_refuse(
    openai_fake: FakeOpenAI,
) -> None:
    openai_fake.script(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(name="kubernetes__pods_log", raw_arguments='{"name": "api-0"')
            ]
        )
    )
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    result = await get_provider(req.config, Settings()).generate(req)
    assert result.tool_calls[0].arguments == '{"name": "api-0"'


async def test_a_missing_vendor_key_is_a_configuration_error(
    openai_fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    req = request("openai", "gpt-4.1", openai_fake.base_url)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        await get_provider(req.config, Settings()).generate(req)


async def test_anthropic_streams_text_tool_use_usage_and_stop_reason(
    anthropic_fake: FakeAnthropic,
) -> None:
    anthropic_fake.script(
        ScriptedReply(
            text="Reading the previous log.",
            thinking="The restarts suggest a crash at start.",
            tool_calls=[
                ScriptedToolCall(
                    name="kubernetes__pods_log", args={"name": "api-0", "previous": True}
                )
            ],
            input_tokens=200,
            output_tokens=40,
        )
    )
    req = request("anthropic", "claude-sonnet-5", anthropic_fake.url, tool_choice="auto")
    result = await get_provider(req.config, Settings()).generate(req)

    assert result.text == "Reading the previous log."
    assert result.thinking == "The restarts suggest a crash at start."
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("kubernetes.pods_log", {"name": "api-0", "previous": True})
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (200, 40)
    assert result.finish_reason == "tool_calls"
    sent = anthropic_fake.calls[0]
    # The SDK sends the key as x-api-key or, in recent versions, as a bearer token.
    credential = sent.headers.get("x-api-key") or sent.headers.get("authorization", "")
    assert credential.endswith("key-of-ANTHROPIC_API_KEY")
    # The static part carries the prompt cache's breakpoint: an agent's sessions share it.
    assert sent.body["system"] == [
        {"type": "text", "text": "You investigate alerts.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "user"]
    assert sent.body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "FATAL: password authentication failed",
    }
    assert sent.body["tool_choice"] == {"type": "auto"}


async def test_anthropic_max_tokens_stop_is_length(anthropic_fake: FakeAnthropic) -> None:
    anthropic_fake.script(ScriptedReply(text="The cause is", finish_reason="max_tokens"))
    req = request("anthropic", "claude-sonnet-5", anthropic_fake.url)
    result = await get_provider(req.config, Settings()).generate(req)
    assert (result.finish_reason, result.raw_finish_reason) == ("length", "max_tokens")


async def test_anthropic_overloaded_529_is_a_retryable_server_error(
    anthropic_fake: FakeAnthropic,
) -> None:
    anthropic_fake.script(*[ScriptedReply(status=529, error_message="overloaded")] * 4)
    req = request("anthropic", "claude-sonnet-5", anthropic_fake.url)
    with pytest.raises(LLMError) as caught:
        await get_provider(req.config, Settings()).generate(req)
    assert (caught.value.kind, caught.value.code, caught.value.retryable) == ("server", "529", True)


async def test_anthropic_429_retry_after_is_honoured(anthropic_fake: FakeAnthropic) -> None:
    anthropic_fake.script(
        ScriptedReply(status=429, error_message="slow down", retry_after=0.2),
        ScriptedReply(text="done"),
    )
    req = request("anthropic", "claude-sonnet-5", anthropic_fake.url)
    result = await get_provider(req.config, Settings()).generate(req)
    assert (result.text, result.attempts) == ("done", 2)
    assert anthropic_fake.calls[1].received_at - anthropic_fake.calls[0].received_at >= 0.2

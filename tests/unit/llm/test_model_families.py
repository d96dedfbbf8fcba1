"""Capabilities are per model: each backend's family table, its fallback, and declared servers."""

from __future__ import annotations

import logging

import pytest

from tarsy.agent.strategies.base import missing_capabilities
from tarsy.agent.strategies.native_thinking import NativeThinkingStrategy
from tarsy.config import load_config
from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError
from tarsy.llm.backends import capabilities_of
from tarsy.llm.backends.families import Family, lookup
from tarsy.llm.base import Capabilities
from tarsy.llm.pricing import unpriced_providers
from tarsy.settings import Settings


def caps(**config: object) -> Capabilities:
    return capabilities_of(LLMProviderConfig.model_validate(config))


def test_the_longest_family_prefix_wins_and_an_unknown_name_gets_the_fallback() -> None:
    short = Family("grok-4", Capabilities(context_window=1))
    long = Family("grok-4.20", Capabilities(context_window=2))
    fallback = Capabilities(context_window=3)
    assert lookup("grok-4.20-0309-reasoning", (short, long), fallback).context_window == 2
    assert lookup("grok-4-0709", (long, short), fallback).context_window == 1
    assert lookup("grok-9", (short, long), fallback).context_window == 3


def test_gemma_on_the_gemini_api_has_no_thinking_native_tools_or_code_execution() -> None:
    gemma = caps(backend="google-native", model="gemma-3-27b-it")
    gemini = caps(backend="google-native", model="gemini-2.5-flash")
    assert (gemma.thinking, gemma.native_tools, gemma.code_execution) == (False, False, False)
    assert (gemini.thinking, gemini.native_tools, gemini.code_execution) == (True, True, True)
    assert missing_capabilities(NativeThinkingStrategy.requires, gemma) == [
        "thinking",
        "function_calling",
    ]


def test_gemini_2_0_flash_writes_8192_tokens_and_does_not_think() -> None:
    flash = caps(backend="google-native", model="gemini-2.0-flash-001")
    assert (flash.max_output_tokens, flash.thinking, flash.function_calling) == (8_192, False, True)


def test_a_gemini_name_newer_than_the_table_gets_the_families_abilities() -> None:
    assert caps(backend="google-native", model="gemini-4-pro").thinking


def test_langchain_passes_on_only_function_calls_and_the_models_limits() -> None:
    model = caps(backend="langchain", model="gemini-3-pro-preview")
    assert model == Capabilities(
        function_calling=True, context_window=1_048_576, max_output_tokens=65_536
    )


def test_claude_limits_are_its_familys_on_anthropic_and_on_vertex_ai() -> None:
    assert caps(type="anthropic", model="claude-haiku-4-5-20251001").max_output_tokens == 64_000
    assert caps(type="anthropic", model="claude-sonnet-5").context_window == 1_000_000
    assert caps(type="vertexai", backend="langchain",
                model="claude-haiku-4-5@20251001").max_output_tokens == 64_000  # fmt: skip


def test_grok_4_20_has_a_million_token_window_and_grok_4_a_quarter_of_one() -> None:
    assert caps(type="xai", model="grok-4.20-0309-reasoning").context_window == 1_000_000
    assert caps(type="xai", model="grok-4").context_window == 256_000


def test_a_compatible_servers_model_is_what_the_configuration_declares() -> None:
    declared = caps(type="openai-compatible", model="any", base_url="http://h/v1",
                    tool_calling=False, context_window=8192)  # fmt: skip
    assert (declared.function_calling, declared.context_window) == (False, 8192)
    assert caps(type="openai-compatible", model="any", base_url="http://h/v1").function_calling


def test_asking_for_more_output_than_the_model_writes_is_refused_at_load() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(
            Settings(),
            user_text="llm_providers:\n  default: {type: google, backend: google-native, "
            "model: gemini-2.0-flash, max_output_tokens: 20000}\n",
        )
    assert caught.value.errors == [
        (
            "llm_providers.default.max_output_tokens",
            "model 'gemini-2.0-flash' writes at most 8192 output tokens; 20000 was asked",
        )
    ]


# ─── an unpriced hosted model ─────────────────────────────────────────────────

UNPRICED = (
    "llm_providers:\n  grok: {type: xai, model: grok-3-mini}\n"
    "  local: {type: openai-compatible, model: m, base_url: 'http://127.0.0.1:1/v1'}\n"
)


def test_an_unpriced_hosted_model_is_reported_when_the_configuration_loads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="tarsy.config.loader"):
        config = load_config(Settings(), user_text=UNPRICED)
    assert [location for location, _ in unpriced_providers(config)] == ["llm_providers.grok.model"]
    assert any("'grok-3-mini' has no price" in r.getMessage() for r in caplog.records)
    assert not any("llm_providers.local" in r.getMessage() for r in caplog.records)


def test_an_unpriced_hosted_model_is_refused_when_the_configuration_says_so() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Settings(), user_text=UNPRICED + "unpriced_models: refuse\n")
    assert [location for location, _ in caught.value.errors] == ["llm_providers.grok.model"]


def test_a_price_in_the_users_file_satisfies_the_refusal() -> None:
    text = UNPRICED + "unpriced_models: refuse\npricing:\n  grok-3-mini: " \
        "{input_per_million: 0.3, output_per_million: 0.5}\n"  # fmt: skip
    assert load_config(Settings(), user_text=text).unpriced_models == "refuse"


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash",
        "gemini-3-pro-preview",
        "gpt-5-2025-08-07",
        "gpt-4.1",
        "claude-haiku-4-5-20251001",
        "claude-sonnet-5",
        "grok-4.20-0309-reasoning",
    ],
)
def test_the_current_models_of_each_vendor_have_a_built_in_price(model: str) -> None:
    price = load_config(Settings()).price_for(model)
    assert price is not None and price.output_per_million > price.input_per_million > 0

"""Provider types: one config of each loads; names, settings and strategies are checked per type."""

from __future__ import annotations

import pytest

from tarsy.agent.strategies.base import call_key
from tarsy.config import load_config
from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError
from tarsy.llm.backends import BACKENDS, backend_for, capabilities_of
from tarsy.llm.base import ToolDefinition
from tarsy.llm.pricing import SELF_HOSTED_NOTE, priced
from tarsy.models import TokenUsage, ToolCall
from tarsy.settings import Settings
from tarsy.telemetry import genai_provider_name
from tarsy.tools.base import ToolListing

EVERY_TYPE = """
llm_providers:
  gemini: {type: google, model: gemini-2.5-flash, backend: google-native}
  vertex-claude: {type: vertexai, model: 'claude-sonnet-4@20250514', vertex_project: p}
  gpt: {type: openai, model: gpt-4.1, api_key_env: OPENAI_API_KEY}
  claude: {type: anthropic, model: claude-sonnet-5, api_key: {secret: anthropic-key}}
  grok: {type: xai, model: grok-4}
  local: {type: openai-compatible, model: qwen2.5-coder-1.5b, base_url: 'http://127.0.0.1:8080/v1',
          context_window: 8192}
"""


def load(text: str) -> object:
    return load_config(Settings(), user_text=text)


def errors_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        load(text)
    return caught.value.errors


def test_a_config_with_one_provider_of_each_type_loads() -> None:
    config = load_config(Settings(), user_text=EVERY_TYPE)
    types = {name: p.type for name, p in config.llm_providers.items()}
    assert {t for n, t in types.items() if n not in ("default", "gemini-native")} == set(BACKENDS)
    assert config.llm_providers["gpt"].api_key is not None
    assert config.llm_providers["gpt"].api_key.env == "OPENAI_API_KEY"


def test_a_config_written_before_types_loads_as_google_and_claude_as_vertexai() -> None:
    old = LLMProviderConfig.model_validate({"backend": "google-native", "model": "gemini-2.5-pro"})
    claude = LLMProviderConfig.model_validate(
        {"backend": "langchain", "model": "claude-sonnet-4@20250514"}
    )
    assert (old.type, claude.type) == ("google", "vertexai")


@pytest.mark.parametrize(
    ("provider_type", "model"),
    [("openai", "gpt-4.1"), ("openai", "o4-mini"), ("xai", "grok-3-mini"),
     ("anthropic", "claude-opus-5"), ("openai-compatible", "anything/my-finetune:Q4")],
)  # fmt: skip
def test_model_names_are_checked_by_their_own_type(provider_type: str, model: str) -> None:
    assert backend_for(provider_type).model_problem(model) is None


def test_a_gemini_rule_never_applies_to_another_type() -> None:
    [(location, message)] = errors_of(
        "llm_providers:\n  x: {type: openai, model: gemini-2.5-pro}\n"
    )
    assert location == "llm_providers.x.model"
    assert "not an OpenAI model id" in message and "openai-compatible" in message


def test_a_setting_of_another_type_is_refused_by_name() -> None:
    [(location, message)] = errors_of(
        "llm_providers:\n  x: {type: openai, model: gpt-4.1, thinking_level: HIGH}\n"
    )
    assert location == "llm_providers.x.thinking_level"
    assert "'openai'" in message


def test_a_compatible_server_needs_its_url() -> None:
    [(location, _)] = errors_of("llm_providers:\n  x: {type: openai-compatible, model: m}\n")
    assert location == "llm_providers.x.base_url"


def test_a_strategy_a_model_cannot_serve_is_refused_naming_both() -> None:
    problems = errors_of(
        "llm_providers:\n  default: {type: anthropic, model: claude-sonnet-5}\n"
        "agents:\n  investigator: {iteration_strategy: schema-actions}\n"
    )
    [(location, message)] = [p for p in problems if "schema-actions" in p[1]]
    assert location.endswith("llm_provider")
    assert "structured_output" in message
    assert "'claude-sonnet-5'" in message and "'default'" in message


def test_a_compatible_model_declared_without_structured_output_cannot_run_schema_actions() -> None:
    problems = errors_of(
        "llm_providers:\n  default: {type: openai-compatible, model: m, "
        "base_url: 'http://127.0.0.1:1/v1', structured_output: false}\n"
        "agents:\n  investigator: {iteration_strategy: schema-actions}\n"
    )
    assert any("structured_output" in message for _, message in problems)


def test_a_tool_agent_on_a_compatible_server_defaults_to_schema_actions() -> None:
    config = load_config(
        Settings(),
        user_text=(
            "llm_providers:\n  default: {type: openai-compatible, model: m, "
            "base_url: 'http://127.0.0.1:1/v1'}\n"
            "agents:\n  investigator: {mcp_servers: [kubernetes]}\n"
        ),
    )
    assert config.resolve("default", 0, 0).iteration_strategy == "schema-actions"


def test_capabilities_are_per_model() -> None:
    gpt41 = LLMProviderConfig(type="openai", model="gpt-4.1")
    gpt4o = LLMProviderConfig(type="openai", model="gpt-4o-mini")
    native = LLMProviderConfig(backend="google-native", model="gemini-2.5-flash")
    assert capabilities_of(gpt41).context_window == 1_047_576
    assert capabilities_of(gpt4o).context_window == 128_000
    assert capabilities_of(native).thinking and capabilities_of(native).structured_output
    assert not capabilities_of(
        LLMProviderConfig(type="anthropic", model="claude-opus-5")
    ).structured_output


@pytest.mark.parametrize(
    ("config", "name"),
    [
        (LLMProviderConfig(type="openai", model="gpt-4.1"), "openai"),
        (LLMProviderConfig(type="anthropic", model="claude-opus-5"), "anthropic"),
        (LLMProviderConfig(type="xai", model="grok-4"), "x_ai"),
        (LLMProviderConfig(type="openai-compatible", model="m", base_url="http://h/v1"),
         "openai_compatible"),
        (LLMProviderConfig(type="vertexai", model="gemini-2.5-pro"), "gcp.vertex_ai"),
        (LLMProviderConfig(type="google", model="gemini-2.5-pro"), "gcp.vertex_ai"),
    ],
)  # fmt: skip
def test_telemetry_names_each_vendor(config: LLMProviderConfig, name: str) -> None:
    assert genai_provider_name(config, Settings()) == name


def test_a_self_hosted_model_costs_nothing_and_says_so() -> None:
    config = load_config(Settings())
    local = LLMProviderConfig(type="openai-compatible", model="qwen", base_url="http://h/v1")
    assert priced(config, local, TokenUsage(input_tokens=10_000)) == (0, SELF_HOSTED_NOTE)
    gemini = LLMProviderConfig(type="google", model="gemini-2.5-flash")
    cost, note = priced(config, gemini, TokenUsage(input_tokens=1_000_000))
    assert (cost, note) == (300_000_000, "")  # nano-dollars


def test_the_loop_guard_compares_calls_with_schema_defaults_filled_in() -> None:
    tool = ToolDefinition(
        name="k.pods_log",
        parameters={"type": "object", "properties": {
            "name": {"type": "string"}, "previous": {"type": "boolean", "default": False}}},
    )  # fmt: skip
    listing = ToolListing(tools=[tool])
    omitted = ToolCall(id="1", name="k.pods_log", arguments='{"name": "a"}')
    explicit = ToolCall(id="2", name="k.pods_log", arguments='{"previous": false, "name": "a"}')
    other = ToolCall(id="3", name="k.pods_log", arguments='{"previous": true, "name": "a"}')
    assert call_key(omitted, listing) == call_key(explicit, listing)
    assert call_key(other, listing) != call_key(omitted, listing)

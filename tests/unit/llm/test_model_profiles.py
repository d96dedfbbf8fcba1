"""Model profiles: open-weights families read from served names, and the path each agent takes."""

from __future__ import annotations

import pytest

from tarsy.config import load_config
from tarsy.config.schema import LLMProviderConfig, TarsyConfig
from tarsy.engine.messages import strategy_of
from tarsy.llm.backends import capabilities_of
from tarsy.llm.backends.open_weights import parameters_in, profile_of
from tarsy.settings import Settings


@pytest.mark.parametrize(
    ("name", "family", "parameters", "window", "small"),
    [
        ("qwen2.5-coder-1.5b-instruct", "qwen2.5", 1.5, 32_768, True),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5", 7.0, 32_768, True),
        ("qwen2.5:72b", "qwen2.5", 72.0, 32_768, False),
        ("Qwen3-30B-A3B", "qwen3", 30.0, 32_768, False),
        ("qwen3:4b", "qwen3", 4.0, 32_768, True),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3.x", 8.0, 131_072, True),
        ("llama3.2:3b", "llama3.x", 3.0, 131_072, True),
        ("llama3:70b", "llama3", 70.0, 8_192, False),
        ("gemma-3-27b-it", "gemma3", 27.0, 131_072, False),
        ("gemma3:1b", "gemma3-1b", 1.0, 32_768, True),
        ("mistral", "mistral", 7.0, 32_768, True),
        ("mistral-nemo-instruct-2407", "mistral-nemo", 12.0, 131_072, False),
        ("phi3:mini", "phi3", 3.8, 4_096, True),
        ("Phi-3-mini-128k-instruct", "phi3", 3.8, 131_072, True),
        ("phi-4", "phi4", 14.0, 16_384, False),
    ],
)
def test_a_served_name_gives_its_family_size_and_window(
    name: str, family: str, parameters: float, window: int, small: bool
) -> None:
    profile = profile_of(name)
    assert profile is not None
    assert (profile.family, profile.parameters, profile.context_window, profile.small) == (
        family,
        parameters,
        window,
        small,
    )


def test_names_of_no_open_weights_family_have_no_profile() -> None:
    assert profile_of("gpt-4o") is None
    assert profile_of("my-finetune") is None
    assert parameters_in("q4_k_m-2.5-instruct") is None


def compatible(**settings: object) -> LLMProviderConfig:
    return LLMProviderConfig.model_validate(
        {"type": "openai-compatible", "base_url": "http://127.0.0.1:1/v1", **settings}
    )


def test_a_compatible_server_is_profiled_by_its_name_unless_the_config_says() -> None:
    small = capabilities_of(compatible(model="qwen2.5-coder-1.5b-instruct"))
    assert small.small and small.context_window == 32_768
    assert small.prompt_tokens_per_second is None
    declared = capabilities_of(
        compatible(
            model="qwen2.5-coder-1.5b-instruct",
            small=False,
            context_window=8192,
            prompt_tokens_per_second=35.5,
        )
    )
    assert (declared.small, declared.context_window, declared.prompt_tokens_per_second) == (
        False,
        8192,
        35.5,
    )
    unknown = capabilities_of(compatible(model="house-model"))
    assert not unknown.small and unknown.context_window is None


def test_hosted_models_are_capable_and_fast_by_default() -> None:
    gemini = capabilities_of(LLMProviderConfig(type="google", model="gemini-2.5-flash"))
    assert not gemini.small and gemini.prompt_tokens_per_second is None


LOCAL = """
llm_providers:
  small: {type: openai-compatible, model: qwen2.5-coder-1.5b-instruct,
          base_url: "http://127.0.0.1:1/v1"}
mcp_servers:
  kubernetes: {url: "http://127.0.0.1:9000/mcp"}
agents:
  follows:
    llm_provider: small
    mcp_servers: [kubernetes]
  plans:
    llm_provider: small
    mcp_servers: [kubernetes]
    compact_path: false
  hosted:
    mcp_servers: [kubernetes]
    compact_path: true
compact_path:
  follow_up_calls: 2
agent_chains:
  local:
    alert_types: [local]
    stages:
      - name: investigation
        parallel: true
        agents: [{name: follows}, {name: plans}, {name: hosted}]
"""


def test_a_small_model_takes_the_compact_path_unless_its_agent_says_otherwise() -> None:
    config: TarsyConfig = load_config(Settings(), user_text=LOCAL)
    follows, plans, hosted = (config.resolve("local", 0, n) for n in range(3))
    assert follows.compact is not None and follows.compact.follow_up_calls == 2
    assert follows.compact.output_tokens == 600  # the section merges by key
    assert plans.compact is None
    assert hosted.compact is not None  # any model, by its agent's choice
    assert strategy_of(follows, "agent") == "compact"
    assert strategy_of(plans, "agent") == "schema-actions"
    assert strategy_of(follows, "synthesis") == follows.iteration_strategy
    without_tools = follows.model_copy(update={"mcp_servers": []})
    assert strategy_of(without_tools, "agent") == without_tools.iteration_strategy

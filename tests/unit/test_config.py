"""Configuration: built-in YAML, user overrides, field-level errors, chain lookup, resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from tarsy.agent.strategies import registry
from tarsy.config import load_config
from tarsy.config.loader import (
    _UniqueKeyLoader,
    builtin_config_text,
    merge_config,
    validate_config,
)
from tarsy.config.schema import (
    DEFAULT_CHAIN,
    LLMProviderConfig,
    MCPServerConfig,
    SecretRef,
    StageConfig,
    TarsyConfig,
)
from tarsy.errors import ConfigError
from tarsy.settings import Settings

SETTINGS = Settings()

MULTI = """
llm_providers:
  pro: {backend: google-native, model: gemini-2.5-pro}
  lc: {backend: langchain, model: gemini-2.5-flash}
mcp_servers:
  kubernetes: {url: "http://127.0.0.1:9000/mcp"}
  prometheus: {url: "http://127.0.0.1:9001/mcp"}
agents:
  k8s:
    instructions: Look at pods.
    custom_instructions: Be brief.
    iteration_strategy: react
    llm_provider: lc
    max_iterations: 7
    mcp_servers: [kubernetes]
  metrics:
    iteration_strategy: native-thinking
    on_max_iterations: pause
    mcp_servers: [prometheus]
agent_chains:
  kube:
    alert_types: [PodCrashLooping, OOMKilled]
    llm_provider: pro
    max_iterations: 12
    stages:
      - name: data
        max_iterations: 5
        parallel: true
        agents:
          - name: k8s
          - name: metrics
            llm_provider: default
            max_iterations: 3
            mcp_servers: []
      - name: analysis
        agent: k8s
"""


def load(text: str | None = None, settings: Settings = SETTINGS) -> TarsyConfig:
    return load_config(settings, user_text=text)


def config_error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as failure:
        load(text)
    return failure.value


# ─── built-in configuration ───────────────────────────────────────────────────


def test_builtin_text_is_yaml_with_the_default_chain() -> None:
    raw = yaml.safe_load(builtin_config_text())
    assert DEFAULT_CHAIN in raw["agent_chains"]


def test_builtin_loads_with_default_model_from_settings() -> None:
    config = load()
    assert set(config.agent_chains) == {DEFAULT_CHAIN, "kubernetes", "metrics"}
    assert "investigator" in config.agents
    assert config.llm_providers["default"].model == "gemini-2.5-flash"
    assert config.llm_providers["default"].backend == "google-native"
    assert load(settings=Settings(TARSY_DEFAULT_MODEL="gemini-2.5-pro")).llm_providers[
        "default"
    ].model == ("gemini-2.5-pro")


def test_builtin_default_chain_resolves() -> None:
    resolved = load().resolve(DEFAULT_CHAIN, 0, 0)
    assert resolved.agent == "investigator"
    assert resolved.iteration_strategy == "single-call"
    assert resolved.provider_name == "default"
    assert resolved.max_iterations == 20
    assert resolved.on_max_iterations == "conclude"
    assert resolved.mcp_servers == []
    assert "Investigate the alert" in resolved.instructions


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_user_text_is_the_builtin(text: str) -> None:
    assert load(text) == load()


def test_load_is_repeatable_and_does_not_leak_state() -> None:
    first = load(settings=Settings(TARSY_DEFAULT_MODEL="gemini-2.5-flash"))
    second = load(settings=Settings(TARSY_DEFAULT_MODEL="gemini-2.5-pro"))
    assert first.llm_providers["default"].model == "gemini-2.5-flash"
    assert second.llm_providers["default"].model == "gemini-2.5-pro"


# ─── user configuration ──────────────────────────────────────────────────────


def test_user_entries_add_to_and_override_builtins() -> None:
    config = load(
        MULTI
        + """
pricing:
  gemini-2.5-flash: {input_per_million: 9, output_per_million: 9}
"""
    )
    assert set(config.agent_chains) == {"default", "kubernetes", "metrics", "kube"}
    assert {"investigator", "k8s", "metrics"} <= set(config.agents)
    assert set(config.agents) - set(load().agents) == {"k8s", "metrics"}
    assert set(config.llm_providers) == {"default", "gemini-native", "pro", "lc"}
    assert config.pricing["gemini-2.5-flash"].input_per_million == 9
    assert config.pricing["gemini-2.5-pro"].input_per_million == 1.25


def test_user_default_provider_without_model_gets_the_settings_model() -> None:
    config = load("llm_providers:\n  default: {backend: langchain}\n")
    assert config.llm_providers["default"] == LLMProviderConfig(
        backend="langchain", model="gemini-2.5-flash"
    )


def test_user_default_provider_model_is_kept() -> None:
    config = load("llm_providers:\n  default: {backend: google-native, model: gemini-3-pro}\n")
    assert config.llm_providers["default"].model == "gemini-3-pro"


def test_defaults_merge_by_key() -> None:
    config = load("defaults:\n  max_iterations: 4\n")
    assert config.defaults.max_iterations == 4
    assert config.defaults.llm_provider == "default"


def test_merge_config_rules() -> None:
    base = {"agents": {"a": 1, "b": 2}, "defaults": {"x": 1, "y": 2}, "other": [1]}
    override = {"agents": {"b": 3, "c": 4}, "defaults": {"y": 9}, "other": [2]}
    assert merge_config(base, override) == {
        "agents": {"a": 1, "b": 3, "c": 4},
        "defaults": {"x": 1, "y": 9},
        "other": [2],
    }
    assert base == {"agents": {"a": 1, "b": 2}, "defaults": {"x": 1, "y": 2}, "other": [1]}


def test_config_path_file(tmp_path: Path) -> None:
    path = tmp_path / "tarsy.yaml"
    path.write_text(MULTI)
    config = load_config(Settings(TARSY_CONFIG_PATH=str(path)))
    assert "kube" in config.agent_chains


def test_config_path_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("defaults:\n  max_iterations: 0\n")
    with pytest.raises(ConfigError) as failure:
        load_config(Settings(TARSY_CONFIG_PATH=str(path)))
    assert str(path) in str(failure.value)
    assert failure.value.errors[0][0] == "defaults.max_iterations"


def test_unreadable_config_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match="cannot read TARSY_CONFIG_PATH") as failure:
        load_config(Settings(TARSY_CONFIG_PATH=str(missing)))
    assert str(missing) in str(failure.value)


def test_user_text_takes_precedence_over_config_path(tmp_path: Path) -> None:
    settings = Settings(TARSY_CONFIG_PATH=str(tmp_path / "does-not-exist.yaml"))
    assert "kube" in load_config(settings, user_text=MULTI).agent_chains


# ─── errors ──────────────────────────────────────────────────────────────────


def test_invalid_yaml() -> None:
    error = config_error("agents: [\n")
    assert "not valid YAML" in str(error)
    assert error.errors == []


def test_duplicate_keys_are_rejected_with_their_lines() -> None:
    error = config_error(
        "agents:\n  a: {instructions: first}\n  b: {}\n  a: {instructions: second}\n"
    )
    assert "found duplicate key 'a'" in str(error)
    assert "line 2" in str(error) and "line 4" in str(error)


def test_yaml_merge_keys_may_be_overridden() -> None:
    config = load(
        "agents:\n"
        "  base: &base {instructions: Look at pods., max_iterations: 4}\n"
        "  quick:\n    <<: *base\n    max_iterations: 2\n"
    )
    assert config.agents["quick"].instructions == "Look at pods."
    assert config.agents["quick"].max_iterations == 2


def test_top_level_must_be_a_mapping() -> None:
    assert "top level must be a mapping, got list" in str(config_error("- a\n- b\n"))


@pytest.mark.parametrize(
    ("text", "location", "fragment"),
    [
        ("defaults:\n  max_iterations: 0\n", "defaults.max_iterations", "greater than or equal"),
        ("defaults:\n  iteration_strategy: guess\n", "defaults.iteration_strategy", "Input"),
        ("llm_providers:\n  x: {model: m, temperature: 3}\n", "llm_providers.x.temperature", "2"),
        ("llm_providers:\n  x: {model: ''}\n", "llm_providers.x.model", "at least 1"),
        ("llm_providers:\n  x: {model: m, backend: openai}\n", "llm_providers.x.backend", "Input"),
        ("llm_providers:\n  x: {model: m, colour: red}\n", "llm_providers.x.colour", "Extra"),
        ("agents:\n  a: {max_iterations: 500}\n", "agents.a.max_iterations", "less than"),
        ("agent_chains:\n  c: {stages: []}\n", "agent_chains.c.stages", "at least 1"),
        ("mcp_servers:\n  m: {transport: http}\n", "mcp_servers.m", "needs 'url'"),
        ("mcp_servers:\n  m: {transport: stdio}\n", "mcp_servers.m", "needs 'command'"),
        (
            "mcp_servers:\n  m: {url: 'http://x', headers: {A: {env: X, secret: Y}}}\n",
            "mcp_servers.m.headers.A",
            "exactly one",
        ),
        (
            "agent_chains:\n  c:\n    stages:\n      - {name: s, agents: [{name: '1bad'}]}\n",
            "agent_chains.c.stages.0.agents.0.name",
            "pattern",
        ),
        (
            "agent_chains:\n  c:\n    stages:\n"
            "      - {name: s, agent: investigator, agents: [{name: investigator}]}\n",
            "agent_chains.c.stages.0",
            "either 'agent' or 'agents'",
        ),
        ("agents: null\n", "agents", "must be a mapping of names, got empty"),
    ],
)
def test_schema_errors_are_reported_per_field(text: str, location: str, fragment: str) -> None:
    error = config_error(text)
    assert str(error).startswith("invalid configuration in user configuration")
    matching = [msg for loc, msg in error.errors if loc.startswith(location)]
    assert matching, error.errors
    assert any(fragment in msg for msg in matching), matching
    # Every (location, message) pair is rendered on its own line.
    for loc, msg in error.errors:
        assert f"  {loc}: {msg}" in str(error)


def test_several_errors_are_all_reported() -> None:
    error = config_error(
        "defaults:\n  max_iterations: 0\nllm_providers:\n  x: {model: m, temperature: -1}\n"
    )
    locations = {loc for loc, _ in error.errors}
    assert {"defaults.max_iterations", "llm_providers.x.temperature"} <= locations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "defaults:\n  llm_provider: ghost\n",
            ("defaults.llm_provider", "unknown LLM provider 'ghost'"),
        ),
        (
            "agents:\n  a: {mcp_servers: [nowhere]}\n",
            ("agents.a.mcp_servers.0", "unknown MCP server 'nowhere'"),
        ),
        (
            "agents:\n  a: {llm_provider: ghost}\n",
            ("agents.a.llm_provider", "unknown LLM provider 'ghost'"),
        ),
        (
            "agent_chains:\n  c:\n    llm_provider: ghost\n"
            "    stages: [{name: s, agent: investigator}]\n",
            ("agent_chains.c.llm_provider", "unknown LLM provider 'ghost'"),
        ),
        (
            "agent_chains:\n  c:\n    stages: [{name: s, agent: nobody}]\n",
            ("agent_chains.c.stages.0.agents.0.name", "unknown agent 'nobody'"),
        ),
        (
            "agent_chains:\n  c:\n    stages:\n"
            "      - {name: s, agents: [{name: investigator, mcp_servers: [x]}]}\n",
            ("agent_chains.c.stages.0.agents.0.mcp_servers.0", "unknown MCP server 'x'"),
        ),
        (
            "mcp_servers:\n  'bad.id': {url: 'http://x'}\n",
            (
                "mcp_servers.bad.id",
                "server ids may use letters, digits, _ and - (no '__', no trailing '_')",
            ),
        ),
        (
            "agent_chains:\n  orphan: {stages: [{name: s, agent: investigator}]}\n",
            (
                "agent_chains.orphan.alert_types",
                "the chain matches no alert type and no alert_routes rule",
            ),
        ),
        (
            "agent_chains:\n  k2: {alert_types: [kubernetes],"
            " stages: [{name: s, agent: investigator}]}\n",
            (
                "agent_chains.k2.alert_types",
                "alert type 'kubernetes' is already handled by chain 'kubernetes'",
            ),
        ),
        (
            "agent_chains:\n  r: {alert_types: [r], stages: [{name: s, agent: investigator,"
            " replicas: 3}]}\n",
            (
                "agent_chains.r.stages.0",
                "Value error, a stage with several agents runs them in parallel: "
                "set parallel: true",
            ),
        ),
    ],
)
def test_reference_errors(text: str, expected: tuple[str, str]) -> None:
    assert expected in config_error(text).errors


def test_default_chain_is_required() -> None:
    raw = yaml.safe_load(builtin_config_text())
    for provider in raw["llm_providers"].values():
        provider["model"] = "m"
    del raw["agent_chains"]["default"]
    raw["agent_chains"]["other"] = {"stages": [{"name": "s", "agent": "investigator"}]}
    with pytest.raises(ConfigError) as failure:
        validate_config(raw, "test")
    assert ("agent_chains", "the 'default' chain is required") in failure.value.errors
    assert str(failure.value).startswith("invalid configuration in test")


def test_unavailable_strategy_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    # A build whose registry lacks a strategy the schema knows by name.
    monkeypatch.setattr(registry, "strategy_names", lambda: ["single-call", "native-thinking"])
    error = config_error("agents:\n  investigator: {iteration_strategy: react}\n")
    [(location, message)] = error.errors
    assert location == "agent_chains.default.stages.0.agents.0.iteration_strategy"
    assert message == (
        "strategy 'react' is not available in this build; available: single-call, native-thinking"
    )


def test_strategy_needing_thinking_on_langchain_is_reported() -> None:
    error = config_error(
        "llm_providers:\n  lc: {backend: langchain, model: gemini-2.5-flash}\n"
        "agents:\n  investigator: {iteration_strategy: native-thinking, llm_provider: lc}\n"
    )
    [(location, message)] = error.errors
    assert location == "agent_chains.default.stages.0.agents.0.llm_provider"
    assert "'native-thinking' needs thinking" in message
    assert "'lc'" in message
    assert "'langchain'" in message


def test_react_on_langchain_is_fine() -> None:
    config = load(
        "llm_providers:\n  lc: {backend: langchain, model: gemini-2.5-flash}\n"
        "agents:\n  investigator: {iteration_strategy: react, llm_provider: lc}\n"
    )
    assert config.resolve("default", 0, 0).iteration_strategy == "react"


def test_config_error_str_without_errors_is_the_message() -> None:
    assert str(ConfigError("plain")) == "plain"
    assert str(ConfigError("head", [("a.b", "bad")])) == "head\n  a.b: bad"


@pytest.mark.parametrize("text", ["llm_providers:\n", "llm_providers: [a]\n"])
def test_malformed_llm_providers_section_is_a_config_error(text: str) -> None:
    error = config_error(text)
    assert error.errors[0][0] == "llm_providers"


@pytest.mark.parametrize("text", ["agents: [\n", "- a\n"])
def test_user_text_yaml_errors_are_not_blamed_on_the_builtin(text: str) -> None:
    assert "built-in" not in str(config_error(text))


# ─── schema pieces ───────────────────────────────────────────────────────────


def test_stage_agent_shorthand() -> None:
    stage = StageConfig.model_validate({"name": "s", "agent": "investigator"})
    assert [a.name for a in stage.agents] == ["investigator"]


def test_mcp_server_tarsy_transport_shape() -> None:
    stdio = MCPServerConfig.model_validate(
        {"transport": {"type": "stdio", "command": "kubectl-mcp", "args": ["--ro"]}}
    )
    assert (stdio.transport, stdio.command, stdio.args) == ("stdio", "kubectl-mcp", ["--ro"])
    for kind in ("http", "streamable-http", "sse"):
        http = MCPServerConfig.model_validate({"transport": {"type": kind, "url": "http://h/mcp"}})
        assert (http.transport, http.url) == ("http", "http://h/mcp")


def test_mcp_server_flat_shape_values_win_over_transport_block() -> None:
    server = MCPServerConfig.model_validate(
        {"url": "http://flat", "transport": {"type": "http", "url": "http://nested"}}
    )
    assert server.url == "http://flat"


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        ({"env": "X"}, True),
        ({"secret": "s"}, True),
        ({}, False),
        ({"env": "X", "secret": "s"}, False),
    ],
)
def test_secret_ref_exactly_one(data: dict[str, str], ok: bool) -> None:
    if ok:
        assert SecretRef.model_validate(data)
    else:
        with pytest.raises(ValidationError, match="exactly one"):
            SecretRef.model_validate(data)


def test_models_are_frozen() -> None:
    config = load()
    with pytest.raises(ValidationError):
        config.defaults.max_iterations = 3  # type: ignore[misc]


# ─── chain lookup and resolution ─────────────────────────────────────────────


@pytest.mark.parametrize(
    ("alert_type", "chain"),
    [
        ("PodCrashLooping", "kube"),
        ("OOMKilled", "kube"),
        ("podcrashlooping", DEFAULT_CHAIN),
        ("Unknown", DEFAULT_CHAIN),
        ("", DEFAULT_CHAIN),
    ],
)
def test_chain_for(alert_type: str, chain: str) -> None:
    assert load(MULTI).chain_for(alert_type) == chain


def test_resolve_most_specific_level_wins() -> None:
    config = load(MULTI)
    k8s = config.resolve("kube", 0, 0)
    assert k8s.agent == "k8s"
    assert k8s.instructions == "Look at pods."
    assert k8s.custom_instructions == "Be brief."
    assert k8s.iteration_strategy == "react"
    # chain beats agent definition for the provider
    assert k8s.provider_name == "pro"
    assert k8s.provider.model == "gemini-2.5-pro"
    # stage beats chain beats agent
    assert k8s.max_iterations == 5
    assert k8s.mcp_servers == ["kubernetes"]

    metrics = config.resolve("kube", 0, 1)
    assert metrics.provider_name == "default"
    assert metrics.max_iterations == 3
    assert metrics.iteration_strategy == "native-thinking"
    assert metrics.on_max_iterations == "pause"
    # an explicit empty list at placement level overrides the definition
    assert metrics.mcp_servers == []

    analysis = config.resolve("kube", 1, 0)
    assert analysis.max_iterations == 12  # no stage value: the chain's


def test_resolve_falls_back_to_agent_then_defaults() -> None:
    config = load(
        MULTI
        + """
  plain:
    alert_types: [plain]
    stages:
      - name: s
        agent: k8s
      - name: t
        agent: investigator
"""
    )
    k8s = config.resolve("plain", 0, 0)
    assert (k8s.provider_name, k8s.max_iterations) == ("lc", 7)
    investigator = config.resolve("plain", 1, 0)
    assert (investigator.provider_name, investigator.max_iterations) == ("default", 20)
    assert investigator.iteration_strategy == "single-call"


@pytest.mark.parametrize(
    ("model", "price_key"),
    [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-2.5-flash-lite-preview-09", "gemini-2.5-flash-lite"),
        ("gemini-2.5-flash-001", "gemini-2.5-flash"),
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("claude-3", None),
        ("gpt-5", "gpt-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5.2", None),
        ("gpt-5.4-mini-2026-03-17", "gpt-5.4-mini"),
        ("grok-4.20-beta", "grok-4.20"),
        ("grok-4.2", None),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("gemini-3-prototype", None),
    ],
)
def test_price_for_longest_prefix_ending_at_a_name_boundary(
    model: str, price_key: str | None
) -> None:
    config = load()
    expected = config.pricing[price_key] if price_key else None
    assert config.price_for(model) == expected


def test_replicas_expand_into_parallel_executions() -> None:
    config = load(
        "agent_chains:\n  r:\n    alert_types: [r]\n    stages:\n"
        "      - {name: s, agent: investigator, parallel: true, replicas: 3}\n"
    )
    stage = config.agent_chains["r"].stages[0]
    assert [a.name for a in stage.placed_agents] == ["investigator"] * 3
    assert stage.is_parallel
    assert [config.resolve("r", 0, n).agent for n in range(3)] == ["investigator"] * 3


# ─── model names ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("backend", ["google-native", "langchain"])
@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash",
        "gemini-2.5-pro",
        "gemini-3-pro-preview",
        "gemini-2.0-flash-001",
        "models/gemini-2.5-flash",
        "gemma-3-27b-it",
        "tunedModels/my-triage-model-42",
        "publishers/google/models/gemini-2.5-pro",
        "projects/p/locations/europe-west4/publishers/google/models/gemini-2.5-flash",
        "projects/p/locations/us-central1/endpoints/1234567890",
    ],
)
def test_google_model_names_load_on_both_backends(backend: str, model: str) -> None:
    config = load(f"llm_providers:\n  x: {{backend: {backend}, model: '{model}'}}\n")
    assert config.llm_providers["x"].model == model


def test_claude_loads_on_langchain_only() -> None:
    model = "claude-sonnet-4@20250514"
    assert load(f"llm_providers:\n  x: {{backend: langchain, model: '{model}'}}\n")
    error = config_error(f"llm_providers:\n  x: {{backend: google-native, model: '{model}'}}\n")
    [(location, message)] = error.errors
    assert location == "llm_providers.x.model"
    assert "partner model" in message and "use backend: langchain" in message


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gemini 2.5 pro", "Gemini-2.5-Flash", "gemini-", "flash", "m"]
)
def test_model_names_no_backend_serves_are_rejected_at_load(model: str) -> None:
    error = config_error(f"llm_providers:\n  x: {{backend: google-native, model: '{model}'}}\n")
    [(location, message)] = error.errors
    assert location == "llm_providers.x.model"
    assert f"{model!r} is not a model name the 'google-native' backend serves" in message


def test_a_typo_in_the_default_model_setting_fails_at_load() -> None:
    with pytest.raises(ConfigError) as failure:
        load(settings=Settings(TARSY_DEFAULT_MODEL="gemni-2.5-flash"))
    locations = {location for location, _ in failure.value.errors}
    assert "llm_providers.default.model" in locations


def test_provider_credentials_load() -> None:
    config = load(
        "llm_providers:\n"
        "  team: {backend: google-native, model: gemini-2.5-pro,"
        " api_key: {secret: team-gemini-key}}\n"
        "  eu: {backend: langchain, model: gemini-2.5-flash, vertex_project: p-eu,"
        " vertex_location: europe-west4}\n"
    )
    assert config.llm_providers["team"].api_key == SecretRef(secret="team-gemini-key")
    assert config.llm_providers["eu"].vertex_location == "europe-west4"


@pytest.mark.parametrize(
    ("provider", "location", "fragment"),
    [
        (
            "{model: gemini-2.5-pro, api_key: {env: K}, vertex_project: p}",
            "llm_providers.x",
            "not both",
        ),
        ("{model: gemini-2.5-pro, api_key: {env: K, secret: S}}", "llm_providers.x.api_key", "one"),
        (
            "{backend: langchain, model: 'claude-sonnet-4@20250514', api_key: {env: K}}",
            "llm_providers.x.api_key",
            "runs on Vertex AI, which takes no API key",
        ),
    ],
)
def test_provider_credential_errors(provider: str, location: str, fragment: str) -> None:
    error = config_error(f"llm_providers:\n  x: {provider}\n")
    assert any(loc == location and fragment in msg for loc, msg in error.errors), error.errors


def test_a_timeout_that_cannot_fit_in_the_step_budget_is_refused() -> None:
    from tarsy.config import load_config
    from tarsy.errors import ConfigError
    from tarsy.settings import Settings

    user = (
        "llm_providers:\n  slow: {backend: google-native, model: gemini-2.5-pro,"
        " retry: {timeout: 500}}\n"
        "mcp_servers:\n  k8s: {transport: http, url: 'http://x/mcp', call_timeout: 490}\n"
    )
    settings = Settings(TARSY_STEP_TIMEOUT_SECONDS=540)
    assert settings.step_budget_seconds == 486
    try:
        load_config(settings, user_text=user)
    except ConfigError as e:
        locations = [location for location, _ in e.errors]
    else:
        raise AssertionError("accepted")
    assert locations == ["llm_providers.slow.retry.timeout", "mcp_servers.k8s.call_timeout"]
    # The same configuration fits when the step function may run longer.
    roomy = Settings(TARSY_STEP_TIMEOUT_SECONDS=900)
    assert "slow" in load_config(roomy, user_text=user).llm_providers


def test_the_configuration_is_parsed_by_libyaml_when_pyyaml_has_it() -> None:
    # Every function reads the built-in configuration on its first request: libyaml
    # parses it in about a tenth of the pure-Python parser's time.
    assert yaml.__with_libyaml__, "PyYAML's wheels bundle libyaml"
    assert issubclass(_UniqueKeyLoader, yaml.CSafeLoader)

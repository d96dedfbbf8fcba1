"""Load the configuration: built-in YAML, then the user's file, validated together."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from tarsy.config.routing import merge_routes
from tarsy.config.schema import TarsyConfig
from tarsy.errors import ConfigError
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

# Sections whose entries are keyed by name: a user entry replaces the built-in one.
_NAMED_SECTIONS = (
    "llm_providers", "agents", "agent_chains", "pricing", "mcp_servers", "collectors",
)  # fmt: skip


# Sections merged key by key: a user file sets some of their fields.
_KEYED_SECTIONS = ("defaults", "evidence", "compact_path")


def builtin_config_text() -> str:
    """Return the YAML of the built-in agents and chains."""
    return resources.files("tarsy.config").joinpath("builtin.yaml").read_text(encoding="utf-8")


# libyaml's parser (PyYAML's wheels bundle it) reads the built-in configuration in a
# tenth of the pure-Python parser's time: about 6 ms instead of 55 ms, which every
# function pays on its first request. The constructor, and so what is built, is the same.
if TYPE_CHECKING:
    _SafeLoader = yaml.CSafeLoader
else:  # a PyYAML built without libyaml has only the pure-Python parser
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """A safe loader that refuses a key given twice in one mapping.

    PyYAML keeps the last of two equal keys without a word, so a chain or an
    agent pasted twice would silently lose one definition.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *anchor" keys may be overridden, as YAML intends
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: builds no objects
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    return data


def merge_config(
    base: dict[str, Any], override: dict[str, Any], source: str = "user configuration"
) -> dict[str, Any]:
    """Overlay ``override`` on ``base``: named entries replace, ``defaults`` merges by key."""
    merged = dict(base)
    for key, value in override.items():
        if key in (*_NAMED_SECTIONS, *_KEYED_SECTIONS) and not isinstance(value, dict):
            kind = "empty" if value is None else f"a {type(value).__name__}"
            raise ConfigError(
                f"invalid configuration in {source}",
                [(key, f"must be a mapping of names, got {kind}")],
            )
        if key in _NAMED_SECTIONS and isinstance(value, dict):
            merged[key] = {**(base.get(key) or {}), **value}
        elif key in _KEYED_SECTIONS and isinstance(value, dict):
            merged[key] = {**(base.get(key) or {}), **value}
        elif key == "alert_sources" and isinstance(value, dict):
            # Per source, key by key: a user's signing_secrets keep the built-in chain.
            sources = dict(base.get(key) or {})
            for name, settings in value.items():
                kept = sources.get(name)
                if isinstance(kept, dict) and isinstance(settings, dict):
                    sources[name] = {**kept, **settings}
                else:
                    sources[name] = settings
            merged[key] = sources
        elif key == "alert_routes":
            # The user's rules first; a built-in rule they name is replaced (routing.py).
            merged[key] = merge_routes(base.get(key), value)
        else:
            merged[key] = value
    return merged


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def validate_config(raw: dict[str, Any], source: str) -> TarsyConfig:
    """Validate a merged raw mapping; raise ConfigError with one entry per bad field."""
    try:
        config = TarsyConfig.model_validate(raw)
    except ValidationError as e:
        errors = [(_location(err["loc"]), err["msg"]) for err in e.errors()]
        raise ConfigError(f"invalid configuration in {source}", errors) from e
    problems = config.reference_errors() or strategy_errors(config) + model_errors(config)
    if problems:
        raise ConfigError(f"invalid configuration in {source}", problems)
    check_prices(config, source)
    return config


def check_prices(config: TarsyConfig, source: str) -> None:
    """Refuse (``unpriced_models: refuse``) or log every hosted model without a price."""
    from tarsy.llm.pricing import unpriced_providers

    unpriced = unpriced_providers(config)
    if unpriced and config.unpriced_models == "refuse":
        raise ConfigError(f"invalid configuration in {source} (unpriced_models: refuse)", unpriced)
    for location, message in unpriced:
        logger.warning("%s: %s: %s", source, location, message)


def model_errors(config: TarsyConfig) -> list[tuple[str, str]]:
    """Every provider setting its type does not take, and every model its type cannot serve."""
    from tarsy.llm.backends import backend_for

    problems: list[tuple[str, str]] = []
    for name, provider in config.llm_providers.items():
        backend = backend_for(provider.type)
        problems.extend(
            (f"llm_providers.{name}.{field}", message)
            for field, message in backend.config_problems(provider)
        )
    return problems


def strategy_errors(config: TarsyConfig) -> list[tuple[str, str]]:
    """Every stage agent whose strategy is unknown or needs what its provider's model lacks."""
    # Imported here: the strategies import the config schema.
    from tarsy.agent.strategies.base import missing_capabilities
    from tarsy.agent.strategies.registry import get_strategy, strategy_names
    from tarsy.llm.backends import capabilities_of

    problems: list[tuple[str, str]] = []
    known = strategy_names()
    for chain_id, chain in config.agent_chains.items():
        for s, stage in enumerate(chain.stages):
            for a, _ in enumerate(stage.agents):
                where = f"agent_chains.{chain_id}.stages.{s}.agents.{a}"
                resolved = config.resolve(chain_id, s, a)
                if resolved.iteration_strategy not in known:
                    problems.append(
                        (
                            f"{where}.iteration_strategy",
                            f"strategy {resolved.iteration_strategy!r} is not available in "
                            f"this build; available: {', '.join(known)}",
                        )
                    )
                    continue
                strategy = get_strategy(resolved.iteration_strategy)
                for provider_name in (resolved.provider_name, *resolved.provider.fallback):
                    provider = config.llm_providers[provider_name]
                    missing = missing_capabilities(strategy.requires, capabilities_of(provider))
                    if missing:
                        kind = f"type {provider.type!r}"
                        if provider.is_google:
                            kind += f", backend {provider.backend!r}"
                        role = "" if provider_name == resolved.provider_name else "fallback "
                        problems.append(
                            (
                                f"{where}.llm_provider",
                                f"strategy {strategy.name!r} needs {', '.join(missing)}, which "
                                f"model {provider.model!r} of {role}provider {provider_name!r} "
                                f"({kind}) lacks",
                            )
                        )
    return problems


def load_config(settings: Settings, *, user_text: str | None = None) -> TarsyConfig:
    """Load built-in config plus the user's file (``settings.config_path``) or ``user_text``."""
    raw = _read_yaml(builtin_config_text(), "built-in configuration")
    source = "built-in configuration"
    if user_text is None and settings.config_path:
        path = Path(settings.config_path)
        try:
            user_text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read TARSY_CONFIG_PATH={str(path)!r}: {e}") from e
        source = str(path)
    if user_text is not None:
        if source == "built-in configuration":
            source = "user configuration"
        raw = merge_config(raw, _read_yaml(user_text, source), source)
    # Providers that name no model (the built-in ones, and "default" in a user file)
    # use TARSY_DEFAULT_MODEL.
    for provider in (raw.get("llm_providers") or {}).values():
        if isinstance(provider, dict):
            provider.setdefault("model", settings.default_model)
    config = validate_config(raw, source)
    problems = timeouts_that_cannot_fit(config, settings.step_budget_seconds)
    if problems:
        raise ConfigError(f"invalid configuration ({source})", problems)
    return config


def timeouts_that_cannot_fit(config: TarsyConfig, budget: float) -> list[tuple[str, str]]:
    """Timeouts longer than a step's budget: the platform would kill the step first.

    A step must end in time to record what happened (a retryable failure
    rather than a killed process), so one model attempt, or one MCP connect
    plus call, must fit in ``budget`` seconds (TARSY_STEP_TIMEOUT_SECONDS less
    the commit's reserve).
    """
    problems: list[tuple[str, str]] = []
    for name, provider in config.llm_providers.items():
        if provider.retry.timeout > budget:
            problems.append(
                (
                    f"llm_providers.{name}.retry.timeout",
                    f"{provider.retry.timeout:g}s does not fit in a step's {budget:g}s budget "
                    "(raise TARSY_STEP_TIMEOUT_SECONDS or lower the timeout)",
                )
            )
    for name, server in config.mcp_servers.items():
        if server.connect_timeout + server.call_timeout > budget:
            problems.append(
                (
                    f"mcp_servers.{name}.call_timeout",
                    f"connect {server.connect_timeout:g}s + call {server.call_timeout:g}s does "
                    f"not fit in a step's {budget:g}s budget",
                )
            )
    return problems

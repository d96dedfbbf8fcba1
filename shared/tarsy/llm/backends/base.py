"""What a backend is: one object per provider type, known without importing its SDK.

A backend (a provider ``type``: google, vertexai, openai, anthropic, xai,
openai-compatible) answers every question the rest of the product asks about a
vendor: which settings it takes (a pydantic model of its own), what each model
can do (:class:`~tarsy.llm.base.Capabilities`), whether a model name is one it
can serve, what telemetry calls it (``gen_ai.provider.name``), and, lazily, the
streaming provider that calls the SDK (which maps the SDK's exceptions once into
:class:`~tarsy.errors.LLMError`). Config load asks the first questions of every
configured provider, so a backend module imports no SDK at module level.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.settings import Settings

# The settings every type takes; the rest of LLMProviderConfig belongs to some types only.
COMMON_SETTINGS = frozenset(
    {
        "type",
        "model",
        "temperature",
        "max_output_tokens",
        "retry",
        "api_key",
        "base_url",
        "fallback",
        "fallback_on",
    }
)


class NoSettings(DeferredModel):
    """A type with no settings beyond the common ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Backend(ABC):
    """One provider type: its settings, its models' capabilities, its name rule, its client.

    Subclasses set the class attributes and implement :meth:`create` (which
    imports the SDK adapter) and :meth:`capabilities`.
    """

    type: ClassVar[ProviderType]
    # The type's own settings (fields of LLMProviderConfig beyond COMMON_SETTINGS).
    settings_model: ClassVar[builtins.type[BaseModel]] = NoSettings
    # ``gen_ai.provider.name`` (OpenTelemetry GenAI semantic conventions).
    telemetry_name: ClassVar[str]
    # A server the user runs: no per-token price, calls cost 0 (and records say why).
    self_hosted: ClassVar[bool] = False
    # The environment variable of the vendor's API key, read when the config names none.
    api_key_env: ClassVar[str | None] = None
    # Where the vendor's API is when the config names no ``base_url`` (None: the SDK's).
    default_base_url: ClassVar[str | None] = None

    @abstractmethod
    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """What the configured model can do on this backend."""

    @abstractmethod
    def model_problem(self, model: str) -> str | None:
        """Why this type cannot serve ``model``, or None when it can (or may)."""

    @abstractmethod
    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """The streaming provider for ``config`` (imports the SDK adapter on first use)."""

    def settings(self, config: LLMProviderConfig) -> BaseModel:
        """The type's own settings, read from ``config``."""
        fields = self.settings_model.model_fields
        return self.settings_model.model_validate(
            {name: getattr(config, name) for name in fields if name in config.model_fields_set}
        )

    def provider_name(self, config: LLMProviderConfig, settings: Settings) -> str:
        """``gen_ai.provider.name`` of calls made for ``config``."""
        return self.telemetry_name

    def config_problems(self, config: LLMProviderConfig) -> list[tuple[str, str]]:
        """``(field, message)`` for every setting of another type and a model it cannot serve."""
        problems: list[tuple[str, str]] = []
        own = COMMON_SETTINGS | set(self.settings_model.model_fields)
        for name in sorted(config.model_fields_set - own):
            problems.append((name, f"{name!r} is not a setting of provider type {self.type!r}"))
        problem = self.model_problem(config.model)
        if problem is not None:
            problems.append(("model", problem))
        return problems + output_limit_problems(config, self.capabilities(config))


def output_limit_problems(
    config: LLMProviderConfig, capabilities: Capabilities
) -> list[tuple[str, str]]:
    """A ``max_output_tokens`` above what the model writes (the vendor would refuse every call)."""
    limit = capabilities.max_output_tokens
    asked = config.max_output_tokens
    if limit is None or asked is None or asked <= limit:
        return []
    return [
        (
            "max_output_tokens",
            f"model {config.model!r} writes at most {limit} output tokens; {asked} was asked",
        )
    ]

"""The ``google`` and ``vertexai`` types: Gemini on the Gemini API or Vertex AI, Claude on Vertex.

Design constraint: nothing here imports google-genai or LangChain; the client
library (``backend: google-native`` for google-genai with thinking, signatures
and native tools, or ``backend: langchain``) is imported by :meth:`create`.

``google`` reaches the Gemini API when it has an API key (its own or
``GEMINI_API_KEY``) and Vertex AI otherwise, as before provider types existed;
``vertexai`` is Vertex AI only, and also serves Model Garden partner models
(Claude) through LangChain. Whether a model exists in a project is only known by
asking Google; what load can catch is a name no Google endpoint serves
(``gpt-4o``, ``gemini 2.5 pro``), so a typo fails at load, not at the first alert.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import Backend as ClientLibrary
from tarsy.config.schema import LLMProviderConfig, NativeTool, ProviderType
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.families import (
    CLAUDE_FALLBACK,
    CLAUDE_FAMILIES,
    GEMINI_FALLBACK,
    GOOGLE_FAMILIES,
    GOOGLE_UNKNOWN,
    lookup,
)
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.llm.partner_models import is_partner_model
from tarsy.settings import Settings

PROVIDER_GEMINI = "gcp.gemini"  # generativelanguage.googleapis.com (the Gemini API)
PROVIDER_VERTEX_AI = "gcp.vertex_ai"  # aiplatform.googleapis.com

# Gemini API ids (``gemini-2.5-flash``, ``models/gemini-2.5-pro``), tuned models,
# and Vertex AI resource names of Google models and deployed endpoints.
_GOOGLE_MODEL = re.compile(
    r"^(?:"
    r"(?:models/)?(?:gemini|gemma|learnlm)-[a-z0-9][a-z0-9.\-]*"
    r"|tunedModels/[a-z0-9][a-z0-9\-]*"
    r"|(?:projects/[^/\s]+/locations/[^/\s]+/)?publishers/google/models/[a-z0-9][a-z0-9.\-]*"
    r"|projects/[^/\s]+/locations/[^/\s]+/endpoints/[a-z0-9\-]+"
    r")$"
)


class GoogleSettings(DeferredModel):
    """Settings of the Google types (the keys of LLMProviderConfig that only they take)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: ClientLibrary = "langchain"
    native_tools: list[NativeTool] = Field(default_factory=list)
    thinking: bool = True
    thinking_budget: int | None = None
    thinking_level: Literal["LOW", "HIGH"] | None = None
    vertex_project: str | None = None
    vertex_location: str | None = None


def _problem(model: str, library: str, partner_ok: bool) -> str | None:
    if _GOOGLE_MODEL.match(model):
        return None
    served = "Gemini/Gemma ids (gemini-2.5-flash), Vertex AI model or endpoint names"
    if is_partner_model(model):
        if partner_ok:
            return None
        return (
            f"{model!r} is a Vertex AI partner model, which the {library!r} backend cannot "
            "call; use backend: langchain (on type: vertexai)"
        )
    if partner_ok:
        served += ", Claude on Vertex AI (claude-sonnet-4@20250514)"
    return f"{model!r} is not a model name the {library!r} backend serves; expected {served}"


class GoogleBackend(Backend):
    """Gemini through google-genai (``backend: google-native``) or LangChain."""

    type: ClassVar[ProviderType] = "google"
    settings_model = GoogleSettings
    telemetry_name = PROVIDER_GEMINI

    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """The model's family (:mod:`~tarsy.llm.backends.families`), as the client library allows.

        google-native passes on everything the model offers; LangChain streams text
        and function calls only. Claude on Vertex AI is Claude's family.
        """
        if is_partner_model(config.model):
            return lookup(config.model.split("@", 1)[0], CLAUDE_FAMILIES, CLAUDE_FALLBACK)
        name = config.model.removeprefix("models/")
        fallback = GEMINI_FALLBACK if name.startswith("gemini-") else GOOGLE_UNKNOWN
        model = lookup(name.rsplit("/", 1)[-1], GOOGLE_FAMILIES, fallback)
        if config.backend == "google-native":
            return model
        return Capabilities(
            function_calling=model.function_calling,
            context_window=model.context_window,
            max_output_tokens=model.max_output_tokens,
        )

    def model_problem(self, model: str) -> str | None:
        """Gemini names; Claude only on Vertex AI through LangChain."""
        return _problem(model, "google-native", partner_ok=False)

    def config_problems(self, config: LLMProviderConfig) -> list[tuple[str, str]]:
        """Also: a partner model needs LangChain on Vertex AI, which takes no API key."""
        problems = [p for p in super().config_problems(config) if p[0] != "model"]
        problem = _problem(config.model, config.backend, partner_ok=config.backend == "langchain")
        if problem is not None:
            problems.append(("model", problem))
        elif config.api_key is not None and is_partner_model(config.model):
            problems.append(
                (
                    "api_key",
                    f"{config.model!r} runs on Vertex AI, which takes no API key; "
                    "set vertex_project/vertex_location or nothing",
                )
            )
        return problems

    def provider_name(self, config: LLMProviderConfig, settings: Settings) -> str:
        """``gcp.gemini`` with an API key (own, or the process's without a Vertex AI place)."""
        if is_partner_model(config.model):
            return PROVIDER_VERTEX_AI
        if config.api_key is not None:
            return PROVIDER_GEMINI
        if config.vertex_project is None and config.vertex_location is None:
            return PROVIDER_GEMINI if settings.gemini_api_key is not None else PROVIDER_VERTEX_AI
        return PROVIDER_VERTEX_AI

    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """google-genai (``backend: google-native``) or LangChain; clients cached per endpoint."""
        if config.backend == "google-native":
            from tarsy.llm.google_native import GoogleNativeProvider

            return GoogleNativeProvider(settings)
        from tarsy.llm.langchain_provider import LangChainProvider

        return LangChainProvider(settings)


class VertexAIBackend(GoogleBackend):
    """Vertex AI only: Gemini, and Claude (Model Garden) through LangChain."""

    type: ClassVar[ProviderType] = "vertexai"
    telemetry_name = PROVIDER_VERTEX_AI

    def model_problem(self, model: str) -> str | None:
        """Gemini names, and partner models (through LangChain)."""
        return _problem(model, "langchain", partner_ok=True)

    def config_problems(self, config: LLMProviderConfig) -> list[tuple[str, str]]:
        """Also: Vertex AI takes no API key."""
        problems = super().config_problems(config)
        if config.api_key is not None and not any(p[0] == "api_key" for p in problems):
            problems.append(
                ("api_key", "Vertex AI takes no API key: it uses the process's credentials")
            )
        return problems

    def provider_name(self, config: LLMProviderConfig, settings: Settings) -> str:
        """Always ``gcp.vertex_ai``."""
        return PROVIDER_VERTEX_AI


GOOGLE = GoogleBackend()
VERTEXAI = VertexAIBackend()

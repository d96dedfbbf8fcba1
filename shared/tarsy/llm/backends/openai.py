"""The ``openai`` type: OpenAI's chat completions API through the official ``openai`` SDK.

Design constraint: no SDK import here (config load reads this module); the
adapter :mod:`tarsy.llm.openai_chat` is imported by :meth:`create`, and it is
shared with the ``xai`` and ``openai-compatible`` types, which speak the same
protocol at another base URL.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import ConfigDict

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.families import OPENAI_FALLBACK, OPENAI_FAMILIES, lookup
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.settings import Settings

_OPENAI_MODEL = re.compile(r"^(?:ft:)?(?:gpt-|chatgpt-|o\d)[A-Za-z0-9.:\-_]*$")


class OpenAISettings(DeferredModel):
    """Settings of the ``openai`` type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    organization: str | None = None


class OpenAIBackend(Backend):
    """OpenAI: streaming, function calling and JSON-schema replies on every chat model."""

    type: ClassVar[ProviderType] = "openai"
    settings_model = OpenAISettings
    telemetry_name = "openai"
    api_key_env = "OPENAI_API_KEY"

    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """Function calling and structured output; reasoning text is not exposed by the API."""
        return lookup(config.model.removeprefix("ft:"), OPENAI_FAMILIES, OPENAI_FALLBACK)

    def model_problem(self, model: str) -> str | None:
        """OpenAI model ids (``gpt-4.1``, ``o4-mini``, ``ft:gpt-4o-mini:...``)."""
        if _OPENAI_MODEL.match(model):
            return None
        return (
            f"{model!r} is not an OpenAI model id (gpt-4.1, o4-mini); for another server that "
            "speaks the OpenAI API use type: openai-compatible with its base_url"
        )

    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """The OpenAI chat-completions adapter."""
        from tarsy.llm.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(self, settings)


OPENAI = OpenAIBackend()

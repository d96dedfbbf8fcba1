"""The ``xai`` type: Grok models on xAI's OpenAI-compatible API (its own base URL and key).

Design constraint: no SDK import here; the OpenAI adapter serves it at
``https://api.x.ai/v1`` unless ``base_url`` says otherwise.
"""

from __future__ import annotations

import re
from typing import ClassVar

from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.families import XAI_FALLBACK, XAI_FAMILIES, lookup
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.settings import Settings

XAI_BASE_URL = "https://api.x.ai/v1"
_XAI_MODEL = re.compile(r"^grok-[a-z0-9][a-z0-9.\-]*$")


class XAIBackend(Backend):
    """xAI: streaming, function calling and JSON-schema replies."""

    type: ClassVar[ProviderType] = "xai"
    telemetry_name = "x_ai"
    api_key_env = "XAI_API_KEY"
    default_base_url: ClassVar[str | None] = XAI_BASE_URL

    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """Function calling and structured output on every Grok chat model."""
        return lookup(config.model, XAI_FAMILIES, XAI_FALLBACK)

    def model_problem(self, model: str) -> str | None:
        """Grok model ids (``grok-4``, ``grok-3-mini``)."""
        if _XAI_MODEL.match(model):
            return None
        return f"{model!r} is not an xAI model id (grok-4, grok-3-mini)"

    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """The OpenAI chat-completions adapter at xAI's base URL."""
        from tarsy.llm.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(self, settings)


XAI = XAIBackend()

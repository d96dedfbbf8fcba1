"""The ``anthropic`` type: Claude on Anthropic's messages API through the official SDK.

Design constraint: no SDK import here; :mod:`tarsy.llm.anthropic_messages` is
imported by :meth:`create`. Claude on Vertex AI is the ``vertexai`` type.
"""

from __future__ import annotations

import re
from typing import ClassVar

from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.families import CLAUDE_FALLBACK, CLAUDE_FAMILIES, lookup
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.settings import Settings

_CLAUDE_MODEL = re.compile(r"^claude-[a-z0-9][a-z0-9.\-]*$")


class AnthropicBackend(Backend):
    """Anthropic: streaming and tool use (no JSON-schema reply mode is used)."""

    type: ClassVar[ProviderType] = "anthropic"
    telemetry_name = "anthropic"
    api_key_env = "ANTHROPIC_API_KEY"

    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """Tool use on every Claude model; the window and output limit of its family."""
        return lookup(config.model, CLAUDE_FAMILIES, CLAUDE_FALLBACK)

    def model_problem(self, model: str) -> str | None:
        """Anthropic model ids (``claude-sonnet-4-5``); Vertex AI's ``@`` form is vertexai's."""
        if _CLAUDE_MODEL.match(model):
            return None
        if "@" in model and model.startswith("claude-"):
            return f"{model!r} is a Vertex AI model name: use type: vertexai"
        return f"{model!r} is not an Anthropic model id (claude-sonnet-4-5)"

    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """The Anthropic messages adapter."""
        from tarsy.llm.anthropic_messages import AnthropicProvider

        return AnthropicProvider(self, settings)


ANTHROPIC = AnthropicBackend()

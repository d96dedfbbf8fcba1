"""The provider for a configured LLM provider: its type's backend makes it.

Each backend imports its SDK only when chosen, so a step that talks to Gemini
natively never pays the import cost of LangChain, openai or anthropic.
"""

from __future__ import annotations

from tarsy.config.schema import LLMProviderConfig
from tarsy.llm.backends import backend_for
from tarsy.llm.base import LLMProvider
from tarsy.settings import Settings


def get_provider(config: LLMProviderConfig, settings: Settings) -> LLMProvider:
    """Return the provider implementation for ``config.type``."""
    return backend_for(config.type).create(config, settings)

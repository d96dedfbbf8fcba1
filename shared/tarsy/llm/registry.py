"""The provider registry, keyed by the ``backend`` of an LLM provider config.

Each branch imports its SDK only when chosen, so a step that talks to Gemini
natively never pays LangChain's import cost.
"""

from __future__ import annotations

from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError
from tarsy.llm.base import LLMProvider
from tarsy.settings import Settings


def get_provider(config: LLMProviderConfig, settings: Settings) -> LLMProvider:
    """Return the provider implementation for ``config.backend``."""
    if config.backend == "google-native":
        from tarsy.llm.google_native import GoogleNativeProvider

        return GoogleNativeProvider(settings)
    if config.backend == "langchain":
        from tarsy.llm.langchain_provider import LangChainProvider

        return LangChainProvider(settings)
    raise ConfigError(f"LLM backend {config.backend!r} is not available in this build")

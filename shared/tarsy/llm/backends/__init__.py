"""The backends, one per provider type; adding one is its module plus one line below.

Design constraint: importing this package imports no vendor SDK, so config
load can ask every backend about its settings, models and capabilities.
"""

from __future__ import annotations

from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.errors import ConfigError
from tarsy.llm.backends.anthropic import ANTHROPIC
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.google import GOOGLE, VERTEXAI
from tarsy.llm.backends.openai import OPENAI
from tarsy.llm.backends.openai_compatible import OPENAI_COMPATIBLE
from tarsy.llm.backends.xai import XAI
from tarsy.llm.base import Capabilities

BACKENDS: dict[ProviderType, Backend] = {
    backend.type: backend
    for backend in (GOOGLE, VERTEXAI, OPENAI, ANTHROPIC, XAI, OPENAI_COMPATIBLE)
}


def backend_for(provider_type: str) -> Backend:
    """The backend of a provider type."""
    for name, backend in BACKENDS.items():
        if name == provider_type:
            return backend
    raise ConfigError(f"LLM provider type {provider_type!r} is not available in this build")


def capabilities_of(config: LLMProviderConfig) -> Capabilities:
    """What the model of ``config`` can do."""
    return backend_for(config.type).capabilities(config)


__all__ = ["BACKENDS", "Backend", "backend_for", "capabilities_of"]

"""Agent, chain and provider configuration: YAML validated by pydantic at load."""

from tarsy.config.loader import load_config
from tarsy.config.schema import (
    AgentDefinition,
    ChainConfig,
    IterationStrategy,
    LLMProviderConfig,
    ResolvedAgentConfig,
    StageAgentConfig,
    StageConfig,
    TarsyConfig,
)

__all__ = [
    "AgentDefinition",
    "ChainConfig",
    "IterationStrategy",
    "LLMProviderConfig",
    "ResolvedAgentConfig",
    "StageAgentConfig",
    "StageConfig",
    "TarsyConfig",
    "load_config",
]

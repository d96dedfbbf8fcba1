"""Strategy lookup by the ``iteration_strategy`` name of the resolved config."""

from __future__ import annotations

from tarsy.errors import ConfigError
from tarsy.strategies.base import Strategy
from tarsy.strategies.judge import JudgeStrategy
from tarsy.strategies.native_thinking import (
    ChatStrategy,
    NativeThinkingStrategy,
    NativeToolsStrategy,
)
from tarsy.strategies.react import ReActStrategy
from tarsy.strategies.schema_actions import SchemaActionsStrategy
from tarsy.strategies.single_call import (
    ExecutiveSummaryStrategy,
    NativeThinkingSynthesisStrategy,
    SingleCallStrategy,
    SynthesisStrategy,
)

_STRATEGIES: dict[str, Strategy] = {
    strategy.name: strategy
    for strategy in (
        SingleCallStrategy(),
        NativeThinkingStrategy(),
        NativeToolsStrategy(),
        SchemaActionsStrategy(),
        ReActStrategy(),
        SynthesisStrategy(),
        NativeThinkingSynthesisStrategy(),
        ExecutiveSummaryStrategy(),
        ChatStrategy(),
        JudgeStrategy(),
    )
}


def strategy_names() -> list[str]:
    """Names of the strategies this build has."""
    return sorted(_STRATEGIES)


def get_strategy(name: str) -> Strategy:
    """Return the strategy registered under ``name``."""
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise ConfigError(
            f"iteration strategy {name!r} is not available; known: {sorted(_STRATEGIES)}"
        ) from None

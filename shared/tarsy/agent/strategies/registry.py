"""Strategy lookup by the ``iteration_strategy`` name of the resolved config."""

from __future__ import annotations

from tarsy.agent.strategies.base import Strategy
from tarsy.agent.strategies.compact import CompactStrategy
from tarsy.agent.strategies.judge import JudgeStrategy
from tarsy.agent.strategies.native_thinking import (
    ChatStrategy,
    NativeThinkingStrategy,
    NativeToolsStrategy,
)
from tarsy.agent.strategies.react import ReActStrategy
from tarsy.agent.strategies.schema_actions import SchemaActionsStrategy
from tarsy.agent.strategies.single_call import (
    ExecutiveSummaryStrategy,
    NativeThinkingSynthesisStrategy,
    SingleCallStrategy,
    SynthesisStrategy,
)
from tarsy.errors import ConfigError

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
# The compact path's follow-up runs one of the others.
_STRATEGIES["compact"] = CompactStrategy(dict(_STRATEGIES))


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

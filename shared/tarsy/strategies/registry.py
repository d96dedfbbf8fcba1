"""Strategy lookup by the ``iteration_strategy`` name of the resolved config."""

from __future__ import annotations

from tarsy.errors import ConfigError
from tarsy.strategies.base import Strategy
from tarsy.strategies.single_call import SingleCallStrategy

_STRATEGIES: dict[str, Strategy] = {
    SingleCallStrategy.name: SingleCallStrategy(),
}


def get_strategy(name: str) -> Strategy:
    """Return the strategy registered under ``name``."""
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise ConfigError(
            f"iteration strategy {name!r} is not available; known: {sorted(_STRATEGIES)}"
        ) from None

"""Per-process wiring: settings, logging, configuration and clients, created once.

Entry points call :func:`get_deps` on the process event loop; nothing here
holds investigation state, only clients (invariant 2).
"""

from __future__ import annotations

import asyncio

from tarsy.bus import get_bus
from tarsy.config import load_config
from tarsy.log import configure_logging
from tarsy.settings import get_settings
from tarsy.steps import Deps
from tarsy.store import get_store

_deps: Deps | None = None
_lock = asyncio.Lock()


async def get_deps() -> Deps:
    """Return the process-wide dependencies, building them on first use."""
    global _deps
    if _deps is None:
        async with _lock:
            if _deps is None:
                settings = get_settings()
                configure_logging(settings)
                _deps = Deps(
                    settings=settings,
                    config=load_config(settings),
                    store=get_store(settings),
                    bus=get_bus(settings),
                )
    return _deps

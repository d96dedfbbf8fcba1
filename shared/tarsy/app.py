"""Per-process wiring: settings, logging, configuration and clients, created once.

Entry points call :func:`get_deps` on the process event loop; nothing here
holds investigation state, only clients (invariant 2). :class:`Deps` lives here,
beside the wiring that builds it, so that the step engine, the chain logic, the
api and the sweeper all depend on it and none of them on each other.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
from dataclasses import dataclass, replace

from tarsy.access.roles import parse_grants
from tarsy.bus import Publisher, get_bus
from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.log import configure_logging
from tarsy.persistence.ports import Persistence
from tarsy.persistence.store import Store, get_store
from tarsy.settings import Settings, get_settings, unknown_tarsy_variables
from tarsy.tools.base import ToolExecutor

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deps:
    """What the handlers talk to: built once per process, passed to every handler.

    ``store`` is the persistence port (:class:`~tarsy.persistence.ports.Persistence`),
    not the Firestore adapter: the engine and the api see operations, never a client.
    """

    settings: Settings
    config: TarsyConfig
    store: Persistence
    bus: Publisher
    tools: ToolExecutor | None = None


_deps: Deps | None = None
_lock = asyncio.Lock()


def _tool_executor(config: TarsyConfig, settings: Settings, store: Store) -> ToolExecutor | None:
    """The MCP executor when any MCP server is configured (imported only then)."""
    if not config.mcp_servers:
        return None
    from tarsy.runtime import run_sync
    from tarsy.tools.mcp_client import MCPToolExecutor

    # Warm: each server's connection is opened once per process and reused by every step.
    executor = MCPToolExecutor(config, settings, store, warm=True)
    if executor.pool is not None:
        pool = executor.pool
        atexit.register(lambda: run_sync(pool.close()))
    return executor


async def get_deps(*, tools: bool = False) -> Deps:
    """Return the process-wide dependencies, building them on first use.

    ``tools``: the MCP tool executor too. Only the step calls tools; building the
    executor imports the MCP SDK (with its HTTP server stack), about a second of a
    first request that ingest and the api never use.
    """
    global _deps
    if _deps is None or (tools and _deps.tools is None):
        async with _lock:
            if _deps is None:
                settings = get_settings()
                configure_logging(settings)
                # Bad grants refuse to start, rather than fail every signed-in request.
                parse_grants(settings.access_grants)
                for name in unknown_tarsy_variables():
                    logger.warning("%s is set but no setting reads it (misspelt?)", name)
                config = load_config(settings)
                _deps = Deps(
                    settings=settings,
                    config=config,
                    store=get_store(settings),
                    bus=get_bus(settings),
                )
            if tools and _deps.tools is None:
                store = get_store(_deps.settings)
                executor = _tool_executor(_deps.config, _deps.settings, store)
                _deps = replace(_deps, tools=executor)
    return _deps

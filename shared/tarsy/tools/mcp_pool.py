"""Warm MCP connections: one per server per process, reused by every step.

Design constraint: an MCP session's transports live in anyio task groups,
which must be exited by the task that entered them, while a step's calls run
in tasks of their own and end with the step. So each connection is held open
by a keeper task of its own (started on the process's long-lived event loop,
:mod:`tarsy.runtime`), and steps borrow its client: MCP multiplexes requests
on one session, so concurrent steps share it. A connection whose keeper has
ended (the server closed it), that a call found broken, or that is older than
``max_age`` (an ID token in its headers expires) is replaced on the next use;
:meth:`ConnectionPool.close` ends them all on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")
S = TypeVar("S")

# An ID token lasts an hour; a connection is renewed well before the one in its headers expires.
DEFAULT_MAX_AGE_SECONDS = 30 * 60.0


@dataclass
class Held(Generic[C, S]):
    """One open connection: its client, what it observed (``state``), and its keeper."""

    client: C
    state: S
    keeper: asyncio.Task[None]
    stop: asyncio.Event
    opened: float
    broken: bool = False

    @property
    def alive(self) -> bool:
        """Whether the connection can still be used."""
        return not self.broken and not self.keeper.done()


OpenSession = Callable[[str, S], AbstractAsyncContextManager[C]]


@dataclass
class ConnectionPool(Generic[C, S]):
    """Open connections by server id, opened on first use and kept until closed."""

    open_session: OpenSession[S, C]
    max_age: float = DEFAULT_MAX_AGE_SECONDS
    clock: Callable[[], float] = time.monotonic
    opened: int = 0  # connections opened so far (benchmarks and tests read it)
    _held: dict[str, Held[C, S]] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def acquire(self, server_id: str, connect_timeout: float, state: S) -> Held[C, S]:
        """The server's open connection, connecting (within ``connect_timeout``) if needed.

        ``state`` is what a new connection observes (HTTP statuses, say); a warm one
        keeps its own.

        Raises:
            Exception: Whatever connecting raised (the caller classifies it).
        """
        async with self._locks.setdefault(server_id, asyncio.Lock()):
            held = self._held.get(server_id)
            if held is not None and held.alive and self.clock() - held.opened < self.max_age:
                return held
            if held is not None:
                await self._end(held)
            held = await self._open(server_id, connect_timeout, state)
            self._held[server_id] = held
            return held

    def discard(self, server_id: str, held: Held[C, S]) -> None:
        """Stop reusing a connection a call found broken; the next use reconnects."""
        held.broken = True
        held.stop.set()
        if self._held.get(server_id) is held:
            del self._held[server_id]

    async def close(self) -> None:
        """End every connection (on shutdown)."""
        held, self._held = list(self._held.values()), {}
        for connection in held:
            await self._end(connection)

    async def _open(self, server_id: str, connect_timeout: float, state: S) -> Held[C, S]:
        ready: asyncio.Future[C] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def keep() -> None:
            try:
                async with self.open_session(server_id, state) as client:
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as error:  # the keeper owns the connection to its end
                if not ready.done():
                    ready.set_exception(error)
                elif not stop.is_set():
                    logger.info("MCP connection to %s ended: %r", server_id, error)
                if isinstance(error, asyncio.CancelledError):
                    raise

        keeper = asyncio.create_task(keep(), name=f"mcp-{server_id}")
        try:
            async with asyncio.timeout(connect_timeout):
                client = await asyncio.shield(ready)
        except BaseException:
            stop.set()
            keeper.cancel()
            with contextlib.suppress(BaseException):
                await keeper
            raise
        self.opened += 1
        return Held(client=client, state=state, keeper=keeper, stop=stop, opened=self.clock())

    async def _end(self, held: Held[C, S]) -> None:
        held.stop.set()
        try:
            async with asyncio.timeout(10):
                await held.keeper
        except Exception:  # a connection that will not close is abandoned, not fatal
            held.keeper.cancel()
            logger.warning("an MCP connection did not close cleanly", exc_info=True)

"""One long-lived asyncio event loop per process, shared by every invocation.

functions-framework serves requests on threads. The async SDK clients
(Firestore, google-genai, MCP sessions) are bound to the loop they were created
on, so they are created lazily on this loop and reused across invocations;
``asyncio.run()`` per request would close the loop under a cached client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _get_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="tarsy-event-loop", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the process loop and block the calling thread until it ends."""
    return asyncio.run_coroutine_threadsafe(coro, _get_loop()).result()

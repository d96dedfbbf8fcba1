"""Waiting for something the stack does: a bounded poll, never a fixed sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

POLL_SECONDS = 0.05


async def until(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds`` (far above what it bounds)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)

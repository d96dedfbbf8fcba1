"""Live progress of a streaming LLM call, for a person watching Firestore.

While a call streams, the thinking and text so far are written to
``executions/{eid}/progress/current`` at most once a second (Firestore's
sustained write rate for one document). It is a document of its own, so it
never touches the execution document that the step's claim guards; the step's
commit deletes it when the real records land.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tarsy._pydantic import DeferredModel
from tarsy.llm.base import Chunk, TextChunk, ThinkingChunk


class ProgressStore(Protocol):
    """Where snapshots go (:class:`tarsy.persistence.store.Store`)."""

    async def write_progress(self, execution_id: str, progress: ProgressSnapshot) -> None:
        """Overwrite the execution's progress document."""
        ...


FLUSH_INTERVAL_S = 1.0
# The tail kept in the document: enough to watch, far below the document limit.
TAIL_CHARS = 20_000


class ProgressSnapshot(DeferredModel):
    """``executions/{eid}/progress/current``: the call streaming right now, so far."""

    step: int
    text: str
    thinking: str
    chunks: int


def snapshot(chunks: Sequence[Chunk], step: int) -> ProgressSnapshot:
    """The progress document for the chunks streamed so far (the tails of long texts)."""
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    thinking = "".join(c.text for c in chunks if isinstance(c, ThinkingChunk))
    return ProgressSnapshot(
        step=step, text=text[-TAIL_CHARS:], thinking=thinking[-TAIL_CHARS:], chunks=len(chunks)
    )


class ProgressWriter:
    """A ``Progress`` hook that flushes at most once per interval, the first after one."""

    def __init__(
        self,
        store: ProgressStore,
        execution_id: str,
        step: int,
        *,
        interval: float = FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._execution_id = execution_id
        self._step = step
        self._interval = interval
        self._clock = clock
        # Counted from the start of the call: a call shorter than one interval (most of
        # them) writes nothing, so the common step pays no extra round trip.
        self._last = clock()
        self.writes = 0

    async def __call__(self, chunks: Sequence[Chunk]) -> None:
        """Write the progress if the last write is at least one interval old."""
        now = self._clock()
        if now - self._last < self._interval:
            return
        self._last = now
        await self._store.write_progress(self._execution_id, snapshot(chunks, self._step))
        self.writes += 1

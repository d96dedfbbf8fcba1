from __future__ import annotations

from tarsy.llm.base import Chunk, TextChunk, ThinkingChunk, UsageChunk
from tarsy.models import TokenUsage
from tarsy.persistence.progress import TAIL_CHARS, ProgressSnapshot, ProgressWriter, snapshot


class FakeStore:
    def __init__(self) -> None:
        self.writes: list[tuple[str, ProgressSnapshot]] = []

    async def write_progress(self, execution_id: str, progress: ProgressSnapshot) -> None:
        self.writes.append((execution_id, progress))


def test_progress_fields_join_text_and_thinking_and_keep_the_tail() -> None:
    chunks: list[Chunk] = [
        ThinkingChunk(text="think "),
        TextChunk(text="a" * TAIL_CHARS),
        TextChunk(text="END"),
        UsageChunk(usage=TokenUsage()),
    ]
    progress = snapshot(chunks, step=3)
    assert progress.thinking == "think "
    assert progress.text == "a" * (TAIL_CHARS - 3) + "END"
    assert (progress.step, progress.chunks) == (3, 4)


async def test_writes_at_most_once_per_interval() -> None:
    now = [100.0]
    store = FakeStore()
    writer = ProgressWriter(store, "e1", 2, interval=1.0, clock=lambda: now[0])
    chunks: list[Chunk] = []
    for t in (100.0, 100.3, 100.9, 101.0, 101.5, 102.2):
        now[0] = t
        chunks.append(TextChunk(text=f"{t} "))
        await writer(chunks)
    # Created at 100.0: flushed at 101.0 and 102.2; the chunks in between waited, and a
    # call that ends within its first second writes nothing.
    assert writer.writes == 2
    assert [progress.chunks for _, progress in store.writes] == [4, 6]
    assert {execution for execution, _ in store.writes} == {"e1"}

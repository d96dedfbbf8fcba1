from __future__ import annotations

from typing import Any

from tarsy.llm.base import Chunk, TextChunk, ThinkingChunk, UsageChunk
from tarsy.models import TokenUsage
from tarsy.progress import TAIL_CHARS, ProgressWriter, progress_fields


class FakeStore:
    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []

    async def write_progress(self, execution_id: str, fields: dict[str, Any]) -> None:
        self.writes.append((execution_id, fields))


def test_progress_fields_join_text_and_thinking_and_keep_the_tail() -> None:
    chunks: list[Chunk] = [
        ThinkingChunk(text="think "),
        TextChunk(text="a" * TAIL_CHARS),
        TextChunk(text="END"),
        UsageChunk(usage=TokenUsage()),
    ]
    fields = progress_fields(chunks, step=3)
    assert fields["thinking"] == "think "
    assert fields["text"] == "a" * (TAIL_CHARS - 3) + "END"
    assert (fields["step"], fields["chunks"]) == (3, 4)


async def test_writes_at_most_once_per_interval() -> None:
    now = [100.0]
    store = FakeStore()
    writer = ProgressWriter(store, "e1", 2, interval=1.0, clock=lambda: now[0])  # type: ignore[arg-type]
    chunks: list[Chunk] = []
    for t in (100.0, 100.3, 100.9, 101.0, 101.5, 102.2):
        now[0] = t
        chunks.append(TextChunk(text=f"{t} "))
        await writer(chunks)
    # Created at 100.0: flushed at 101.0 and 102.2; the chunks in between waited, and a
    # call that ends within its first second writes nothing.
    assert writer.writes == 2
    assert [fields["chunks"] for _, fields in store.writes] == [4, 6]
    assert {execution for execution, _ in store.writes} == {"e1"}

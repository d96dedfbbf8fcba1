"""The one call shape: retried attempts, streamed to the progress sink, inside a budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from tarsy.config.schema import RetryPolicy
from tarsy.errors import LLMError
from tarsy.llm.base import Chunk, FinalChunk, TextChunk, ThinkingChunk
from tarsy.llm.retry import call_with_retries

POLICY = RetryPolicy(initial_delay=0.01, max_delay=0.05, empty_response_delay=0.01, max_retries=3)


async def no_sleep(_: float) -> None:
    return None


async def test_progress_sees_each_chunk_while_the_attempt_is_still_streaming() -> None:
    seen: list[list[str]] = []
    produced: list[str] = []

    async def attempt() -> AsyncIterator[Chunk]:
        for piece in ("a", "b", "c"):
            produced.append(piece)
            yield ThinkingChunk(text=piece) if piece == "a" else TextChunk(text=piece)
        yield FinalChunk()

    async def progress(chunks: Sequence[Chunk]) -> None:
        # Called before the next chunk is produced: this is streaming, not a replay.
        seen.append([c.text for c in chunks if isinstance(c, TextChunk | ThinkingChunk)])
        assert len(produced) == len(seen)

    result = await call_with_retries(attempt, POLICY, progress, sleep=no_sleep)

    assert seen == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert (result.thinking, result.text, result.attempts) == ("a", "bc", 1)


async def test_a_retried_attempt_starts_the_sink_from_nothing() -> None:
    calls = 0
    seen: list[int] = []

    async def attempt() -> AsyncIterator[Chunk]:
        nonlocal calls
        calls += 1
        yield TextChunk(text=f"try {calls}")
        if calls == 1:
            raise LLMError("server", "503", code="503")
        yield FinalChunk()

    async def progress(chunks: Sequence[Chunk]) -> None:
        seen.append(len(chunks))

    result = await call_with_retries(attempt, POLICY, progress, sleep=no_sleep)

    assert seen == [1, 1]
    assert (result.text, result.attempts) == ("try 2", 2)


async def test_a_client_error_is_not_retried_and_keeps_its_kind() -> None:
    failing = True

    async def attempt() -> AsyncIterator[Chunk]:
        if failing:
            raise LLMError("client", "bad schema", code="400")
        yield FinalChunk()

    with pytest.raises(LLMError) as failure:
        await call_with_retries(attempt, POLICY, sleep=no_sleep)
    assert (failure.value.kind, failure.value.attempts, failure.value.retryable) == (
        "client",
        1,
        False,
    )


async def test_an_empty_answer_is_retried_then_reported_empty() -> None:
    async def attempt() -> AsyncIterator[Chunk]:
        yield ThinkingChunk(text="only thoughts")
        yield FinalChunk()

    with pytest.raises(LLMError) as failure:
        await call_with_retries(attempt, POLICY, sleep=no_sleep)
    assert (failure.value.code, failure.value.attempts) == ("empty_response", 4)


async def test_a_hanging_model_ends_at_the_budget_without_starting_a_retry() -> None:
    attempts = 0

    async def attempt() -> AsyncIterator[Chunk]:
        nonlocal attempts
        attempts += 1
        await asyncio.Event().wait()  # never answers
        yield FinalChunk()  # pragma: no cover

    started = time.monotonic()
    with pytest.raises(LLMError) as failure:
        # The per-attempt timeout (300 s) is far beyond the budget: the budget wins.
        await call_with_retries(
            attempt, POLICY.model_copy(update={"timeout": 300.0}), budget=started + 0.2
        )
    assert attempts == 1
    assert failure.value.kind == "timeout"
    assert failure.value.retryable is True  # the strategy layer may try again next step
    assert time.monotonic() - started < 60  # far from the 300 s attempt timeout


async def test_no_attempt_starts_once_the_budget_is_spent() -> None:
    called: list[bool] = []

    async def attempt() -> AsyncIterator[Chunk]:
        called.append(True)
        yield FinalChunk()

    with pytest.raises(LLMError) as failure:
        await call_with_retries(attempt, POLICY, budget=time.monotonic() - 1)
    assert failure.value.code == "step_budget"
    assert called == []

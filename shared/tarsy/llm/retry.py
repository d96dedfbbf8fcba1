"""The transport retry layer shared by every backend (seed 000 Q5).

Who owns which error:

* **transport (here, tenacity)**: 429 (waits ``Retry-After`` when given, else
  exponential backoff with jitter), 5xx, connection errors and timeouts, and
  empty responses (fixed delay), each up to ``max_retries`` times; any other
  4xx fails at once. Each attempt streams its chunks to the progress sink as
  they arrive; a retried attempt starts the sink again from nothing, and only
  the successful attempt's result is returned and committed.
* **strategy (the controller)**: what is still failing after the transport
  gave up arrives as an :class:`~tarsy.errors.LLMError` whose ``ErrorInfo``
  says whether it is ``retryable``; the controller decides whether another
  iteration may try again (e.g. two consecutive timeouts fail the execution).

All attempts share one budget (a ``time.monotonic()`` deadline from the step):
an attempt never runs past it, and no retry starts that could not finish a
wait inside it, so a step always ends in time to record what happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    stop_after_attempt,
    wait_random_exponential,
)

from tarsy.config.schema import RetryPolicy
from tarsy.errors import FailureKind, LLMError
from tarsy.llm.base import (
    Budget,
    Chunk,
    FinalChunk,
    LLMResult,
    Progress,
    assemble,
    has_content,
)

logger = logging.getLogger(__name__)


def classify_status(status: int) -> FailureKind:
    """The failure kind of an HTTP status from a model API."""
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server"
    return "client"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to backoff


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff = wait_random_exponential(multiplier=policy.initial_delay, max=policy.max_delay)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, LLMError):
            if error.kind == "empty":
                return policy.empty_response_delay
            if error.kind == "rate_limit" and error.retry_after is not None:
                return min(error.retry_after, policy.max_delay)
        return float(backoff(state))

    return wait


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    delay = state.next_action.sleep if state.next_action else 0.0
    logger.warning(
        "LLM call attempt %s failed (%s); retrying in %.1fs", state.attempt_number, error, delay
    )


def _out_of_budget(budget: Budget, wait: float, clock: Callable[[], float]) -> bool:
    """Whether waiting ``wait`` seconds leaves no time for another attempt."""
    return budget is not None and clock() + wait >= budget


async def _one_attempt(
    attempt: Callable[[], AsyncIterator[Chunk]],
    seconds: float,
    progress: Progress | None,
) -> list[Chunk]:
    """Run one streamed attempt within ``seconds``, feeding ``progress`` as chunks arrive."""
    chunks: list[Chunk] = []
    try:
        async with asyncio.timeout(seconds):
            async for chunk in attempt():
                chunks.append(chunk)
                if progress is not None and chunk.type in ("text", "thinking"):
                    await progress(chunks)
    except TimeoutError as e:
        raise LLMError("timeout", f"no complete answer within {seconds:g}s", code="timeout") from e
    if not has_content(chunks):
        final = next((c for c in chunks if isinstance(c, FinalChunk)), None)
        if final is not None and final.finish_reason == "blocked":
            raise LLMError(
                "empty",
                f"the model's answer was blocked ({final.raw_finish_reason})",
                code="blocked",
            )
        raise LLMError("empty", "the model returned no content", code="empty_response")
    return chunks


async def call_with_retries(
    attempt: Callable[[], AsyncIterator[Chunk]],
    policy: RetryPolicy,
    progress: Progress | None = None,
    *,
    budget: Budget = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> LLMResult:
    """Run ``attempt`` until it succeeds, the policy gives up or the budget runs out.

    Raises the last :class:`~tarsy.errors.LLMError` (``attempts`` set) when
    retries are exhausted, the failure is not retryable, or no time is left.
    """
    wait = _wait(policy)

    def should_retry(state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if not (isinstance(error, LLMError) and error.retryable):
            return False
        return not _out_of_budget(budget, wait(state), clock)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        wait=wait,
        retry=should_retry,
        before_sleep=_log_retry,
        sleep=sleep,
        reraise=True,
    )
    attempts = 0
    try:
        async for trial in retrying:
            with trial:
                attempts = trial.retry_state.attempt_number
                timeout = policy.timeout
                if budget is not None:
                    timeout = min(timeout, budget - clock())
                    if timeout <= 0:
                        raise LLMError(
                            "timeout", "the step's time budget ran out", code="step_budget"
                        )
                chunks = await _one_attempt(attempt, timeout, progress)
    except LLMError as error:
        error.attempts = attempts
        raise
    return assemble(chunks, attempts)

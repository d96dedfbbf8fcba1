"""The transport retry layer shared by every backend (seed 000 Q5).

Who owns which error:

* **transport (here, tenacity)**: 429 (waits ``Retry-After`` when given, else
  exponential backoff with jitter), 5xx, connection errors and timeouts, and
  empty responses (fixed delay), each up to ``max_retries`` times; any other
  4xx fails at once. A call is retried whole and its chunks are buffered per
  attempt, so a retried attempt leaves nothing behind: only the final outcome
  is returned and committed.
* **strategy (the controller)**: what is still failing after the transport
  gave up arrives as an :class:`~tarsy.errors.LLMError` whose ``ErrorInfo``
  says whether it is ``retryable``; the controller decides whether another
  iteration may try again (e.g. two consecutive timeouts fail the execution).

Each backend supplies one ``attempt`` coroutine that runs one streaming call
and either returns its chunks or raises :class:`AttemptError` classified by
its own SDK mapping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from tarsy.config.schema import RetryPolicy
from tarsy.llm.base import Chunk
from tarsy.models import ErrorInfo

logger = logging.getLogger(__name__)

FailureKind = Literal["rate_limit", "server", "connection", "timeout", "empty", "client"]
RETRIED_KINDS: frozenset[FailureKind] = frozenset(
    {"rate_limit", "server", "connection", "timeout", "empty"}
)


class AttemptError(Exception):
    """One attempt failed; ``kind`` decides whether the transport layer retries."""

    def __init__(
        self, kind: FailureKind, message: str, *, code: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.retry_after = retry_after
        self.attempts = 1  # set by with_retries when it gives up

    @property
    def retryable(self) -> bool:
        """Whether retrying might succeed."""
        return self.kind in RETRIED_KINDS

    def info(self) -> ErrorInfo:
        """The error as the strategy layer sees it."""
        return ErrorInfo(message=str(self), code=self.code, retryable=self.retryable)


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
        if isinstance(error, AttemptError):
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


async def with_retries(
    attempt: Callable[[], Awaitable[Sequence[Chunk]]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[Sequence[Chunk], int]:
    """Run ``attempt`` until it succeeds or the policy gives up.

    Returns the successful attempt's chunks and the number of attempts made.
    Raises the last :class:`AttemptError` when retries are exhausted or the
    failure is not retryable.
    """

    async def bounded() -> Sequence[Chunk]:
        try:
            return await asyncio.wait_for(attempt(), timeout=policy.timeout)
        except TimeoutError as e:
            raise AttemptError(
                "timeout", f"no complete answer within {policy.timeout:g}s", code="timeout"
            ) from e

    attempts = 0
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        wait=_wait(policy),
        retry=retry_if_exception(lambda e: isinstance(e, AttemptError) and e.retryable),
        before_sleep=_log_retry,
        sleep=sleep,
        reraise=True,
    )
    try:
        async for trial in retrying:
            with trial:
                attempts = trial.retry_state.attempt_number
                chunks = await bounded()
    except AttemptError as error:
        error.attempts = attempts
        raise
    return chunks, attempts

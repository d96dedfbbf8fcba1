"""Provider fallback as a provider: the engine makes one call, whoever answers it.

Design constraint: a call that still fails after its transport retries, with a
failure kind its provider lists in ``fallback_on``, is made again on the next
provider of ``fallback``, forward only, within the step's budget; and the
record of the call must say who answered and who failed before. Wrapping the
candidates in one :class:`FallbackProvider` keeps that out of the step engine
(and lets replay run the same engine with recorded candidates).

Thought signatures belong to the provider that made them: a fallback candidate
gets none in its request and its answer leaves none.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import FailureKind, LLMError
from tarsy.llm.base import Budget, GenerateRequest, LLMProvider, LLMResult, Progress
from tarsy.models import FailedProvider

# How each candidate's call is observed (a telemetry span); the identity by default.
CallWrapper = Callable[["Candidate", Awaitable[LLMResult]], Awaitable[LLMResult]]


@dataclass(frozen=True)
class Candidate:
    """One provider a call may be made on: its configured name, config and client."""

    name: str
    config: LLMProviderConfig
    provider: LLMProvider


class FallbackResult(LLMResult):
    """An answer, naming the candidate that gave it and those that failed before."""

    answered_by: str
    model: str
    backend: str
    failed_providers: list[FailedProvider] = []


class FallbackError(LLMError):
    """Every candidate tried failed: the last one's error, with the ones before it."""

    def __init__(self, last: LLMError, tried: Candidate, failed: list[FailedProvider]) -> None:
        super().__init__(
            last.kind, str(last), code=last.code, retry_after=last.retry_after,
            attempts=last.attempts,
        )  # fmt: skip
        self.tried = tried
        self.failed_providers = failed


class FallbackProvider:
    """An :class:`~tarsy.llm.base.LLMProvider` over candidates tried in order."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        fallback_on: Sequence[FailureKind],
        observe: CallWrapper | None = None,
    ) -> None:
        if not candidates:
            raise ValueError("a fallback provider needs at least one candidate")
        self.candidates = list(candidates)
        self.fallback_on = frozenset(fallback_on)
        self._observe = observe
        self.name: str = self.candidates[0].provider.name

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> FallbackResult:
        """Answer on the first candidate that can; raise :class:`FallbackError` if none can."""
        failed: list[FailedProvider] = []
        for index, candidate in enumerate(self.candidates):
            asked = request
            if index:
                asked = request.model_copy(
                    update={"config": candidate.config, "thought_signatures": {}}
                )
            call = candidate.provider.generate(asked, progress, budget=budget)
            try:
                result = await (self._observe(candidate, call) if self._observe else call)
            except LLMError as error:
                if self._falls_back(index, error, budget):
                    failed.append(
                        FailedProvider(
                            provider=candidate.name,
                            model=candidate.config.model,
                            error=error.info,
                            attempts=error.attempts,
                        )
                    )
                    continue
                raise FallbackError(error, candidate, failed) from error
            return FallbackResult(
                **result.model_dump(exclude={"provider_state"} if index else set()),
                answered_by=candidate.name,
                model=candidate.config.model,
                backend=candidate.provider.name,
                failed_providers=failed,
            )
        raise AssertionError("unreachable: the last candidate answers or raises")

    def _falls_back(self, index: int, error: LLMError, budget: Budget) -> bool:
        return (
            index + 1 < len(self.candidates)
            and error.kind in self.fallback_on
            and (budget is None or time.monotonic() < budget)
        )

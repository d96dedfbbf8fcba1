"""The one call shape every backend shares.

A backend implements a single streamed attempt; :class:`StreamingProvider`
turns it into the call the step engine makes: retried by the transport layer
(:mod:`tarsy.llm.retry`), streamed to a progress sink as chunks arrive, within
the step's time budget, returning a whole :class:`~tarsy.llm.base.LLMResult`
or raising :class:`~tarsy.errors.LLMError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

from tarsy.llm.base import Budget, Capabilities, Chunk, GenerateRequest, LLMResult, Progress
from tarsy.llm.retry import call_with_retries


class StreamingProvider(ABC):
    """The one call shape every backend shares: retried attempts, streamed to ``progress``.

    A backend implements :meth:`attempt`: one streamed call that yields chunks
    as they arrive (ending with a :class:`FinalChunk`) and raises
    :class:`~tarsy.errors.LLMError` classified by its own SDK mapping.
    """

    name: str
    capabilities: Capabilities

    @abstractmethod
    def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """Stream one attempt at ``request``."""

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        """Answer ``request`` with the transport retries of ``request.config.retry``."""
        return await call_with_retries(
            lambda: self.attempt(request), request.config.retry, progress, budget=budget
        )

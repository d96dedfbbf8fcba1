"""The one call shape every backend shares.

A backend implements a single streamed attempt; :class:`StreamingProvider`
turns it into the call the step engine makes: retried by the transport layer
(:mod:`tarsy.llm.retry`), streamed to a progress sink as chunks arrive, within
the step's time budget, returning a whole :class:`~tarsy.llm.base.LLMResult`
or raising :class:`~tarsy.errors.LLMError`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from tarsy import secrets
from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError
from tarsy.llm.base import Budget, Chunk, GenerateRequest, LLMResult, Progress
from tarsy.llm.retry import call_with_retries
from tarsy.settings import Settings

if TYPE_CHECKING:
    from tarsy.llm.backends.base import Backend


class StreamingProvider(ABC):
    """The one call shape every backend shares: retried attempts, streamed to ``progress``.

    A backend implements :meth:`attempt`: one streamed call that yields chunks
    as they arrive (ending with a :class:`FinalChunk`) and raises
    :class:`~tarsy.errors.LLMError` classified by its own SDK mapping.
    """

    name: str

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


def api_key(backend: Backend, config: LLMProviderConfig, settings: Settings) -> str | None:
    """The API key of a call: the provider's own, else the vendor's variable, else none.

    A type without a vendor variable (a self-hosted server) may have no key. A
    key that cannot be resolved is a configuration error: no retry can fix it.
    """
    if config.api_key is not None:
        try:
            return secrets.resolve(config.api_key, settings)
        except ConfigError as exc:
            raise ConfigError(f"no credentials for model {config.model!r}: {exc}") from exc
    if backend.api_key_env is None:
        return None
    value = os.environ.get(backend.api_key_env)
    if not value:
        raise ConfigError(
            f"no credentials for model {config.model!r}: set {backend.api_key_env} "
            "or the provider's api_key"
        )
    return value

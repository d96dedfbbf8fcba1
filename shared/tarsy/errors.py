"""The one exception tree of the product.

::

    TarsyError
    ├── ConfigError                 configuration is wrong: at load (the process refuses to
    │   │                           start) or met while stepping (the session fails at once)
    │   └── ToolSelectionError      the alert's ``mcp`` names a tool its server does not list
    ├── InputError                  a caller sent something we reject (maps to 4xx)
    │   ├── AuthError               401: missing or wrong API key, or no verified identity
    │   ├── ForbiddenError          403: a verified identity without the role an action needs
    │   └── NotFoundError           404: no such session
    ├── ApiError                    the CLI's HTTP call to ingest/api failed
    └── RuntimeFailure              something failed while running a step
        ├── RunbookError            a runbook URL could not be fetched; never raised out of
        │                           a step: the investigation goes on without the runbook
        ├── TransientError          retry later: Pub/Sub redelivers the message
        │   └── LeaseHeldError      another invocation owns the execution right now
        └── PermanentError          retrying the message cannot help; record it, acknowledge
            ├── LLMError            one model call failed, after the transport retries;
            │                       carries ErrorInfo (``retryable`` tells the strategy
            │                       layer whether another iteration may succeed)
            └── IllegalTransitionError  a status change the lifecycle forbids

The step function maps them once (``tarsy.engine.steps.handle``): ``TransientError``
is re-raised (Pub/Sub redelivers only on a raised exception); ``ConfigError``
and ``PermanentError`` are recorded on the execution and session, and the
message is acknowledged. SDK exceptions are translated at the adapter that
calls the SDK (``tarsy.llm.google_native``, ``tarsy.llm.langchain_provider``,
``tarsy.llm.openai_chat``, ``tarsy.llm.anthropic_messages``).
"""

from __future__ import annotations

from typing import Literal

from tarsy.models import ErrorInfo

# How a model call failed; the transport layer retries every kind but ``client``.
FailureKind = Literal["rate_limit", "server", "connection", "timeout", "empty", "client"]
RETRIED_KINDS: frozenset[FailureKind] = frozenset(
    {"rate_limit", "server", "connection", "timeout", "empty"}
)


class TarsyError(Exception):
    """Base of every error the product raises on purpose."""


class ConfigError(TarsyError):
    """Configuration is invalid. ``errors`` lists ``(location, message)`` pairs."""

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []

    def __str__(self) -> str:
        if not self.errors:
            return super().__str__()
        lines = [f"  {loc}: {msg}" for loc, msg in self.errors]
        return "\n".join([super().__str__(), *lines])


class ToolSelectionError(ConfigError):
    """The alert chose a tool that its MCP server does not list (found when listing tools).

    Ingest can check tool names only against a tool list it knows (see
    :mod:`tarsy.tools.selection`); otherwise the first step finds out, and the
    session fails with this error rather than investigating with less than asked.
    """

    def __init__(self, server: str, missing: list[str], listed: list[str]) -> None:
        offered = ", ".join(listed) or "none"
        super().__init__(
            f"the alert selected {', '.join(repr(t) for t in missing)} of MCP server "
            f"{server!r}, which does not list {'it' if len(missing) == 1 else 'them'} "
            f"(it lists: {offered})"
        )
        self.server = server
        self.missing = missing
        self.listed = listed


class InputError(TarsyError):
    """A request was rejected. ``status`` is the HTTP status it maps to."""

    status: int = 400

    def __init__(self, message: str, *, status: int | None = None, details: object = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.details = details


class AuthError(InputError):
    """Missing or wrong credentials."""

    status = 401


class ForbiddenError(InputError):
    """A verified identity lacks the role an action needs; ``required_role`` names it."""

    status = 403

    def __init__(self, message: str, *, required_role: str) -> None:
        super().__init__(message, details={"required_role": required_role})
        self.required_role = required_role


class NotFoundError(InputError):
    """The addressed resource does not exist."""

    status = 404


class RuntimeFailure(TarsyError):
    """Something failed while running a step."""


RunbookFailure = Literal[
    "invalid_url", "domain", "token", "http", "too_large", "not_text", "timeout", "connection"
]


class RunbookError(RuntimeFailure):
    """A runbook URL could not be fetched. ``kind`` says why; the session goes on without it.

    ``status`` is the HTTP status of an ``http`` failure.
    """

    def __init__(self, kind: RunbookFailure, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: RunbookFailure = kind
        self.status = status

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed shortly (a dropped connection, 429, 5xx)."""
        if self.kind == "connection":
            return True
        return (
            self.kind == "http"
            and self.status is not None
            and (self.status == 429 or self.status >= 500)
        )


class TransientError(RuntimeFailure):
    """Retrying later may succeed; the message is redelivered."""


class LeaseHeldError(TransientError):
    """Another invocation holds the lease on this execution."""


class PermanentError(RuntimeFailure):
    """Retrying the same message cannot succeed."""


class LLMError(PermanentError):
    """A model call failed. Raised per attempt by a provider, and by the retry layer at the end.

    ``kind`` decides whether the transport layer retries; ``retry_after`` is the
    server's ``Retry-After`` in seconds; ``attempts`` is set when retries end.
    """

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        code: str,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.code = code
        self.retry_after = retry_after
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        """Whether another try may succeed (the transport retries; then the strategy layer)."""
        return self.kind in RETRIED_KINDS

    @property
    def info(self) -> ErrorInfo:
        """The error as recorded on the interaction and the execution."""
        return ErrorInfo(message=str(self), code=self.code, retryable=self.retryable)


class IllegalTransitionError(PermanentError):
    """A status change the lifecycle forbids (e.g. completing a cancelled execution)."""

    def __init__(self, what: str, current: str, target: str) -> None:
        super().__init__(f"{what} cannot go from {current!r} to {target!r}")
        self.what = what
        self.current = current
        self.target = target


class ApiError(TarsyError):
    """An HTTP call to a tarsy endpoint failed (raised by the client, shown by the CLI)."""

    def __init__(self, message: str, *, status: int | None = None, body: object = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

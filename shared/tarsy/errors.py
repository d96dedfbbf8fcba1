"""The one exception tree of the product.

::

    TarsyError
    ├── ConfigError                 configuration is wrong; found at load, never retried
    ├── InputError                  a caller sent something we reject (maps to 4xx)
    │   ├── AuthError               401: missing or wrong API key
    │   └── NotFoundError           404: no such session
    ├── ApiError                    the CLI's HTTP call to ingest/api failed
    └── RuntimeFailure              something failed while running a step
        ├── TransientError          retry later: Pub/Sub redelivers the message
        │   └── LeaseHeldError      another invocation owns the execution right now
        └── PermanentError          retrying cannot help; record it and fail the execution
            └── LLMError            an LLM call failed; carries ErrorInfo
                                    (``retryable`` tells the strategy layer whether
                                    another iteration may succeed)

Step handlers re-raise ``TransientError`` (the Pub/Sub emulator and Pub/Sub
redeliver only on a raised exception) and record ``PermanentError`` on the
execution. SDK exceptions are translated at the adapter that calls the SDK.
"""

from __future__ import annotations

from tarsy.models import ErrorInfo


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


class NotFoundError(InputError):
    """The addressed resource does not exist."""

    status = 404


class RuntimeFailure(TarsyError):
    """Something failed while running a step."""


class TransientError(RuntimeFailure):
    """Retrying later may succeed; the message is redelivered."""


class LeaseHeldError(TransientError):
    """Another invocation holds the lease on this execution."""


class PermanentError(RuntimeFailure):
    """Retrying the same message cannot succeed."""


class LLMError(PermanentError):
    """An LLM call failed after the transport layer's retries."""

    def __init__(self, info: ErrorInfo, *, attempts: int = 1) -> None:
        super().__init__(info.message)
        self.info = info
        self.attempts = attempts


class ApiError(TarsyError):
    """An HTTP call to a tarsy endpoint failed (raised by the client, shown by the CLI)."""

    def __init__(self, message: str, *, status: int | None = None, body: object = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

"""Google ID tokens for MCP servers that admit only their IAM invokers (Cloud Run).

A private Cloud Run service checks, before any request reaches the
container, that it carries a Google-signed ID token whose audience is the
service and whose identity holds ``roles/run.invoker`` on it. The step
function mints that token from its own identity with google-auth, which asks
the metadata server on Google Cloud (or signs with the key file named by
``GOOGLE_APPLICATION_CREDENTIALS`` elsewhere); nothing else is configured.

Tokens live about an hour, so the credentials are kept per audience for the
process (a client, like the Firestore one, not session state) and refreshed
only when google-auth says they are no longer valid. google-auth is
synchronous: the fetch runs in a worker thread. Its failures are translated
here, once: an unreachable token endpoint is transient (the call is retried),
missing credentials are a configuration error.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import urlsplit

from tarsy.errors import ConfigError, TransientError


def default_audience(url: str) -> str:
    """The audience Cloud Run expects for ``url``: its scheme and host, no path.

    Args:
        url: The MCP endpoint, e.g. ``https://k8s-mcp-abc-uc.a.run.app/mcp``.

    Returns:
        ``https://k8s-mcp-abc-uc.a.run.app``.
    """
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class IdTokenSource:
    """Mints and caches Google ID tokens, one set of credentials per audience."""

    def __init__(self) -> None:
        self._credentials: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _token(self, audience: str) -> str:
        import google.auth.exceptions
        import google.auth.transport.requests
        import google.oauth2.id_token

        request = google.auth.transport.requests.Request()
        # One thread at a time: two refreshes of one audience would both hit the endpoint.
        with self._lock:
            try:
                credentials = self._credentials.get(audience)
                if credentials is None:
                    credentials = google.oauth2.id_token.fetch_id_token_credentials(  # type: ignore[no-untyped-call]
                        audience, request=request
                    )
                    self._credentials[audience] = credentials
                if not credentials.valid:
                    credentials.refresh(request)
            except google.auth.exceptions.TransportError as e:
                raise TransientError(f"cannot reach the ID token endpoint: {e}") from e
            except google.auth.exceptions.GoogleAuthError as e:
                raise ConfigError(f"cannot mint an ID token for {audience!r}: {e}") from e
            return str(credentials.token)

    async def token(self, audience: str) -> str:
        """An ID token for ``audience``, fresh for at least Google's clock-skew margin.

        Args:
            audience: The receiving service's URL (scheme and host).

        Returns:
            The token, to send as ``Authorization: Bearer ...``.

        Raises:
            TransientError: The token endpoint could not be reached.
            ConfigError: This process has no identity that can sign ID tokens.
        """
        return await asyncio.to_thread(self._token, audience)


_source: IdTokenSource | None = None
_source_lock = threading.Lock()


def id_tokens() -> IdTokenSource:
    """The process's token source (created on first use)."""
    global _source
    with _source_lock:
        if _source is None:
            _source = IdTokenSource()
        return _source

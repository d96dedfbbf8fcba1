"""Values that the configuration names instead of containing: environment or Secret Manager.

Settings (``tarsy.settings``) are the product's own environment; this module
resolves the variables and secrets that a *user's configuration* points at
(MCP server tokens, for instance), so it is the one other place that reads the
environment, and only for names the configuration gives.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from pydantic import SecretStr

from tarsy.config.schema import SecretRef
from tarsy.errors import ConfigError
from tarsy.settings import Settings

_client: Any = None
_client_lock = threading.Lock()


def secret_version_name(secret: str, project_id: str) -> str:
    """Full Secret Manager version name for ``secret`` (a short name means latest)."""
    if secret.startswith("projects/"):
        return secret if "/versions/" in secret else f"{secret}/versions/latest"
    return f"projects/{project_id}/secrets/{secret}/versions/latest"


def _secret_manager() -> Any:
    global _client
    with _client_lock:
        if _client is None:
            from google.cloud import secretmanager

            _client = secretmanager.SecretManagerServiceClient()
        return _client


def resolve(value: str | SecretRef, settings: Settings) -> str:
    """The plain value of a config entry that may name an environment variable or secret."""
    if isinstance(value, str):
        return value
    if value.env is not None:
        resolved = os.environ.get(value.env)
        if resolved is None:
            raise ConfigError(f"environment variable {value.env!r} named in the config is not set")
        return resolved
    assert value.secret is not None
    return _secret(secret_version_name(value.secret, settings.project_id))


def credential(value: SecretStr | None, secret: str | None, settings: Settings, what: str) -> str:
    """A credential set directly (an environment variable), else read from its named secret.

    Raises:
        ConfigError: The secret cannot be read.
        ValueError: Neither is configured (``what`` names the credential).
    """
    if value is not None:
        return value.get_secret_value()
    if secret:
        return resolve(SecretRef(secret=secret), settings)
    raise ValueError(f"no {what} is configured")


def resolve_name(name: str, settings: Settings) -> str:
    """The value behind a bare name in the config: its environment variable, else its secret.

    For settings that list names rather than ``{env: ...}`` / ``{secret: ...}``
    references (``alert_sources.pagerduty.signing_secrets``): the environment
    variable of that name when it is set, otherwise the Secret Manager secret of
    that name (``projects/...`` or the function's project, latest version).

    Raises:
        ConfigError: Neither exists or the secret cannot be read.
    """
    value = os.environ.get(name)
    if value is not None:
        return value
    return _secret(secret_version_name(name, settings.project_id))


# A step resolves its provider's key and its MCP tokens on every call; keeping a
# secret for a few minutes saves a Secret Manager round trip per call, while a
# rotated secret still reaches warm instances soon.
SECRET_CACHE_SECONDS = 300.0
_cache: dict[str, tuple[float, str]] = {}


def _secret(name: str) -> str:
    now = time.monotonic()
    with _client_lock:
        cached = _cache.get(name)
    if cached is not None and now - cached[0] < SECRET_CACHE_SECONDS:
        return cached[1]
    from google.api_core import exceptions as api_errors

    try:
        response = _secret_manager().access_secret_version(request={"name": name})
    except api_errors.GoogleAPICallError as e:
        raise ConfigError(f"cannot read secret {name!r} named in the config: {e}") from e
    value = str(response.payload.data.decode("utf-8"))
    with _client_lock:
        _cache[name] = (now, value)
    return value


def resolve_all(values: dict[str, str | SecretRef], settings: Settings) -> dict[str, str]:
    """Resolve every value of a mapping (headers, environment)."""
    return {key: resolve(value, settings) for key, value in values.items()}

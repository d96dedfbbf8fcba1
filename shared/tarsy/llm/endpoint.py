"""Where one LLM provider's calls go, and with which credentials.

A provider may carry its own Gemini API key (an environment variable or a
Secret Manager secret) or its own Vertex AI project and location; what it does
not set comes from the process settings. The SDK clients are cached per
endpoint, so two providers with different keys never share a client.
"""

from __future__ import annotations

from pydantic import ConfigDict, SecretStr

from tarsy import secrets
from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig
from tarsy.errors import ConfigError
from tarsy.settings import Settings


class Endpoint(DeferredModel):
    """Gemini API (``api_key`` set) or Vertex AI (``project``/``location``)."""

    model_config = ConfigDict(frozen=True)

    api_key: SecretStr | None
    project: str
    location: str
    base_url: str | None

    def cache_key(self) -> tuple[str | None, ...]:
        """What tells two endpoints apart, the key included (it stays in memory only)."""
        key = self.api_key.get_secret_value() if self.api_key else None
        return (key, self.project, self.location, self.base_url)


def endpoint_for(config: LLMProviderConfig, settings: Settings) -> Endpoint:
    """Resolve the endpoint of ``config``: its own credentials first, then the settings.

    A provider that names a Vertex AI project uses Vertex AI even when the
    process has a ``GEMINI_API_KEY``: the config says where that model lives.
    """
    if config.api_key is not None:
        api_key: SecretStr | None = SecretStr(secrets.resolve(config.api_key, settings))
    elif config.type == "vertexai":
        api_key = None
    elif config.vertex_project is None and config.vertex_location is None:
        api_key = settings.gemini_api_key
    else:
        api_key = None
    return Endpoint(
        api_key=api_key,
        project=config.vertex_project or settings.vertex_project or settings.project_id,
        location=config.vertex_location or settings.vertex_location,
        base_url=config.base_url or settings.gemini_base_url,
    )


def resolve_endpoint(config: LLMProviderConfig, settings: Settings) -> Endpoint:
    """:func:`endpoint_for` for a call: unresolvable credentials are a configuration error.

    It is not a model failure: no retry or other iteration can fix it, so the
    step engine fails the session at once with the reason.
    """
    try:
        return endpoint_for(config, settings)
    except ConfigError as exc:
        raise ConfigError(f"no credentials for model {config.model!r}: {exc}") from exc

"""Where the ``tarsy`` CLI and the local scheduler find the functions.

The CLI reads a ``.env`` file too, so it keeps pydantic-settings; the functions'
:class:`tarsy.settings.Settings` does without it (cold starts).
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClientSettings(BaseSettings):
    """Where the ``tarsy`` CLI finds the ingest and api functions.

    Read from the environment, then from ``.local/stack.env`` (written by
    ``make up``), so the CLI works against a local stack with no flags.
    """

    model_config = SettingsConfigDict(
        env_file=".local/stack.env", extra="ignore", frozen=True, populate_by_name=True
    )

    ingest_url: str | None = Field(default=None, validation_alias="TARSY_INGEST_URL")
    api_url: str | None = Field(default=None, validation_alias="TARSY_API_URL")
    api_key: SecretStr | None = Field(default=None, validation_alias="TARSY_API_KEY")
    # Where people open the pages (the local sign-in proxy); default: the api URL.
    ui_url: str | None = Field(default=None, validation_alias="TARSY_UI_URL")
    # The local stack's sign-in key, with which the CLI signs its api requests as ``user``.
    signin_key: str | None = Field(default=None, validation_alias="TARSY_SIGNIN_KEY")
    user: str | None = Field(default=None, validation_alias="TARSY_USER")
    # IAP's OAuth client id: when set, api requests carry an identity token for it (IAP's
    # programmatic access) instead of the API key or a local signature.
    iap_audience: str | None = Field(default=None, validation_alias="TARSY_IAP_AUDIENCE")
    # An identity token obtained elsewhere (``gcloud auth print-identity-token``); else
    # google-auth fetches one (a service-account key file, or the metadata server).
    iap_token: SecretStr | None = Field(default=None, validation_alias="TARSY_IAP_TOKEN")

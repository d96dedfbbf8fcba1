"""Values the config names (env vars, Secret Manager) and the LLM endpoint they resolve to.

There is no Secret Manager emulator, so the Secret Manager tests put a small
stand-in client in ``tarsy.secrets``'s own client slot (the place the module
caches the real ``SecretManagerServiceClient``); the request it receives is the
one the real client would send.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from google.api_core import exceptions as api_errors

from tarsy import secrets
from tarsy.config.schema import LLMProviderConfig, SecretRef
from tarsy.errors import ConfigError
from tarsy.llm.endpoint import endpoint_for
from tarsy.settings import Settings

SETTINGS = Settings(GOOGLE_CLOUD_PROJECT="proj-a")


class SecretManagerStandIn:
    """Answers ``access_secret_version`` from a dict, counting requests."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.requests: list[str] = []

    def access_secret_version(self, request: dict[str, str]) -> Any:
        name = request["name"]
        self.requests.append(name)
        if name not in self.values:
            raise api_errors.NotFound(  # type: ignore[no-untyped-call]
                f"Secret [{name}] not found or has no versions."
            )
        return SimpleNamespace(payload=SimpleNamespace(data=self.values[name].encode()))


@pytest.fixture
def secret_manager(monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretManagerStandIn]:
    stand_in = SecretManagerStandIn(
        {
            "projects/proj-a/secrets/team-key/versions/latest": "s3cret",
            "projects/other/secrets/k/versions/3": "pinned",
        }
    )
    monkeypatch.setattr(secrets, "_client", stand_in)
    monkeypatch.setattr(secrets, "_cache", {})
    yield stand_in


@pytest.mark.parametrize(
    ("secret", "name"),
    [
        ("team-key", "projects/proj-a/secrets/team-key/versions/latest"),
        ("projects/other/secrets/k", "projects/other/secrets/k/versions/latest"),
        ("projects/other/secrets/k/versions/3", "projects/other/secrets/k/versions/3"),
    ],
)
def test_secret_version_names(secret: str, name: str) -> None:
    assert secrets.secret_version_name(secret, "proj-a") == name


def test_plain_values_and_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOKEN", "tok-1")
    assert secrets.resolve("literal", SETTINGS) == "literal"
    assert secrets.resolve(SecretRef(env="MCP_TOKEN"), SETTINGS) == "tok-1"
    assert secrets.resolve_all(
        {"Authorization": "Bearer x", "X-Token": SecretRef(env="MCP_TOKEN")}, SETTINGS
    ) == {"Authorization": "Bearer x", "X-Token": "tok-1"}


def test_an_unset_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError, match="'NOT_SET_ANYWHERE' named in the config is not set"):
        secrets.resolve(SecretRef(env="NOT_SET_ANYWHERE"), SETTINGS)


def test_secrets_are_read_once_per_cache_period(secret_manager: SecretManagerStandIn) -> None:
    ref = SecretRef(secret="team-key")
    assert secrets.resolve(ref, SETTINGS) == "s3cret"
    assert secrets.resolve(ref, SETTINGS) == "s3cret"
    assert secrets.resolve(SecretRef(secret="projects/other/secrets/k/versions/3"), SETTINGS) == (
        "pinned"
    )
    assert secret_manager.requests == [
        "projects/proj-a/secrets/team-key/versions/latest",
        "projects/other/secrets/k/versions/3",
    ]


def test_an_expired_secret_is_read_again(
    secret_manager: SecretManagerStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secrets, "SECRET_CACHE_SECONDS", 0.0)
    ref = SecretRef(secret="team-key")
    secrets.resolve(ref, SETTINGS)
    secret_manager.values["projects/proj-a/secrets/team-key/versions/latest"] = "rotated"
    assert secrets.resolve(ref, SETTINGS) == "rotated"
    assert len(secret_manager.requests) == 2


def test_a_missing_secret_is_a_config_error(secret_manager: SecretManagerStandIn) -> None:
    with pytest.raises(ConfigError, match="cannot read secret 'projects/proj-a/secrets/nope"):
        secrets.resolve(SecretRef(secret="nope"), SETTINGS)


# ─── endpoints ────────────────────────────────────────────────────────────────


def provider(**fields: Any) -> LLMProviderConfig:
    return LLMProviderConfig(model="gemini-2.5-flash", **fields)


def test_the_process_key_applies_when_the_provider_names_none() -> None:
    endpoint = endpoint_for(provider(), Settings(GEMINI_API_KEY="process", GEMINI_BASE_URL="u"))
    assert endpoint.api_key is not None and endpoint.api_key.get_secret_value() == "process"
    assert endpoint.base_url == "u"


def test_the_provider_secret_wins_over_the_process_key(
    secret_manager: SecretManagerStandIn,
) -> None:
    settings = Settings(GEMINI_API_KEY="process", GOOGLE_CLOUD_PROJECT="proj-a")
    endpoint = endpoint_for(provider(api_key=SecretRef(secret="team-key")), settings)
    assert endpoint.api_key is not None and endpoint.api_key.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(endpoint)


def test_vertex_settings_fill_what_the_provider_leaves_out() -> None:
    settings = Settings(
        GEMINI_API_KEY="process",
        GOOGLE_CLOUD_PROJECT="proj-a",
        TARSY_VERTEX_PROJECT="vx",
        TARSY_VERTEX_LOCATION="us-central1",
    )
    own_location = endpoint_for(provider(vertex_location="europe-west4"), settings)
    assert (own_location.api_key, own_location.project, own_location.location) == (
        None,
        "vx",
        "europe-west4",
    )
    no_vertex = Settings(
        GEMINI_API_KEY=None, GOOGLE_CLOUD_PROJECT="proj-a", TARSY_VERTEX_PROJECT=None
    )
    assert endpoint_for(provider(), no_vertex).project == "proj-a"


def test_cache_keys_tell_endpoints_apart() -> None:
    settings = Settings(GEMINI_API_KEY="process")
    assert (
        endpoint_for(provider(), settings).cache_key()
        == endpoint_for(provider(temperature=0.2), settings).cache_key()
    )
    assert (
        endpoint_for(provider(), settings).cache_key()
        != endpoint_for(provider(vertex_project="p"), settings).cache_key()
    )

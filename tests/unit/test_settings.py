"""Process settings and CLI client settings, read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tarsy.settings import (
    ALL_FUNCTIONS,
    CLIENT_VARIABLES,
    Settings,
    env_names,
    functions_reading,
    get_settings,
    unknown_tarsy_variables,
)
from tarsy_dev.client_settings import ClientSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No inherited variable and no .local/stack.env may leak into a test."""
    for field in Settings.model_fields:
        for name in env_names(field):
            monkeypatch.delenv(name, raising=False)
    for name in ("TARSY_INGEST_URL", "TARSY_API_URL", "TARSY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    settings = Settings()
    assert settings.project_id == "tarsy-local"
    assert settings.firestore_database == "(default)"
    assert settings.steps_topic == "tarsy-steps"
    assert settings.api_key is None
    assert settings.auth_disabled is False
    assert settings.max_alert_bytes == 1024 * 1024
    assert settings.gemini_api_key is None
    assert settings.vertex_location == "us-central1"
    assert settings.default_model == "gemini-2.5-flash"
    assert settings.step_lease_seconds == 45
    assert settings.step_due_seconds == 45
    assert settings.step_timeout_seconds == 540
    assert settings.log_format == "json"


def test_reads_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "prod-project")
    monkeypatch.setenv("TARSY_API_KEY", "s3cret")
    monkeypatch.setenv("TARSY_AUTH_DISABLED", "true")
    monkeypatch.setenv("TARSY_MAX_ALERT_BYTES", "2048")
    monkeypatch.setenv("TARSY_LOG_FORMAT", "console")
    monkeypatch.setenv("TARSY_STEP_LEASE_SECONDS", "30")
    settings = Settings()
    assert settings.project_id == "prod-project"
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "s3cret"
    assert settings.auth_disabled is True
    assert settings.max_alert_bytes == 2048
    assert settings.log_format == "console"
    assert settings.step_lease_seconds == 30


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("GOOGLE_CLOUD_PROJECT", "project_id"),
        ("GCP_PROJECT", "project_id"),
        ("GEMINI_API_KEY", "gemini_api_key"),
        ("GOOGLE_API_KEY", "gemini_api_key"),
        ("TARSY_VERTEX_LOCATION", "vertex_location"),
        ("GOOGLE_CLOUD_LOCATION", "vertex_location"),
    ],
)
def test_alias_choices_each_feed_the_field(
    monkeypatch: pytest.MonkeyPatch, variable: str, field: str
) -> None:
    monkeypatch.setenv(variable, "value-1")
    value = getattr(Settings(), field)
    raw = value.get_secret_value() if hasattr(value, "get_secret_value") else value
    assert raw == "value-1"


def test_first_alias_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "first")
    monkeypatch.setenv("GCP_PROJECT", "second")
    assert Settings().project_id == "first"


def test_an_explicit_value_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TARSY_DEFAULT_MODEL", "from-env")
    monkeypatch.setenv("GCP_PROJECT", "from-env")
    settings = Settings(default_model="given", GOOGLE_CLOUD_PROJECT="given")
    assert (settings.default_model, settings.project_id) == ("given", "given")


def test_a_list_setting_reads_comma_separated_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TARSY_ALLOWED_RUNBOOK_DOMAINS", " GitHub.com, docs.example.org ,")
    assert Settings().allowed_runbook_domains == ("github.com", "docs.example.org")


def test_the_environment_is_read_when_settings_are_built_not_when_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = Settings()
    monkeypatch.setenv("TARSY_LOG_LEVEL", "DEBUG")
    assert (first.log_level, Settings().log_level) == ("INFO", "DEBUG")


def test_secrets_are_not_shown() -> None:
    settings = Settings(TARSY_API_KEY="hunter2", GEMINI_API_KEY="g-key")
    assert "hunter2" not in repr(settings)
    assert "g-key" not in str(settings)
    assert "hunter2" not in settings.model_dump_json()


def test_init_by_alias_or_field_name() -> None:
    assert Settings(TARSY_DEFAULT_MODEL="gemini-2.5-pro").default_model == "gemini-2.5-pro"
    assert Settings(default_model="gemini-3-pro").default_model == "gemini-3-pro"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TARSY_MAX_ALERT_BYTES", "0"),
        ("TARSY_MAX_ALERT_BYTES", "-5"),
        ("TARSY_STEP_LEASE_SECONDS", "0"),
        ("TARSY_LOG_FORMAT", "xml"),
        ("TARSY_AUTH_DISABLED", "maybe"),
    ],
)
def test_invalid_values_rejected(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError):
        Settings()


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.project_id = "other"  # type: ignore[misc]


def test_get_settings_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    get_settings.cache_clear()
    try:
        monkeypatch.setenv("TARSY_STEPS_TOPIC", "topic-a")
        first = get_settings()
        monkeypatch.setenv("TARSY_STEPS_TOPIC", "topic-b")
        assert get_settings() is first
        assert first.steps_topic == "topic-a"
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("project_id", ["GOOGLE_CLOUD_PROJECT", "GCP_PROJECT"]),
        ("api_key", ["TARSY_API_KEY"]),
        ("gemini_api_key", ["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
        ("vertex_location", ["TARSY_VERTEX_LOCATION", "GOOGLE_CLOUD_LOCATION"]),
        ("max_alert_bytes", ["TARSY_MAX_ALERT_BYTES"]),
    ],
)
def test_env_names(field: str, names: list[str]) -> None:
    assert env_names(field) == names


@pytest.mark.parametrize(
    ("field", "functions"),
    [
        ("project_id", list(ALL_FUNCTIONS)),
        ("api_key", ["ingest", "api"]),
        ("public_api_url", list(ALL_FUNCTIONS)),  # status_url at ingest, links in Slack
        ("slack_channel", ["step", "api"]),
        ("telemetry_cloud", list(ALL_FUNCTIONS)),
        ("gemini_api_key", ["step"]),
        ("step_lease_seconds", ["step", "api"]),
        ("sweeper_invoker", ["api"]),
    ],
)
def test_functions_reading(field: str, functions: list[str]) -> None:
    assert functions_reading(field) == functions


def test_every_field_names_known_functions_and_env_variables() -> None:
    for field in Settings.model_fields:
        functions = functions_reading(field)
        assert functions, field
        assert set(functions) <= set(ALL_FUNCTIONS), field
        assert all(name.isupper() for name in env_names(field)), field


def test_env_variable_names_are_unique_across_fields() -> None:
    names = [name for field in Settings.model_fields for name in env_names(field)]
    assert len(names) == len(set(names))


def test_unknown_field_raises_key_error() -> None:
    with pytest.raises(KeyError):
        env_names("nope")


# ─── ClientSettings ───────────────────────────────────────────────────────────


def test_client_settings_empty_by_default() -> None:
    settings = ClientSettings()
    assert (settings.ingest_url, settings.api_url, settings.api_key) == (None, None, None)


def test_client_settings_from_stack_env_file(tmp_path: Path) -> None:
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "stack.env").write_text(
        "TARSY_INGEST_URL=http://127.0.0.1:8081\n"
        "TARSY_API_URL=http://127.0.0.1:8082\n"
        "TARSY_API_KEY=local-key\n"
        "UNRELATED=1\n"
    )
    settings = ClientSettings()
    assert settings.ingest_url == "http://127.0.0.1:8081"
    assert settings.api_url == "http://127.0.0.1:8082"
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "local-key"


def test_client_settings_environment_beats_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "stack.env").write_text(
        "TARSY_INGEST_URL=http://from-file\nTARSY_API_URL=http://api-from-file\n"
    )
    monkeypatch.setenv("TARSY_INGEST_URL", "http://from-env")
    settings = ClientSettings()
    assert settings.ingest_url == "http://from-env"
    assert settings.api_url == "http://api-from-file"


def test_the_cli_variables_known_to_the_functions_are_the_clients_own() -> None:
    client = {
        name for field in ClientSettings.model_fields for name in env_names(field, ClientSettings)
    }
    settings = {name for field in Settings.model_fields for name in env_names(field)}
    assert client - settings == CLIENT_VARIABLES


def test_misspelt_tarsy_variables_are_found() -> None:
    environ = {
        "TARSY_DEFAULT_MODLE": "gemini-2.5-pro",  # the typo
        "TARSY_DEFAULT_MODEL": "gemini-2.5-flash",
        "TARSY_API_URL": "http://127.0.0.1:1",  # a CLI setting is known too
        "TARSY_VERTEX_PROJECT": "p",
        "GOOGLE_CLOUD_PROJECT": "p",
        "PATH": "/bin",
    }
    assert unknown_tarsy_variables(environ) == ["TARSY_DEFAULT_MODLE"]

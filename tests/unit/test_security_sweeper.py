"""The sweeper's token check fails closed (issue 42): no audience, no start and no sweep."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from tarsy.errors import AuthError
from tarsy.http.request import check_sweeper
from tarsy.settings import Settings, get_settings

INVOKER = "scheduler@tarsy-prod.iam.gserviceaccount.com"


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TARSY_SWEEPER_AUDIENCE", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize("audience", ["", "   "])
def test_an_invoker_without_an_audience_is_a_configuration_error(audience: str) -> None:
    with pytest.raises(ValidationError, match="TARSY_SWEEPER_AUDIENCE is empty"):
        Settings(TARSY_SWEEPER_INVOKER=INVOKER, TARSY_SWEEPER_AUDIENCE=audience)


def test_the_process_refuses_to_start_when_its_environment_says_so(
    monkeypatch: pytest.MonkeyPatch, fresh_settings: None
) -> None:
    monkeypatch.setenv("TARSY_SWEEPER_INVOKER", INVOKER)
    with pytest.raises(ValidationError, match="TARSY_SWEEPER_INVOKER is set"):
        get_settings()


def test_an_invoker_with_its_audience_and_no_invoker_at_all_both_load() -> None:
    audience = "https://tarsy.example.com"
    settings = Settings(TARSY_SWEEPER_INVOKER=INVOKER, TARSY_SWEEPER_AUDIENCE=audience)
    assert settings.sweeper_audience == audience
    assert Settings(TARSY_SWEEPER_INVOKER="").sweeper_audience == ""  # the API key, locally


def test_a_sweep_with_no_audience_to_check_is_refused_before_any_token_is_read() -> None:
    # Settings that escaped validation (copied with an update) still refuse every token.
    settings = Settings(
        TARSY_SWEEPER_INVOKER=INVOKER, TARSY_SWEEPER_AUDIENCE="https://tarsy.example.com"
    ).model_copy(update={"sweeper_audience": ""})
    with pytest.raises(AuthError, match="audience is not configured"):
        check_sweeper({"authorization": "Bearer any.token.at-all"}, settings)

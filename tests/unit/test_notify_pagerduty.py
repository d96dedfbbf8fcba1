"""The PagerDuty note's pure parts: which session gets one, what it says, how it is found again."""

from __future__ import annotations

from pydantic import SecretStr

from tarsy.config.schema import TarsyConfig
from tarsy.models import ExecutionStatus, Session
from tarsy.notify.pagerduty import (
    MAX_NOTE_CHARS,
    build_note,
    find_posted,
    incident_of,
    session_marker,
    target_for,
)
from tarsy.settings import Settings


def session(source: str = "pagerduty", data: str = '{"incident_id": "Q1ABC"}') -> Session:
    return Session(
        session_id="s-1",
        alert_type="kubernetes",
        alert_data=data,
        source=source,
        chain_id="default",
        status=ExecutionStatus.COMPLETED,
        executive_summary="The config map lost DB_URL.",
    )


def opted_in(value: bool) -> TarsyConfig:
    return TarsyConfig.model_validate({"alert_sources": {"pagerduty": {"incident_notes": value}}})


def settings(**fields: object) -> Settings:
    base: dict[str, object] = {
        "pagerduty_api_token": SecretStr("k"),
        "pagerduty_from_email": "bot@example.com",
    }
    return Settings().model_copy(update={**base, **fields})


def test_only_a_pagerduty_session_that_names_its_incident_has_one() -> None:
    assert incident_of(session()) == "Q1ABC"
    assert incident_of(session(source="api")) is None
    assert incident_of(session(data="not json")) is None
    assert incident_of(session(data='{"incident_id": ""}')) is None


def test_a_note_needs_the_opt_in_a_key_and_a_from_address() -> None:
    target = target_for(session(), settings(), opted_in(True))
    assert target is not None and target.incident_id == "Q1ABC"
    assert target_for(session(), settings(), opted_in(False)) is None
    assert target_for(session(), settings(pagerduty_from_email=""), opted_in(True)) is None
    assert target_for(session(), settings(pagerduty_api_token=None), opted_in(True)) is None


def test_the_note_carries_the_summary_the_page_and_the_marker_within_pagerdutys_limit() -> None:
    note = build_note(session(), "https://tarsy.example/ui/sessions/s-1")
    assert "The config map lost DB_URL." in note
    assert "https://tarsy.example/ui/sessions/s-1" in note
    assert session_marker("s-1") in note

    long = session().model_copy(update={"executive_summary": "x" * 100_000})
    cut = build_note(long, "https://tarsy.example/ui/sessions/s-1")
    assert len(cut) <= MAX_NOTE_CHARS
    assert session_marker("s-1") in cut and "truncated" in cut


def test_an_earlier_note_is_found_by_its_marker_only() -> None:
    notes = [
        {"id": "P1", "content": "a person's note"},
        {"id": "P2", "content": f"tarsy {session_marker('s-2')}"},
        {"id": "P3", "content": f"tarsy {session_marker('s-1')}"},
    ]
    assert find_posted(notes, "s-1") == "P3"
    assert find_posted(notes[:2], "s-1") is None

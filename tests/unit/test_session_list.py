"""The session listing's query parsing, cursor and paging (pure; the emulator half is in
tests/integration/test_session_list.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tarsy.commands.session_list import parse_query
from tarsy.errors import InputError
from tarsy.models import ExecutionStatus
from tarsy.persistence.session_list import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    SessionCursor,
    SessionQuery,
    SessionSummary,
    page_of,
)

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def summary(n: int, **fields: object) -> SessionSummary:
    return SessionSummary.model_validate(
        {
            "session_id": f"s{n:03d}",
            "alert_type": "PodCrashLooping",
            "status": "completed",
            "created_at": T0 - timedelta(minutes=n),
            **fields,
        }
    )


def details(error: InputError) -> dict[str, str]:
    assert isinstance(error.details, list)
    return {d["field"]: d["message"] for d in error.details}


def test_no_parameters_is_the_first_page_of_everything() -> None:
    query = parse_query("")
    assert query == SessionQuery()
    assert query.limit == DEFAULT_LIMIT
    assert query.equality_filters() == {}


def test_every_filter_is_read() -> None:
    cursor = SessionCursor(created_at=T0, session_id="s001").encode()
    query = parse_query(
        "status=failed&alert_type=PodCrashLooping&source=alertmanager&verdict=wrong"
        f"&since=2025-03-01T00:00:00Z&until=2025-03-02&limit=5&cursor={cursor}"
    )
    assert query.equality_filters() == {
        "status": "failed",
        "alert_type": "PodCrashLooping",
        "source": "alertmanager",
        "verdict": "wrong",
    }
    assert query.since == datetime(2025, 3, 1, tzinfo=UTC)
    assert query.until == datetime(2025, 3, 2, tzinfo=UTC)  # a naive time is UTC
    assert query.limit == 5
    assert query.cursor == SessionCursor(created_at=T0, session_id="s001")


def test_an_offset_time_is_converted_to_utc() -> None:
    query = parse_query("since=2025-03-01T02:00:00%2B02:00")
    assert query.since == datetime(2025, 3, 1, tzinfo=UTC)


def test_empty_values_are_no_filter() -> None:
    assert parse_query("status=&alert_type=&limit=") == SessionQuery()


@pytest.mark.parametrize(
    ("query_string", "field", "fragment"),
    [
        ("status=finished", "status", "Input should be"),
        ("limit=0", "limit", "greater than or equal to 1"),
        (f"limit={MAX_LIMIT + 1}", "limit", f"less than or equal to {MAX_LIMIT}"),
        ("limit=ten", "limit", "valid integer"),
        ("since=yesterday", "since", "datetime"),
        ("cursor=not-a-cursor", "cursor", "not a cursor returned by GET /sessions"),
        ("statu=failed", "statu", "unknown parameter; known: action, actor, alert_type, cursor"),
        ("status=failed&status=completed", "status", "given more than once"),
        ("since=2025-03-02T00:00:00Z&until=2025-03-01T00:00:00Z", "query", "since must be"),
    ],
)
def test_bad_parameters_are_422_with_the_field(
    query_string: str, field: str, fragment: str
) -> None:
    with pytest.raises(InputError) as failure:
        parse_query(query_string)
    assert failure.value.status == 422
    assert fragment in details(failure.value)[field]


def test_all_bad_parameters_are_reported_at_once() -> None:
    with pytest.raises(InputError) as failure:
        parse_query("colour=red&limit=0")
    assert set(details(failure.value)) == {"colour", "limit"}


def test_cursor_round_trips_and_is_url_safe() -> None:
    cursor = SessionCursor(created_at=T0, session_id="6f1c-x_y")
    token = cursor.encode()
    assert token.isascii() and not set(token) & set("+/=&?#")
    assert SessionCursor.decode(token) == cursor


def test_page_of_a_full_read_has_a_cursor_after_its_last_row() -> None:
    rows = [summary(n) for n in range(4)]
    page = page_of(rows, limit=3)
    assert [s.session_id for s in page.sessions] == ["s000", "s001", "s002"]
    assert page.next_cursor is not None
    assert SessionCursor.decode(page.next_cursor) == rows[2].cursor()


@pytest.mark.parametrize("read", [0, 2, 3])
def test_page_of_a_short_read_is_the_last_page(read: int) -> None:
    page = page_of([summary(n) for n in range(read)], limit=3)
    assert len(page.sessions) == read
    assert page.next_cursor is None


def test_summary_defaults_for_older_documents() -> None:
    row = summary(0)
    assert row.source == "api"  # sessions written before sources existed
    assert row.score is None  # nor scoring
    assert row.duration is None  # not completed


def test_summary_duration_from_start_else_creation() -> None:
    started = summary(
        0, started_at=T0 + timedelta(seconds=2), completed_at=T0 + timedelta(seconds=60)
    )
    assert started.duration == timedelta(seconds=58)
    unstarted = summary(0, completed_at=T0 + timedelta(seconds=5))
    assert unstarted.duration == timedelta(seconds=5)


def test_summary_reads_a_stored_status() -> None:
    assert summary(0, status="timed_out").status is ExecutionStatus.TIMED_OUT

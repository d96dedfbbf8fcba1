"""``GET /sessions`` on the Firestore emulator, through the real api function: filters,
newest-first order, and cursor pagination over more sessions than one page."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tarsy.errors import ApiError
from tarsy.models import ExecutionStatus, Session
from tarsy.money import money_of
from tarsy.persistence.session_list import SessionQuery, SessionSummary
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.stack import Stack

from .conftest import signed_in

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
STATUSES = [ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.ACTIVE]
ALERT_TYPES = ["PodCrashLooping", "DiskFull"]
SOURCES = ["api", "alertmanager", "pagerduty", "grafana"]
COUNT = 25


def make_sessions() -> list[Session]:
    """COUNT sessions a minute apart, the filter fields cycling at different periods.

    The last two share a creation time, so the id must break the tie.
    """
    sessions = []
    for n, status, alert_type, source in zip(
        range(COUNT),
        itertools.cycle(STATUSES),
        itertools.cycle(ALERT_TYPES),
        itertools.cycle(SOURCES),
        strict=False,
    ):
        created = T0 + timedelta(minutes=min(n, COUNT - 2))
        sessions.append(
            Session(
                session_id=f"list-{n:03d}",
                alert_type=alert_type,
                alert_data="x" * 2000,
                chain_id="default",
                status=status,
                source=source,
                created_at=created,
                started_at=created + timedelta(seconds=1),
                completed_at=created + timedelta(seconds=30) if status.is_terminal else None,
                cost=n / 1000,
            )
        )
    return sessions


def newest_first(sessions: list[Session]) -> list[str]:
    ordered = sorted(sessions, key=lambda s: (s.created_at, s.session_id), reverse=True)
    return [s.session_id for s in ordered]


@pytest.fixture
async def sessions(stack: Stack, store: Store) -> list[Session]:
    made = make_sessions()
    for session in made:
        await store.create_session(session)
    return made


def all_pages(client: TarsyClient, **filters: object) -> list[list[SessionSummary]]:
    pages: list[list[SessionSummary]] = []
    cursor: str | None = None
    while True:
        page = client.list_sessions(cursor=cursor, **filters)  # type: ignore[arg-type]
        pages.append(page.sessions)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_pages_cover_every_session_once_newest_first(
    sessions: list[Session], client: TarsyClient
) -> None:
    pages = all_pages(client, limit=7)
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    listed = [row.session_id for page in pages for row in page]
    assert listed == newest_first(sessions)
    assert listed[:2] == ["list-024", "list-023"]  # same created_at: the id breaks the tie


def test_a_page_that_ends_exactly_at_the_last_row_has_no_cursor(
    sessions: list[Session], client: TarsyClient
) -> None:
    page = client.list_sessions(limit=COUNT)
    assert len(page.sessions) == COUNT
    assert page.next_cursor is None


def test_rows_carry_the_summary_not_the_alert(sessions: list[Session], stack: Stack) -> None:
    response = httpx.get(
        f"{stack.api_url}/sessions",
        params={"limit": 1},
        headers=signed_in(stack),
    )
    assert response.status_code == 200
    [row] = response.json()["sessions"]
    assert "alert_data" not in row
    newest = next(s for s in sessions if s.session_id == row["session_id"])
    assert SessionSummary.model_validate(row) == SessionSummary.model_validate(
        newest.model_dump(mode="json")
    )


@pytest.mark.parametrize(
    "filters",
    [
        {"status": "failed"},
        {"alert_type": "DiskFull"},
        {"source": "alertmanager"},
        {"status": "completed", "alert_type": "PodCrashLooping"},
        {"status": "active", "source": "pagerduty"},
        {"status": "completed", "alert_type": "DiskFull", "source": "alertmanager"},
    ],
)
def test_filters_paginate_over_the_matching_sessions(
    sessions: list[Session], client: TarsyClient, filters: dict[str, str]
) -> None:
    matching = [
        s
        for s in sessions
        if all(str(getattr(s, name)) == value for name, value in filters.items())
    ]
    assert matching, "the fixture should have a match for every filter"
    pages = all_pages(client, limit=2, **filters)
    listed = [row.session_id for page in pages for row in page]
    assert listed == newest_first(matching)
    assert all(len(page) == 2 for page in pages[:-1])


def test_time_range_is_since_inclusive_until_exclusive(
    sessions: list[Session], client: TarsyClient
) -> None:
    since, until = T0 + timedelta(minutes=5), T0 + timedelta(minutes=12)
    pages = all_pages(client, since=since, until=until, limit=3)
    listed = [row.session_id for page in pages for row in page]
    assert listed == [f"list-{n:03d}" for n in range(11, 4, -1)]


async def test_store_query_with_every_filter_and_a_cursor(
    sessions: list[Session], store: Store
) -> None:
    query = SessionQuery(status=ExecutionStatus.COMPLETED, since=T0, limit=2)
    first = await store.list_sessions(query)
    assert [r.session_id for r in first.sessions] == ["list-024", "list-021"]
    assert first.next_cursor is not None
    second = await store.list_sessions(
        SessionQuery.model_validate({**query.model_dump(), "cursor": first.next_cursor})
    )
    assert [r.session_id for r in second.sessions] == ["list-018", "list-015"]


def test_bad_queries_are_422_and_only_get_is_allowed(
    sessions: list[Session], client: TarsyClient, stack: Stack
) -> None:
    with pytest.raises(ApiError) as failure:
        client.list_sessions(status="finished", limit=0)
    assert failure.value.status == 422
    assert "status:" in str(failure.value) and "limit:" in str(failure.value)
    with pytest.raises(ApiError, match=r"cursor: .*not a cursor"):
        client.list_sessions(cursor="garbage")
    response = httpx.post(f"{stack.api_url}/sessions", headers=signed_in(stack))
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"
    unauthenticated = httpx.get(f"{stack.api_url}/sessions")
    assert unauthenticated.status_code == 401


def test_a_session_from_ingest_is_listed_with_source_api(stack: Stack, client: TarsyClient) -> None:
    submitted = client.submit({"alert_type": "ListedAlert", "data": "from ingest"})
    *_, view = client.watch(submitted.session_id, poll_interval=0.25, timeout=120)
    page = client.list_sessions(alert_type="ListedAlert", source="api")
    [row] = page.sessions
    assert row.session_id == submitted.session_id
    assert row.status is view.status is ExecutionStatus.COMPLETED
    assert row.duration is not None and row.cost == money_of(view.session["cost"])

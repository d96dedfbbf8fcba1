"""The audit page (issue 42, point 3): its shell holds no data, its rows are an admin's alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import cast

import pytest

from tarsy.app import Deps
from tarsy.http.request import HttpRequest
from tarsy.models import utcnow
from tarsy.persistence.audit_log import AuditEntry, AuditPage, AuditQuery, audit_page_of
from tarsy.persistence.ports import Persistence
from tarsy.web.pages import CONTENT_SECURITY_POLICY, WebResponse, handle
from tests.unit.signin import ADMIN, RESPONDER, VIEWER, SignIn, signin_server

SCRIPT = "<script>alert('audit')</script>"


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


def entry(n: int, action: str = "feedback", actor: str = RESPONDER) -> AuditEntry:
    return AuditEntry(
        action=action, actor=actor, role="responder", detail=f"wrong: {SCRIPT}",
        at=utcnow() - timedelta(minutes=n), session_id=f"s-{n}", path=f"sessions/s-{n}/audit/{n}",
    )  # fmt: skip


class AuditStore:
    """The audit across sessions, from a list; remembers the queries it ran."""

    def __init__(self, entries: list[AuditEntry]) -> None:
        self.entries = entries
        self.queries: list[AuditQuery] = []

    async def list_all_audit(self, query: AuditQuery) -> AuditPage:
        self.queries.append(query)
        rows = [
            e for e in self.entries
            if query.actor in (None, e.actor) and query.action in (None, e.action)
        ]  # fmt: skip
        return audit_page_of(rows[: query.limit + 1], query.limit)


async def call(
    signin: SignIn, store: AuditStore, path: str, query: str, user: str | None
) -> WebResponse:
    headers = {} if user is None else signin.headers(user)
    request = HttpRequest(method="GET", path=path, query_string=query, headers=headers)
    deps = cast(
        Deps, type("D", (), {"settings": signin.settings(), "store": cast(Persistence, store)})()
    )
    return await handle(request, deps)


async def test_the_audit_shell_needs_no_sign_in_and_holds_no_data(signin: SignIn) -> None:
    store = AuditStore([entry(1)])
    shell = await call(signin, store, "/ui/audit", "", None)
    assert shell.status == 200 and store.queries == []
    assert b"s-1" not in shell.body and b'data-page="audit"' in shell.body
    assert b'src="../ui/static/audit.js"' in shell.body
    assert shell.to_framework()[2]["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    script = await call(signin, store, "/ui/static/audit.js", "", None)
    assert script.status == 200 and script.content_type.startswith("text/javascript")


@pytest.mark.parametrize("user", [RESPONDER, VIEWER])
async def test_only_an_admin_gets_the_rows(signin: SignIn, user: str) -> None:
    store = AuditStore([entry(1)])
    refused = await call(signin, store, "/ui/data/audit", "", user)
    assert refused.status == 403 and store.queries == []
    assert b'"required_role":"admin"' in refused.body.replace(b" ", b"")


async def test_an_admin_gets_escaped_rows_filtered_and_a_next_page(signin: SignIn) -> None:
    store = AuditStore([entry(1), entry(2), entry(3, "erase", ADMIN)])
    page = await call(signin, store, "/ui/data/audit", "action=feedback&limit=1", ADMIN)
    assert page.status == 200, page.body
    payload = json.loads(page.body)
    assert "<script" not in payload["html"] and "&lt;script&gt;" in payload["html"]
    assert 'href="sessions/s-1"' in payload["html"] and "s-2" not in payload["html"]
    assert payload["next_cursor"] is not None and payload["who"]["role"] == "admin"
    [query] = store.queries
    assert (query.action, query.limit) == ("feedback", 1)
    bad = await call(signin, store, "/ui/data/audit", "action=delete_everything", ADMIN)
    assert bad.status == 422


def test_a_cursor_round_trips_and_a_query_reads_its_time_range_in_utc() -> None:
    rows = [entry(1), entry(2)]
    page = audit_page_of(rows, 1)
    assert page.next_cursor is not None and [e.session_id for e in page.entries] == ["s-1"]
    query = AuditQuery.model_validate({"cursor": page.next_cursor, "actor": " Rita@Example.COM "})
    assert query.cursor == rows[0].cursor() and query.actor == "rita@example.com"
    naive = AuditQuery.model_validate({"since": "2026-12-01T10:00"})
    assert naive.since is not None and naive.since.utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="since must be earlier"):
        AuditQuery.model_validate({"since": "2026-12-02T00:00", "until": "2026-12-01T00:00"})
    with pytest.raises(ValueError, match="not a cursor"):
        AuditQuery.model_validate({"cursor": "not-one"})
    assert audit_page_of(rows, 2).next_cursor is None

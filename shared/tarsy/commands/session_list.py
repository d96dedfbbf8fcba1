"""``GET /sessions`` and ``GET /audit``: a listing query read from a query string.

Design constraint: the query, its cursor and its page are persistence's
vocabulary (:mod:`tarsy.persistence.session_list`), which the store runs; the
doors that list (the api, the pages) call :func:`list_sessions` and
:func:`list_audit`, which parse what a caller sent into that query, the same way.
"""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import parse_qs

from pydantic import BaseModel, ValidationError

from tarsy.errors import InputError
from tarsy.persistence.audit_log import AuditPage, AuditQuery
from tarsy.persistence.ports import SessionPages
from tarsy.persistence.session_list import SessionPage, SessionQuery

QUERY_PARAMETERS = frozenset(SessionQuery.model_fields)

_Query = TypeVar("_Query", bound=BaseModel)


async def list_sessions(store: SessionPages, query_string: str) -> SessionPage:
    """One page of sessions, as ``query_string`` asks (the api's JSON and the pages' rows).

    Raises:
        InputError: 422 for a bad query, before anything is read.
    """
    return await store.list_sessions(parse_query(query_string))


async def list_audit(store: SessionPages, query_string: str) -> AuditPage:
    """One page of the audit across sessions, as ``query_string`` asks (the api and the pages).

    Raises:
        InputError: 422 for a bad query, before anything is read.
    """
    return await store.list_all_audit(parse_audit_query(query_string))


def parse_query(query_string: str) -> SessionQuery:
    """The listing query of a ``GET /sessions`` query string.

    Args:
        query_string: The raw query string (``status=completed&limit=10``).

    Returns:
        The validated query.

    Raises:
        InputError: 422 with one entry per bad parameter (unknown, repeated, invalid).
    """
    return _parse(query_string, SessionQuery, "invalid session query")


def parse_audit_query(query_string: str) -> AuditQuery:
    """The query of a ``GET /audit`` query string (actor, action, since, until, limit, cursor).

    Raises:
        InputError: 422 with one entry per bad parameter (unknown, repeated, invalid).
    """
    return _parse(query_string, AuditQuery, "invalid audit query")


def _parse(query_string: str, model: type[_Query], what: str) -> _Query:
    """``model`` from a query string: each parameter once, known, valid; '' is no filter."""
    known = frozenset(model.model_fields)
    values = parse_qs(query_string, keep_blank_values=True)
    details: list[dict[str, str]] = []
    for name in sorted(values):
        if name not in known:
            allowed = ", ".join(sorted(known))
            details.append({"field": name, "message": f"unknown parameter; known: {allowed}"})
        elif len(values[name]) > 1:
            details.append({"field": name, "message": "given more than once"})
    single = {name: items[0] for name, items in values.items() if name in known}
    # An empty value means "no filter" (?status=&alert_type=x), as forms send it.
    given = {name: value for name, value in single.items() if value != ""}
    try:
        query = model.model_validate(given)
    except ValidationError as e:
        details.extend(
            {"field": ".".join(str(p) for p in err["loc"]) or "query", "message": err["msg"]}
            for err in e.errors()
        )
        query = None
    if details or query is None:
        raise InputError(what, status=422, details=details)
    return query

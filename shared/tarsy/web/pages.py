"""The ``/ui/`` routes of the api function: page shells, assets, and the fragments they poll.

Design constraint: people sign in through Identity-Aware Proxy, which puts
its signed header on every request of the browser, so the pages never ask for
a key and never accept one: a shell (``/ui/``, ``/ui/sessions/{id}``) and the
assets carry no session data; the data comes from ``/ui/data/...``, which
verifies the proxy's header and the viewer role exactly as the api routes do,
and says who is signed in and what their role lets them do. Every response
carries a strict Content-Security-Policy: scripts, styles and fetches from
this origin only, no inline script or style, no frames, no foreign images.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.access.iap import authenticate
from tarsy.access.roles import Principal, Role
from tarsy.app import Deps
from tarsy.commands.session_list import list_sessions
from tarsy.errors import InputError
from tarsy.http.request import HttpRequest
from tarsy.http.routes import PAGE_DATA_ROUTES, find_route
from tarsy.models import AuditEvent, ExecutionStatus, utcnow
from tarsy.web import render as r
from tarsy.web.audit_page import AUDIT_PAGE, audit_data, audit_shell
from tarsy.web.links import UI_PREFIX
from tarsy.web.session_page import SessionUpdate, dumps, score_view, session_update, stage_label

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_ASSET_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

_SESSION_PAGE = re.compile(r"^/ui/sessions/(?P<session_id>[\w\-]+)$")
_ASSET = re.compile(r"^/ui/static/(?P<name>[\w\-.]+)$")


class WebResponse(DeferredModel):
    """A response of the browser routes: any content type, security headers added."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = Field(default_factory=dict)

    def to_framework(self) -> tuple[bytes, int, dict[str, str]]:
        """``(body, status, headers)`` as functions-framework handlers return them."""
        headers = {"Content-Type": self.content_type, **_SECURITY_HEADERS, **self.headers}
        return self.body, self.status, headers


def _html(body: str, status: int = 200) -> WebResponse:
    return WebResponse(
        status=status,
        body=body.encode(),
        content_type="text/html; charset=utf-8",
        headers={"Cache-Control": "no-store"},
    )


def _json(payload: object, status: int = 200) -> WebResponse:
    return WebResponse(
        status=status,
        body=dumps(payload).encode(),
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _root(path: str) -> str:
    """The relative way from the page at ``path`` up to the api's root (its base URL).

    Relative, so the pages work wherever the function is mounted (a
    cloudfunctions.net URL ends in the function's name; a local one does not).
    """
    return "../" * (path.count("/") - 1)


@cache
def _assets() -> dict[str, bytes]:
    # Read once per process: the package's own files, named by an allow-list of what exists.
    folder = resources.files("tarsy.web").joinpath("static")
    return {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}


def _asset(name: str) -> WebResponse:
    body = _assets().get(name)
    suffix = name[name.rfind(".") :] if "." in name else ""
    if body is None or suffix not in _ASSET_TYPES:
        return _html(r.render("error.html", root="../../", message=f"no asset {name!r}"), 404)
    return WebResponse(
        status=200,
        body=body,
        content_type=_ASSET_TYPES[suffix],
        headers={"Cache-Control": "public, max-age=300"},
    )


def _error(e: InputError) -> WebResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="tarsy"'} if e.status == 401 else {}
    payload: dict[str, Any] = {"error": {"status": e.status, "message": str(e)}}
    if e.details is not None:
        payload["error"]["details"] = e.details
    response = _json(payload, e.status)
    response.headers.update(headers)
    return response


def _who(principal: Principal) -> dict[str, str | None]:
    return {"email": principal.email, "role": principal.role.value if principal.role else None}


async def _list_data(request: HttpRequest, deps: Deps, principal: Principal) -> WebResponse:
    page = await list_sessions(deps.store, request.query_string)
    now = utcnow()
    html = r.render("_rows.html", page=page, now=now)
    return _json(
        {
            "html": html,
            "next_cursor": page.next_cursor,
            "count": len(page.sessions),
            "who": _who(principal),
        }
    )


def _update_payload(
    update: SessionUpdate,
    audit: list[AuditEvent],
    principal: Principal,
    now: datetime,
    scoring_off: str | None = None,
) -> dict[str, Any]:
    session = update.session
    roles = {e.execution_id: e.role for e in update.executions}
    # Buttons a viewer's role would only have refused are not offered.
    acts = principal.role is not None and principal.role.allows(Role.RESPONDER)
    running_agents = not session.status.is_terminal
    sections = [
        {
            "id": e.execution_id,
            "head": r.render(
                "_section_head.html",
                execution=e,
                path=update.paths.get(e.execution_id, e.agent),
                stage=stage_label(e.stage, update.stages),
            ),
            "live": r.render("_live.html", progress=update.progress.get(e.execution_id)),
        }
        for e in update.executions
    ]
    events = [
        {
            "section": shown.execution_id,
            "id": f"{shown.execution_id}/{shown.event_id}",
            "html": r.render("_event.html", event=shown.event, role=roles.get(shown.execution_id)),
        }
        for shown in update.events
    ]
    return {
        "status": session.status.value,
        "finished": update.finished,
        "header": r.render("_header.html", session=session, now=now),
        "overview": r.render("_overview.html", session=session, score=score_view(session), now=now),
        "tree": r.render(
            "_tree.html",
            tree=update.tree,
            stages=update.stages,
            stage_label=stage_label,
            cancellable=running_agents,
        ),
        "audit": r.render("_audit.html", audit=audit, now=now),
        "who": _who(principal),
        "actions": {
            "cancel": acts and not session.status.is_terminal,
            "resume": acts and session.status is ExecutionStatus.PAUSED,
            "chat": acts and session.status.is_terminal,
            # The same alert, today's configuration: a new session linked to this one.
            "again": acts and session.status.is_terminal,
            # Right, partly right or wrong, and the real cause: once the analysis is done.
            "feedback": acts and session.status.is_terminal,
            # A deployment whose scoring is off (the stand-in) has no judge to ask.
            "score": acts
            and not scoring_off
            and session.status.is_terminal
            and not (session.score_error or "").startswith("not scored"),
        },
        "sections": sections,
        "events": events,
        "resets": update.resets,
        "cursor": update.cursor.encode(),
    }


async def handle(request: HttpRequest, deps: Deps) -> WebResponse:
    """Serve one browser route of the api function."""
    path = request.path
    if request.method not in ("GET", "HEAD"):
        return _error(InputError("method not allowed", status=405))
    if path == UI_PREFIX:
        # The pages link relatively, from a folder: /ui/.
        return WebResponse(
            status=308, body=b"", content_type="text/plain", headers={"Location": "ui/"}
        )
    if path == UI_PREFIX + "/":
        return _html(r.render("list.html", root=_root(path)))
    if path == AUDIT_PAGE:
        return _html(audit_shell(_root(path)))
    if (asset := _ASSET.match(path)) is not None:
        return _asset(asset["name"])
    if (page := _SESSION_PAGE.match(path)) is not None:
        return _html(r.render("session.html", root=_root(path), session_id=page["session_id"]))
    try:
        route, ids, _ = find_route(PAGE_DATA_ROUTES, "GET", path)
        if route is not None and route.action is not None:
            principal = await authenticate(request.headers, deps.settings)
            principal.require(route.action)
            if route.action == "audit":
                return _json({**await audit_data(request, deps), "who": _who(principal)})
            if "session_id" not in ids:
                return await _list_data(request, deps, principal)
            cursor = parse_qs(request.query_string).get("cursor", [""])[0]
            update = await session_update(deps.store, ids["session_id"], cursor)
            audit = await deps.store.list_audit(ids["session_id"])
            payload = _update_payload(
                update, audit, principal, utcnow(), deps.settings.scoring_off_reason
            )
            return _json(payload)
        return _html(r.render("error.html", root=_root(path), message="no such page"), 404)
    except InputError as e:
        return _error(e)

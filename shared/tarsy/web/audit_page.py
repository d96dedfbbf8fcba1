"""The audit page (``/ui/audit``): who did what, across sessions, for an admin.

Design constraint: like every page, the shell carries no data; its rows come
from ``/ui/data/audit``, which the route table gives the ``audit`` action
(admin only), verified exactly as ``GET /audit`` is, and read by the same
query (:mod:`tarsy.persistence.audit_log`). Every text in a row (an actor, a
detail someone typed) is escaped by the templates.
"""

from __future__ import annotations

from typing import Any

from tarsy.access.roles import RECORDED_ACTIONS
from tarsy.app import Deps
from tarsy.commands.session_list import list_audit
from tarsy.http.request import HttpRequest
from tarsy.models import utcnow
from tarsy.web import render as r

AUDIT_PAGE = "/ui/audit"


def audit_shell(root: str) -> str:
    """The page's HTML: the filters and an empty table its script fills."""
    return r.render("audit.html", root=root, actions=RECORDED_ACTIONS)


async def audit_data(request: HttpRequest, deps: Deps) -> dict[str, Any]:
    """One page of the audit as rows of HTML, and the cursor of the next page."""
    page = await list_audit(deps.store, request.query_string)
    return {
        "html": r.render("_audit_rows.html", page=page, now=utcnow()),
        "next_cursor": page.next_cursor,
        "count": len(page.entries),
    }

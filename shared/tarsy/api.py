"""The api endpoint: read sessions (and, with later issues, act on them)."""

from __future__ import annotations

import logging
import re
from typing import Any

from tarsy.errors import InputError, NotFoundError
from tarsy.http import HttpRequest, HttpResponse, check_api_key, error_response
from tarsy.steps import Deps
from tarsy.store import Store

logger = logging.getLogger(__name__)

_SESSION_PATH = re.compile(r"^/sessions/(?P<session_id>[\w\-]+)$")


async def session_view(store: Store, session_id: str) -> dict[str, Any]:
    """Return a session with its stages, executions and their timelines, in order."""
    session = await store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    stages = await store.list_stages(session_id)
    executions = await store.list_executions(session_id)
    execution_views: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    for execution in executions:
        events = await store.list_timeline(execution.execution_id)
        event_views = [
            {
                **event.model_dump(mode="json"),
                "execution_id": execution.execution_id,
                "stage": execution.stage,
                "agent": execution.agent,
            }
            for event in events
        ]
        execution_views.append({**execution.model_dump(mode="json"), "timeline": event_views})
        timeline.extend(event_views)
    timeline.sort(key=lambda e: (e["created_at"], e["stage"]))
    return {
        "session": session.model_dump(mode="json"),
        "stages": [stage.model_dump(mode="json") for stage in stages],
        "executions": execution_views,
        "timeline": timeline,
    }


async def handle(request: HttpRequest, deps: Deps) -> HttpResponse:
    """Serve one api request."""
    path = request.path.rstrip("/") or "/"
    if path == "/healthz":
        return HttpResponse(status=200, body={"status": "ok"})
    try:
        check_api_key(request.headers, deps.settings)
        match = _SESSION_PATH.match(path)
        if match is None:
            raise InputError(f"no route {request.path!r}", status=404)
        if request.method != "GET":
            raise InputError(
                f"method {request.method} not allowed", status=405, details={"allow": "GET"}
            )
        return HttpResponse(status=200, body=await session_view(deps.store, match["session_id"]))
    except InputError as e:
        return error_response(e)

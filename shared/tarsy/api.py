"""The api endpoint: list sessions, read one, cancel it, resume it, chat, health."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tarsy import transitions
from tarsy.app import Deps
from tarsy.chains import iterate_message, start_chat
from tarsy.errors import InputError, NotFoundError
from tarsy.http import HttpRequest, HttpResponse, check_api_key, check_sweeper, error_response
from tarsy.models import ExecutionStatus, utcnow
from tarsy.session_list import parse_query
from tarsy.store import Store
from tarsy.sweeper import sweep

logger = logging.getLogger(__name__)

_Body = TypeVar("_Body", bound=BaseModel)

_SESSION_PATH = re.compile(
    r"^/sessions/(?P<session_id>[\w\-]+)(?:/(?P<action>cancel|resume|chat))?$"
)


class ChatRequest(BaseModel):
    """``POST /sessions/{id}/chat`` body."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=8000)


class ResumeRequest(BaseModel):
    """``POST /sessions/{id}/resume`` body (optional)."""

    extra_iterations: int | None = Field(default=None, ge=1, le=200)


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


async def cancel(deps: Deps, session_id: str) -> dict[str, Any]:
    """Ask for a session to stop; steps check the flag before each LLM call and publish."""
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if session.status.is_terminal:
        raise InputError(f"session {session_id} is already {session.status.value}", status=409)
    await deps.store.update_session(session_id, transitions.request_cancel(session))
    # Nothing runs for a paused execution: end it here. A running one is marked, so
    # that its step's commit fails its precondition and the step cancels instead.
    now = utcnow()
    for execution in await deps.store.list_executions(session_id):
        if execution.status is ExecutionStatus.PAUSED:
            await deps.store.update_execution(
                execution.execution_id, transitions.cancel_execution(execution, now)
            )
        elif not execution.status.is_terminal and execution.role != "chat":
            await deps.store.update_execution(
                execution.execution_id, transitions.request_cancel_of_execution(execution)
            )
    if session.status is ExecutionStatus.PAUSED:
        await deps.store.update_session(session_id, transitions.cancel_session(session, now))
    logger.info("cancel requested for %s", session_id)
    return {"session_id": session_id, "cancel_requested": True}


async def resume(deps: Deps, session_id: str, request: ResumeRequest) -> dict[str, Any]:
    """Continue a session paused at max_iterations, with more iterations."""
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if session.status is not ExecutionStatus.PAUSED:
        raise InputError(f"session {session_id} is {session.status.value}, not paused", status=409)
    resumed: list[str] = []
    for execution in await deps.store.list_executions(session_id):
        if execution.status is not ExecutionStatus.PAUSED:
            continue
        extra = request.extra_iterations or execution.max_iterations
        await deps.store.update_execution(
            execution.execution_id, transitions.resume_execution(execution, extra)
        )
        if execution.role == "agent" and execution.stage >= 0:
            await deps.store.update_stage(session_id, execution.stage, transitions.resume_stage())
        await deps.bus.publish(iterate_message(execution, execution.step))
        resumed.append(execution.execution_id)
    await deps.store.update_session(session_id, transitions.resume_session(session))
    return {"session_id": session_id, "resumed": resumed}


async def chat(deps: Deps, session_id: str, request: ChatRequest) -> dict[str, Any]:
    """Ask a question about a finished investigation; the answer lands in the timeline."""
    session = await deps.store.get_session(session_id)
    if session is None:
        raise NotFoundError(f"no session {session_id!r}")
    if not session.status.is_terminal or session.status is ExecutionStatus.CANCELLED:
        raise InputError(
            f"session {session_id} is {session.status.value}; ask when it has finished",
            status=409,
        )
    execution = await start_chat(session, request.question, deps)
    return {"session_id": session_id, "execution_id": execution.execution_id}


def _body(request: HttpRequest, model: type[_Body]) -> _Body:
    try:
        payload = json.loads(request.body) if request.body.strip() else {}
        return model.model_validate(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"malformed JSON: {e}", status=400) from e
    except ValidationError as e:
        details = [
            {"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in e.errors()
        ]
        raise InputError("invalid request body", status=422, details=details) from e


async def handle(request: HttpRequest, deps: Deps) -> HttpResponse:
    """Serve one api request."""
    path = request.path.rstrip("/") or "/"
    if path == "/healthz":
        return HttpResponse(status=200, body={"status": "ok"})
    try:
        if path == "/sweep":
            check_sweeper(request.headers, deps.settings)
            if request.method != "POST":
                raise InputError("method not allowed", status=405, details={"allow": "POST"})
            report = await sweep(deps)
            return HttpResponse(status=200, body=report.model_dump())
        check_api_key(request.headers, deps.settings)
        if path == "/sessions":
            if request.method != "GET":
                raise InputError("method not allowed", status=405, details={"allow": "GET"})
            page = await deps.store.list_sessions(parse_query(request.query_string))
            return HttpResponse(status=200, body=page.model_dump(mode="json"))
        match = _SESSION_PATH.match(path)
        if match is None:
            raise InputError(f"no route {request.path!r}", status=404)
        session_id, action = match["session_id"], match["action"]
        allowed = "POST" if action else "GET"
        if request.method != allowed:
            raise InputError(
                f"method {request.method} not allowed", status=405, details={"allow": allowed}
            )
        if action == "cancel":
            return HttpResponse(status=202, body=await cancel(deps, session_id))
        if action == "resume":
            return HttpResponse(
                status=202, body=await resume(deps, session_id, _body(request, ResumeRequest))
            )
        if action == "chat":
            return HttpResponse(
                status=202, body=await chat(deps, session_id, _body(request, ChatRequest))
            )
        return HttpResponse(status=200, body=await session_view(deps.store, session_id))
    except InputError as e:
        return error_response(e)

"""The api endpoint: a table from each route to the role it needs and the command it runs.

Design constraint: the api is a door, not the home of what it does. It checks
who calls (sign-in, same origin, the route's role, :mod:`tarsy.http.routes`),
reads the body, and hands the session's command (:mod:`tarsy.commands`) a
:class:`~tarsy.commands.recorded.Recorder`, so that the action and its audit
record are one commit; the commands are the same ones ingest, Slack, the pages
and the CLI call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from tarsy._pydantic import DeferredModel
from tarsy.access.iap import authenticate
from tarsy.access.roles import Action, Principal, RecordedAction
from tarsy.app import Deps
from tarsy.commands import scheduled
from tarsy.commands.recorded import Recorder
from tarsy.commands.session_list import list_audit, list_sessions
from tarsy.commands.sessions import (
    ChatRequest,
    EraseRequest,
    InvestigateRequest,
    ResumeRequest,
    cancel,
    cancel_agent,
    chat,
    erase,
    give_feedback,
    investigate_again,
    masked_typed_text,
    rescore,
    resume,
    session_view,
)
from tarsy.errors import InputError
from tarsy.feedback import FeedbackRequest
from tarsy.http.request import (
    HttpRequest,
    HttpResponse,
    check_sweeper,
    error_response,
    read_json,
)
from tarsy.http.routes import API_ROUTES, find_route
from tarsy.http.same_origin import check_same_origin

logger = logging.getLogger(__name__)

_Body = TypeVar("_Body", bound=BaseModel)


def _body(request: HttpRequest, model: type[_Body]) -> _Body:
    """The request's JSON body as ``model``: hostile bodies are 4xx (see tarsy.http.json_body)."""
    payload = read_json(request, empty={})
    try:
        return model.model_validate(payload)
    except ValidationError as e:
        details = [
            {"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in e.errors()
        ]
        raise InputError("invalid request body", status=422, details=details) from e


class NoFields(DeferredModel):
    """The body of an action without fields: ``{}``."""

    model_config = ConfigDict(extra="forbid")


def _no_fields(request: HttpRequest) -> None:
    """An action without fields still reads its body: ``{}`` (422 for anything else)."""
    _body(request, NoFields)


# One action on a session, its role already checked: (request, deps, who, the path's ids).
_Act = Callable[[HttpRequest, Deps, Principal, dict[str, str]], Awaitable[HttpResponse]]


def _recorder(principal: Principal, action: RecordedAction, ids: dict[str, str]) -> Recorder:
    """Who gives ``action`` to the path's session: its record is made in the command's commit."""
    return Recorder(principal, action, ids["session_id"])


# The commands are named at call time (not bound into the table) so a test can swap one.
async def _cancel(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    _no_fields(request)
    body = await cancel(deps, ids["session_id"], _recorder(who, "cancel", ids))
    return HttpResponse(status=202, body=body)


async def _cancel_agent(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    _no_fields(request)
    recorder = _recorder(who, "cancel_agent", ids)
    body = await cancel_agent(deps, ids["session_id"], ids["execution_id"], recorder)
    return HttpResponse(status=202, body=body)


async def _resume(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    more = _body(request, ResumeRequest)
    body = await resume(deps, ids["session_id"], more, _recorder(who, "resume", ids))
    return HttpResponse(status=202, body=body)


async def _score(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    _no_fields(request)
    body = await rescore(deps, ids["session_id"], _recorder(who, "score", ids))
    return HttpResponse(status=202, body=body)


async def _investigate(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    why = _body(request, InvestigateRequest).reason
    recorder = Recorder(
        who, "investigate", ids["session_id"], masked_typed_text(deps, why) if why else ""
    )
    body = await investigate_again(deps, ids["session_id"], recorder)
    return HttpResponse(status=202, body=body)


async def _feedback(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    session_id = ids["session_id"]
    feedback = await give_feedback(deps, session_id, _body(request, FeedbackRequest), who)
    return HttpResponse(
        status=200, body={"session_id": session_id, "feedback": feedback.model_dump(mode="json")}
    )


async def _chat(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    question = _body(request, ChatRequest)
    body = await chat(deps, ids["session_id"], question, recorder=_recorder(who, "chat", ids))
    return HttpResponse(status=202, body=body)


async def _erase(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    why = _body(request, EraseRequest)
    await erase(deps, ids["session_id"], why, _recorder(who, "erase", ids))
    return HttpResponse(status=200, body={"session_id": ids["session_id"], "erased": True})


async def _read(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    if "session_id" in ids:
        return HttpResponse(status=200, body=await session_view(deps.store, ids["session_id"]))
    page = await list_sessions(deps.store, request.query_string)
    return HttpResponse(status=200, body=page.model_dump(mode="json"))


async def _audit(
    request: HttpRequest, deps: Deps, who: Principal, ids: dict[str, str]
) -> HttpResponse:
    audit = await list_audit(deps.store, request.query_string)
    return HttpResponse(status=200, body=audit.model_dump(mode="json"))


# The route table's action (and so its role, tarsy.access.roles.REQUIRED_ROLE) -> its command.
COMMANDS: dict[Action, _Act] = {
    "read": _read,
    "audit": _audit,
    "cancel": _cancel,
    "cancel_agent": _cancel_agent,
    "resume": _resume,
    "score": _score,
    "investigate": _investigate,
    "feedback": _feedback,
    "chat": _chat,
    "erase": _erase,
}
# The scheduler's routes -> their command (its OIDC token is checked first).
SCHEDULED: dict[str, Callable[[Deps], Awaitable[dict[str, object]]]] = {
    "/sweep": scheduled.sweep,
    "/retention": scheduled.retention,
}


async def handle(request: HttpRequest, deps: Deps) -> HttpResponse:
    """Serve one api request, as the route table (:mod:`tarsy.http.routes`) says.

    Every route but ``/healthz`` and the scheduler's (``/sweep``, ``/retention``)
    is a person's: the proxy's signed header is verified first (401 without a
    valid one); a state-changing route then refuses, with 403, a request
    another site could have made (:mod:`tarsy.http.same_origin`: JSON only, from
    the api's own origin); then the role the route needs is checked (403 naming
    it). All of it before anything is read or written; an action is recorded
    on its session with who did it, in the commit that does it.
    """
    path = request.path.rstrip("/") or "/"
    try:
        route, ids, allowed = find_route(API_ROUTES, request.method, path)
        if route is None:
            if allowed:
                raise InputError(
                    f"method {request.method} not allowed",
                    status=405,
                    details={"allow": ", ".join(allowed)},
                )
            raise InputError(f"no route {request.path!r}", status=404)
        if route.caller == "anyone":
            return HttpResponse(status=200, body={"status": "ok"})
        if route.caller == "scheduler":
            check_sweeper(request.headers, deps.settings)
            return HttpResponse(status=200, body=await SCHEDULED[route.template](deps))
        principal = await authenticate(request.headers, deps.settings)
        if route.changes_state:
            check_same_origin(request.headers, deps.settings.public_api_url)
        assert route.action is not None  # a person's route names its action (Route checks)
        principal.require(route.action)
        return await COMMANDS[route.action](request, deps, principal, ids)
    except InputError as e:
        return error_response(e)

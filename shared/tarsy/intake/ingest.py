"""The ingest endpoint: validate an alert, create its session, publish the first step.

Every rejection happens before anything is written or published; an alert's
``mcp`` selection is checked against the configuration here (a 422 names an
unknown server or tool, see :mod:`tarsy.tools.selection`). If the
publish fails after the session was written, the session is deleted again, so
no caller ever sees a session that nothing will process.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.errors import InputError
from tarsy.http.json_body import firestore_map_problems
from tarsy.http.request import HttpRequest, HttpResponse, check_api_key, error_response, read_json
from tarsy.intake import routes as alert_routes
from tarsy.intake.sessions import new_session, queue_unavailable
from tarsy.log import fields
from tarsy.models import AlertSubmission, MCPSelection, StepMessage, utcnow
from tarsy.persistence.ports import Persistence, ToolListCache
from tarsy.settings import Settings
from tarsy.tools.masking import Masker
from tarsy.tools.selection import fresh_tool_names, selection_problems, servers_to_check

logger = logging.getLogger(__name__)

ALERTS_PATH = "/alerts"


def _is_json(content_type: str) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def validation_details(error: ValidationError) -> list[dict[str, str]]:
    """Return one ``{field, message, type}`` entry per schema error."""
    return [
        {
            "field": ".".join(str(p) for p in err["loc"]) or "(body)",
            "message": err["msg"],
            "type": err["type"],
        }
        for err in error.errors()
    ]


def parse_submission(request: HttpRequest, settings: Settings) -> AlertSubmission:
    """Check method, auth, size, type, body and schema, in that order; raise InputError.

    The body is read by :func:`tarsy.http.request.read_json` (Content-Encoding, UTF-8,
    depth, numbers and lone surrogates; 400, 413 or 415). ``metadata`` is
    stored as a Firestore map, so what Firestore would refuse in it is a 422
    with field-level details, like a schema error: nothing that passes here
    fails at the write.
    """
    if request.method != "POST":
        raise InputError(
            f"method {request.method} not allowed on {ALERTS_PATH}",
            status=405,
            details={"allow": "POST"},
        )
    check_api_key(request.headers, settings)
    if request.body_too_large or len(request.body) > settings.max_alert_bytes:
        raise InputError(f"body exceeds {settings.max_alert_bytes} bytes", status=413)
    if not _is_json(request.headers.get("content-type", "")):
        raise InputError("content type must be application/json", status=415)
    payload = read_json(request, settings.max_alert_bytes)
    if not isinstance(payload, dict):
        raise InputError(
            "body must be a JSON object",
            status=422,
            details=[{"field": "(body)", "message": "expected an object", "type": "dict_type"}],
        )
    try:
        submission = AlertSubmission.model_validate(payload)
    except ValidationError as e:
        raise InputError(
            "alert does not match the schema", status=422, details=validation_details(e)
        ) from e
    problems = firestore_map_problems(submission.metadata, "metadata")
    if problems:
        raise InputError("metadata cannot be stored as sent", status=422, details=problems)
    return submission


async def check_selection(
    selection: MCPSelection, config: TarsyConfig, store: ToolListCache
) -> None:
    """Reject (422, naming each culprit) an ``mcp`` selection the configuration cannot serve.

    Server names are checked against the configuration; tool names against the
    server's tool list cached in Firestore while it is fresh, read only when the
    alert names tools. Other tool names are checked by the first step (see
    :mod:`tarsy.tools.selection`).
    """
    named = servers_to_check(selection, config.mcp_servers)
    cached = await store.get_tool_lists(named) if named else {}
    known = fresh_tool_names(cached, config.mcp_servers, utcnow())
    problems = selection_problems(selection, config.mcp_servers, known)
    if problems:
        raise InputError(
            "the alert's mcp selection does not match the configuration",
            status=422,
            details=problems,
        )


def status_url(settings: Settings, session_id: str) -> str:
    """Return where the caller can follow the session."""
    return f"{settings.public_api_url.rstrip('/')}/sessions/{session_id}"


async def handle(
    request: HttpRequest,
    settings: Settings,
    config: TarsyConfig,
    store: Persistence,
    bus: Publisher,
) -> HttpResponse:
    """Serve one ingest request."""
    if request.path.rstrip("/") == "/healthz":
        return HttpResponse(status=200, body={"status": "ok"})
    if request.path.rstrip("/").startswith(alert_routes.ROUTE_PREFIX):
        return await alert_routes.handle(request, settings, config, store, bus)
    if request.path.rstrip("/") not in (ALERTS_PATH, ""):
        return error_response(InputError(f"no route {request.path!r}", status=404))
    try:
        submission = parse_submission(request, settings)
        if submission.mcp is not None:
            await check_selection(submission.mcp, config, store)
    except InputError as e:
        logger.info("rejected alert: %s %s", e.status, e)
        return error_response(e)
    session = new_session(
        alert_type=submission.alert_type,
        data_text=submission.data_as_text(),
        data=submission.data,
        config=config,
        settings=settings,
        now=utcnow(),
        masker=Masker(config.alert_masking),
        runbook=submission.runbook,
        mcp=submission.mcp,
        metadata=submission.metadata,
    )
    await store.create_session(session)
    try:
        await bus.publish(StepMessage(session_id=session.session_id, kind="start_session"))
    except Exception:
        await store.delete_session(session.session_id)
        logger.exception("publishing the start of %s failed; session removed", session.session_id)
        return queue_unavailable()
    logger.info(
        "accepted alert %s", submission.alert_type, extra=fields(session_id=session.session_id)
    )
    return HttpResponse(
        status=202,
        body={
            "session_id": session.session_id,
            "status_url": status_url(settings, session.session_id),
        },
    )

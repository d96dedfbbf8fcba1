"""Cloud Function ``ingest`` (HTTP): validate an alert, create its session, publish it."""

from __future__ import annotations

import functions_framework
from flask import Request

from tarsy import telemetry
from tarsy.app import get_deps
from tarsy.http.request import read_request, to_framework_response
from tarsy.intake import ingest as ingest_endpoint
from tarsy.runtime import run_sync


async def _serve(request: Request) -> tuple[str, int, dict[str, str]]:
    deps = await get_deps()
    telemetry.setup(deps.settings, "tarsy-ingest")
    http_request = read_request(request, deps.settings.max_alert_bytes)
    # The root of the session's trace: the start_session publish is its child.
    with telemetry.server_span(
        http_request.method, http_request.path.rstrip("/") or "/", incoming=http_request.headers
    ) as span:
        response = await ingest_endpoint.serve(http_request, deps)
        session_id = response.body.get("session_id")
        span.set_response(response.status, session_id if isinstance(session_id, str) else None)
    return to_framework_response(response)


@functions_framework.http
def ingest(request: Request) -> tuple[str, int, dict[str, str]]:
    """Entry point: POST /alerts (and each source's route), POST /slack/events, GET /healthz."""
    try:
        return run_sync(_serve(request))
    finally:
        telemetry.flush()

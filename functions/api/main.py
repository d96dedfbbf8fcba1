"""Cloud Function ``api`` (HTTP): read sessions; cancel, resume, chat and sweep; the pages."""

from __future__ import annotations

import functions_framework
from flask import Request

from tarsy import telemetry
from tarsy.api import handlers as api_endpoint
from tarsy.app import get_deps
from tarsy.http.request import read_request, to_framework_response
from tarsy.runtime import run_sync
from tarsy.web.links import is_web_path, span_route

# The api takes JSON bodies: chat questions (up to 100,000 characters), resume options.
# Room for a 100,000-character question (up to 4 bytes each in UTF-8, escaped in JSON).
_MAX_BODY_BYTES = 1024 * 1024


async def _serve(request: Request) -> tuple[str | bytes, int, dict[str, str]]:
    deps = await get_deps()
    telemetry.setup(deps.settings, "tarsy-api")
    http_request = read_request(request, _MAX_BODY_BYTES)
    if is_web_path(http_request.path):
        # Imported here: only the pages need the templates and the Markdown renderer.
        from tarsy.web import pages

        route = span_route(http_request.path)
        with telemetry.server_span(http_request.method, route, incoming=http_request.headers) as s:
            page = await pages.handle(http_request, deps)
            s.set_response(page.status, None)
        return page.to_framework()
    path = http_request.path.rstrip("/") or "/"
    route = span_route(path)
    with telemetry.server_span(http_request.method, route, incoming=http_request.headers) as span:
        response = await api_endpoint.handle(http_request, deps)
        session_id = path.split("/")[2] if route.startswith("/sessions/{") else None
        span.set_response(response.status, session_id)
    return to_framework_response(response)


@functions_framework.http
def api(request: Request) -> tuple[str | bytes, int, dict[str, str]]:
    """Entry point: GET /sessions[/{id}], POST /sessions/{id}/cancel|resume, GET /healthz, /ui/."""
    try:
        return run_sync(_serve(request))
    finally:
        telemetry.flush()

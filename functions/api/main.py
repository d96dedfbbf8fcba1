"""Cloud Function ``api`` (HTTP): read sessions; cancel, resume, chat and sweep."""

from __future__ import annotations

import functions_framework
from flask import Request

from tarsy import api as api_endpoint
from tarsy.app import get_deps
from tarsy.http import read_request, to_framework_response
from tarsy.runtime import run_sync

# The api takes small JSON bodies only (chat questions, resume options).
_MAX_BODY_BYTES = 64 * 1024


async def _serve(request: Request) -> tuple[str, int, dict[str, str]]:
    deps = await get_deps()
    response = await api_endpoint.handle(read_request(request, _MAX_BODY_BYTES), deps)
    return to_framework_response(response)


@functions_framework.http
def api(request: Request) -> tuple[str, int, dict[str, str]]:
    """Entry point: GET /sessions[/{id}], POST /sessions/{id}/cancel|resume, GET /healthz."""
    return run_sync(_serve(request))

"""The ingest endpoint: every alert route, behind one door.

Design constraint: ``POST /alerts`` and the native senders' routes are the same
intake (:mod:`tarsy.intake.routes`): each path is one
:class:`~tarsy.intake.sources.receiver.AlertReceiver` of
:mod:`tarsy.intake.sources.registry`, checked in one order with nothing
written on any rejection, its sessions created, started and, when the start
cannot be published, removed again by one piece of code. This module only
answers health checks and hands everything else to the routes.
"""

from __future__ import annotations

from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake import routes
from tarsy.persistence.ports import Persistence
from tarsy.settings import Settings

__all__ = ["handle"]


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
    return await routes.handle(request, settings, config, store, bus)

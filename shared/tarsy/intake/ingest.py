"""The ingest endpoint: every alert route, behind one door.

Design constraint: ``POST /alerts`` and the native senders' routes are the same
intake (:mod:`tarsy.intake.routes`): each path is one
:class:`~tarsy.intake.sources.receiver.AlertReceiver` of
:mod:`tarsy.intake.sources.registry`, checked in one order with nothing
written on any rejection, its sessions created, started and, when the start
cannot be published, removed again by one piece of code. This module routes
nothing: every path, health and Slack's events included, is chosen by
:func:`tarsy.intake.routes.serve`.
"""

from __future__ import annotations

from tarsy.app import Deps
from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake import routes
from tarsy.persistence.ports import Persistence
from tarsy.settings import Settings

__all__ = ["handle", "serve"]


async def serve(request: HttpRequest, deps: Deps) -> HttpResponse:
    """Serve one ingest request (the function's entry point calls this)."""
    return await routes.serve(request, deps)


async def handle(
    request: HttpRequest,
    settings: Settings,
    config: TarsyConfig,
    store: Persistence,
    bus: Publisher,
) -> HttpResponse:
    """Serve one ingest request, for a caller holding the parts rather than ``Deps``."""
    return await routes.serve(request, Deps(settings=settings, config=config, store=store, bus=bus))

"""The ingest function's paths are chosen by the intake's routes, not by its entry point."""

from __future__ import annotations

from typing import cast

from tarsy.app import Deps
from tarsy.bus import Publisher
from tarsy.config import load_config
from tarsy.http.request import HttpRequest
from tarsy.intake import ingest, routes, slack_events
from tarsy.persistence.ports import Persistence
from tarsy.settings import Settings


def _deps() -> Deps:
    # Neither path below touches the store or the bus: None stands in, and a use would raise.
    settings = Settings()
    return Deps(
        settings=settings,
        config=load_config(settings),
        store=cast(Persistence, None),
        bus=cast(Publisher, None),
    )


def test_the_slack_path_the_routes_name_is_the_slack_handler_s() -> None:
    assert routes.SLACK_EVENTS_PATH == slack_events.PATH


async def test_health_is_answered_by_the_routes() -> None:
    response = await ingest.serve(HttpRequest(method="GET", path="/healthz/"), _deps())
    assert response.status == 200 and response.body == {"status": "ok"}


async def test_slack_events_reach_the_slack_handler_unconfigured_it_refuses() -> None:
    response = await ingest.serve(HttpRequest(method="POST", path=slack_events.PATH), _deps())
    assert response.status == 404

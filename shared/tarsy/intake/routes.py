"""The alert routes of the ingest function: one door, one receiver per sender.

``POST /alerts`` takes tarsy's own ``{alert_type, data}`` (its receiver is
:mod:`tarsy.intake.sources.api`, answering ``202 {session_id, status_url}``); an SRE pointing
Alertmanager, Grafana, PagerDuty or AWS SNS at tarsy should not need a
translator, so each gets a route that takes its body as it is sent:

* ``/alerts/alertmanager``: Alertmanager webhook v4;
* ``/alerts/alertmanager/api/v2/alerts`` (and ``.../api/v1/alerts``): the
  alerts API of an Alertmanager, for Grafana's "Alertmanager" contact point,
  whose URL is then ``https://HOST/alerts/alertmanager`` (Grafana appends
  the API path; older releases append ``/api/v1/alerts``, with the same
  body). Its alerts belong to the ``alertmanager`` source: its settings, and
  Alertmanager's own fingerprint of their labels (see
  :mod:`tarsy.intake.sources.alertmanager_api`). It answers ``200`` where the
  others answer ``202``: Alertmanager's API documents only 200 for success,
  and clients generated from its OpenAPI spec, such as ``amtool``, take any
  other code as an error;
* ``/alerts/grafana``: Grafana's webhook contact point;
* ``/alerts/pagerduty``: PagerDuty V3 webhook subscriptions;
* ``/alerts/sns``: AWS SNS HTTPS subscriptions carrying CloudWatch alarms.

Each request is checked in the order ``POST /alerts`` uses — method, auth,
size, content type, body, shape — and nothing is written on any rejection.
Authentication is what each sender can send: the API key as Bearer,
``X-API-Key`` or the basic-auth password (SNS and PagerDuty can only put it
in the URL, ``https://tarsy:KEY@host/...``; Grafana's Alertmanager contact
point can only send basic auth, and only when its user is set too);
PagerDuty's HMAC signature instead of the key once a signing secret is
configured; for SNS, the key and the message's own signature and an
allow-listed topic. A missing key is
answered with a ``Basic`` challenge, because SNS sends the credentials of its
subscription URL only after one.

The body becomes normalized alerts (:mod:`tarsy.intake.sources`), and each alert an
outcome (:mod:`tarsy.intake.alerts`): the answer is ``202 {"alerts": [...]}``
(``200`` on the Alertmanager API route) with one ``{fingerprint,
session_id, outcome}`` per alert.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.errors import InputError
from tarsy.http.request import HttpRequest, HttpResponse, error_response
from tarsy.intake.alerts import Intake, PublishFailed
from tarsy.intake.sessions import queue_unavailable
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.receiver import ROUTE_PREFIX, AlertReceiver
from tarsy.intake.sources.registry import receiver_for
from tarsy.models import MCPSelection, utcnow
from tarsy.persistence.ports import Persistence, ToolListCache
from tarsy.settings import Settings
from tarsy.tools.selection import fresh_tool_names, selection_problems, servers_to_check

if TYPE_CHECKING:
    from tarsy.app import Deps

logger = logging.getLogger(__name__)

__all__ = [
    "HEALTH_PATH",
    "ROUTE_PREFIX",
    "SLACK_EVENTS_PATH",
    "check_selection",
    "error_answer",
    "handle",
    "serve",
]

HEALTH_PATH = "/healthz"
SLACK_EVENTS_PATH = "/slack/events"  # tarsy.intake.slack_events.PATH (not imported: see serve)


def error_answer(error: InputError) -> HttpResponse:
    """Render a rejection; a 401 carries the error's own challenge when it has one.

    Args:
        error: The rejection.

    Returns:
        The response (``WWW-Authenticate: Basic ...`` for a missing or wrong key).
    """
    response = error_response(error)
    challenge = getattr(error, "challenge", None)
    if response.status == 401 and isinstance(challenge, str):
        response.headers["WWW-Authenticate"] = challenge
    return response


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


async def _take(
    intake: Intake, alerts: list[NormalizedAlert], receiver: AlertReceiver, config: TarsyConfig
) -> HttpResponse:
    try:
        outcomes = await intake.take(alerts, receiver.source_config(config.alert_sources))
    except PublishFailed:
        return queue_unavailable()
    return receiver.answer([outcome.answer() for outcome in outcomes], intake.settings)


async def handle(
    request: HttpRequest,
    settings: Settings,
    config: TarsyConfig,
    store: Persistence,
    bus: Publisher,
) -> HttpResponse:
    """Serve one request to a source route.

    Args:
        request: The request; its path is one of a receiver's paths (else 404).
        settings: Process settings (keys, limits).
        config: The configuration (``alert_sources``, chains, masking).
        store: Firestore.
        bus: The steps topic.

    Returns:
        The receiver's success status with the outcomes, the answer of a
        notification that carries no alert (an SNS (un)subscription), else the
        rejection.
    """
    receiver = receiver_for(request.path)
    if receiver is None:
        return error_answer(InputError(f"no route {request.path!r}", status=404))
    try:
        if request.method != "POST":
            raise InputError(
                f"method {request.method} not allowed on {request.path}",
                status=405,
                details={"allow": "POST"},
            )
        received = await receiver.receive(request, settings, config.alert_sources)
        if not isinstance(received, HttpResponse):
            for alert in received:
                if alert.mcp is not None:
                    await check_selection(alert.mcp, config, store)
    except InputError as e:
        logger.info("rejected %s notification: %s %s", receiver.name, e.status, e)
        return error_answer(e)
    if isinstance(received, HttpResponse):
        return received
    intake = Intake(settings=settings, config=config, store=store, bus=bus)
    return await _take(intake, received, receiver, config)


async def serve(request: HttpRequest, deps: Deps) -> HttpResponse:
    """Serve one request to the ingest function: health, Slack's events, or an alert route.

    Design constraint: the function's entry point and :mod:`tarsy.intake.ingest`
    route nothing themselves; every path the ingest function answers is chosen
    here, beside the alert routes' own table.
    """
    path = request.path.rstrip("/")
    if path == HEALTH_PATH:
        return HttpResponse(status=200, body={"status": "ok"})
    if path == SLACK_EVENTS_PATH:
        # Imported here: only Slack's requests load the chat path (the engine's chains).
        from tarsy.intake import slack_events

        return await slack_events.handle(request, deps)
    return await handle(request, deps.settings, deps.config, deps.store, deps.bus)

"""One call per route for the sources whose body alone decides the outcome.

Alertmanager, Grafana and PagerDuty bodies go straight from bytes to
normalized alerts once the request is authenticated; this module names that
path once so the routes do not each wire parse and normalize. Alerts posted
to tarsy's Alertmanager API route (Grafana's "Alertmanager" contact point)
take the same path with the clock as one more input, because whether such an
alert is resolved depends on whether its ``endsAt`` has passed. SNS is not
here: its messages must be verified (asynchronously, possibly fetching a
certificate) between parsing and normalizing, and a confirmation is not a
list of alerts — see :mod:`tarsy.intake.sources.sns`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from tarsy.intake.sources.alertmanager import normalize_alertmanager, parse_alertmanager
from tarsy.intake.sources.alertmanager_api import normalize_alertmanager_api, parse_alertmanager_api
from tarsy.intake.sources.clock import utcnow
from tarsy.intake.sources.config import AlertSourcesConfig
from tarsy.intake.sources.grafana import normalize_grafana, parse_grafana
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.pagerduty import normalize_pagerduty, parse_pagerduty

BodySource = Literal["alertmanager", "grafana", "pagerduty"]


def alerts_from_body(
    source: BodySource, body: bytes | str, config: AlertSourcesConfig
) -> list[NormalizedAlert]:
    """Parse an authenticated body of ``source`` and normalize its alerts.

    Args:
        source: Which sender posted it.
        body: The raw request body.
        config: ``alert_sources``.

    Returns:
        One normalized alert per alert of the notification, capped.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not the sender's documented shape (422, fields named).
    """
    if source == "alertmanager":
        return normalize_alertmanager(parse_alertmanager(body), config.alertmanager)
    if source == "grafana":
        return normalize_grafana(parse_grafana(body), config.grafana)
    return normalize_pagerduty(parse_pagerduty(body), config.pagerduty)


def alerts_from_api_body(
    body: bytes | str, config: AlertSourcesConfig, *, clock: Callable[[], datetime] = utcnow
) -> list[NormalizedAlert]:
    """Parse an authenticated ``POST /api/v2/alerts`` body and normalize its alerts.

    Args:
        body: The raw request body (a JSON array of postable alerts).
        config: ``alert_sources`` (its ``alertmanager`` block applies).
        clock: The current time, which tells a resolved alert from a firing one.

    Returns:
        One normalized alert per posted alert, capped.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not an array of postable alerts (422, fields named).
    """
    return normalize_alertmanager_api(parse_alertmanager_api(body), config.alertmanager, clock())

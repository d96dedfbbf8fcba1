"""One call per route for the sources whose body alone decides the outcome.

Alertmanager, Grafana and PagerDuty bodies go straight from bytes to
normalized alerts once the request is authenticated; this module names that
path once so the routes do not each wire parse and normalize. SNS is not
here: its messages must be verified (asynchronously, possibly fetching a
certificate) between parsing and normalizing, and a confirmation is not a
list of alerts — see :mod:`tarsy.sources.sns`.
"""

from __future__ import annotations

from typing import Literal

from tarsy.sources.alertmanager import normalize_alertmanager, parse_alertmanager
from tarsy.sources.config import AlertSourcesConfig
from tarsy.sources.grafana import normalize_grafana, parse_grafana
from tarsy.sources.normalized import NormalizedAlert
from tarsy.sources.pagerduty import normalize_pagerduty, parse_pagerduty

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

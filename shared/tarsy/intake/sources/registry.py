"""The alert sources the ingest function serves (``POST /alerts`` among them): one line each.

Design constraint: an alert source is one object (:mod:`tarsy.intake.sources.receiver`);
the routes know a source only through this list, so adding one is its module
and one line here.
"""

from __future__ import annotations

from tarsy.intake.sources.alertmanager import AlertmanagerReceiver
from tarsy.intake.sources.alertmanager_api import AlertmanagerApiReceiver
from tarsy.intake.sources.api import ApiReceiver
from tarsy.intake.sources.grafana import GrafanaReceiver
from tarsy.intake.sources.pagerduty import PagerDutyReceiver
from tarsy.intake.sources.receiver import AlertReceiver
from tarsy.intake.sources.sns_receiver import SnsReceiver

RECEIVERS: tuple[AlertReceiver, ...] = (
    ApiReceiver(),
    AlertmanagerReceiver(),
    AlertmanagerApiReceiver(),
    GrafanaReceiver(),
    PagerDutyReceiver(),
    SnsReceiver(),
)

_BY_PATH = {path: receiver for receiver in RECEIVERS for path in receiver.paths}


def receiver_for(path: str) -> AlertReceiver | None:
    """The source posted to ``path``, if any."""
    return _BY_PATH.get(path.rstrip("/"))

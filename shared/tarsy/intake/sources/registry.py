"""The alert sources the ingest function serves (``POST /alerts`` among them): one line each.

Design constraint: an alert source is one object (:mod:`tarsy.intake.sources.receiver`);
the routes know a source only through this list, so adding one is its module
and, here, a factory and its route's line. A native sender's module (its payload
models, its parser, for SNS its signature checks) is imported when its route is
first posted to: an instance that only ever serves ``POST /alerts`` never loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from tarsy.intake.sources.api import ApiReceiver
from tarsy.intake.sources.receiver import ROUTE_PREFIX, AlertReceiver

API = ApiReceiver()


@cache
def _alertmanager() -> AlertReceiver:
    from tarsy.intake.sources.alertmanager import AlertmanagerReceiver

    return AlertmanagerReceiver()


@cache
def _alertmanager_api() -> AlertReceiver:
    from tarsy.intake.sources.alertmanager_api import AlertmanagerApiReceiver

    return AlertmanagerApiReceiver()


@cache
def _grafana() -> AlertReceiver:
    from tarsy.intake.sources.grafana import GrafanaReceiver

    return GrafanaReceiver()


@cache
def _pagerduty() -> AlertReceiver:
    from tarsy.intake.sources.pagerduty import PagerDutyReceiver

    return PagerDutyReceiver()


@cache
def _sns() -> AlertReceiver:
    from tarsy.intake.sources.sns_receiver import SnsReceiver

    return SnsReceiver()


# The native senders by path (each receiver's ``paths``; a test holds the two equal).
NATIVE: dict[str, Callable[[], AlertReceiver]] = {
    f"{ROUTE_PREFIX}alertmanager": _alertmanager,
    f"{ROUTE_PREFIX}alertmanager/api/v1/alerts": _alertmanager_api,
    f"{ROUTE_PREFIX}alertmanager/api/v2/alerts": _alertmanager_api,
    f"{ROUTE_PREFIX}grafana": _grafana,
    f"{ROUTE_PREFIX}pagerduty": _pagerduty,
    f"{ROUTE_PREFIX}sns": _sns,
}


def receiver_for(path: str) -> AlertReceiver | None:
    """The source posted to ``path``, if any (a native one is imported on its first post)."""
    path = path.rstrip("/")
    if path in API.paths:
        return API
    native = NATIVE.get(path)
    return None if native is None else native()


def all_receivers() -> tuple[AlertReceiver, ...]:
    """Every source, each once (this imports every native sender's module)."""
    return (API, *dict.fromkeys(native() for native in NATIVE.values()))

"""Grafana unified alerting's webhook contact point.

Grafana's body is Alertmanager's group notification (see
:mod:`tarsy.intake.sources.grouped`) with ``version`` "1" and a few additions: at the
top ``orgId``, ``title``, ``state`` and ``message`` (the rendered
notification text), and per alert ``silenceURL``, ``dashboardURL``,
``panelURL``, ``imageURL`` and the query results that fired it — ``values``
(``{refId: number}``) in current versions, ``valueString`` in older ones.
Those extras are kept in the alert's data when present, because they point an
investigator at the dashboard and the numbers behind the alert. The rendered
``message`` is not: it repeats the labels and annotations already there.

Authentication: the contact point's basic auth (the tarsy API key as the
password) or its ``Authorization`` header (scheme ``Bearer`` by default).
"""

from __future__ import annotations

from typing import Any, Literal

from tarsy.intake.sources.config import AlertSourcesConfig, GrafanaSourceConfig
from tarsy.intake.sources.grouped import GroupedAlert, GroupedNotification, normalize_group
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.parsing import parse_json, validate_payload
from tarsy.intake.sources.receiver import ROUTE_PREFIX, BodyReceiver

WHAT = "Grafana webhook (version 1)"


class GrafanaAlert(GroupedAlert):
    """One alert of a Grafana notification."""

    silenceURL: str = ""
    dashboardURL: str = ""
    panelURL: str = ""
    imageURL: str = ""
    values: dict[str, Any] | None = None
    valueString: str = ""

    def extra_data(self) -> dict[str, Any]:
        """Return Grafana's per-alert links and values, the non-empty ones."""
        extras: dict[str, Any] = {
            "silenceURL": self.silenceURL,
            "dashboardURL": self.dashboardURL,
            "panelURL": self.panelURL,
            "imageURL": self.imageURL,
            "values": self.values,
            "valueString": self.valueString,
        }
        return {key: value for key, value in extras.items() if value}


class GrafanaWebhook(GroupedNotification):
    """The body of a Grafana webhook contact point notification."""

    version: Literal["1"]
    alerts: list[GrafanaAlert]  # type: ignore[assignment]  # narrower item type
    orgId: int | None = None
    title: str = ""
    state: str = ""
    message: str = ""

    def extra_data(self) -> dict[str, Any]:
        """Return the Grafana organisation the alert belongs to, when given."""
        return {} if self.orgId is None else {"orgId": self.orgId}


def parse_grafana(body: bytes | str) -> GrafanaWebhook:
    """Parse and validate a Grafana webhook body.

    Args:
        body: The raw request body.

    Returns:
        The validated notification.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not a Grafana version-1 notification (422, fields named).
    """
    return validate_payload(GrafanaWebhook, parse_json(body), WHAT)


def normalize_grafana(
    webhook: GrafanaWebhook, config: GrafanaSourceConfig
) -> list[NormalizedAlert]:
    """Return one normalized alert per alert of the notification, capped.

    Args:
        webhook: The validated notification.
        config: ``alert_sources.grafana``.

    Returns:
        The alerts in Grafana's order (``firing`` or ``resolved`` each;
        ``ignored`` beyond the cap).
    """
    return normalize_group(webhook, config)


class GrafanaReceiver(BodyReceiver):
    """``POST /alerts/grafana``: Grafana's webhook contact point."""

    name = "grafana"
    paths = (f"{ROUTE_PREFIX}grafana",)

    def alerts(self, body: str, sources: AlertSourcesConfig) -> list[NormalizedAlert]:
        """One normalized alert per alert of the notification."""
        return normalize_grafana(parse_grafana(body), sources.grafana)

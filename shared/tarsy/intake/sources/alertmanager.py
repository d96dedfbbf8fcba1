"""Prometheus Alertmanager's webhook (``webhook_config``), payload version 4.

Alertmanager POSTs one JSON notification per alert group to the receiver's
URL, for firing groups and, with ``send_resolved: true`` (the default), for
resolved ones. Its ``version`` field is the only contract it offers about the
shape: "4" is the format documented today, and a body with another version
(or none) is refused with a 422 naming ``version`` rather than half-read.

Authentication is not in the payload: Alertmanager's ``http_config`` sends
``basic_auth`` (the tarsy API key as the password, any user name) or an
``Authorization`` header (``Bearer <key>``); see :mod:`tarsy.intake.sources.basic_auth`.

The shape and the per-alert normalization are shared with Grafana
(:mod:`tarsy.intake.sources.grouped`).
"""

from __future__ import annotations

from typing import Literal

from tarsy.intake.sources.config import AlertmanagerSourceConfig, AlertSourcesConfig
from tarsy.intake.sources.grouped import GroupedAlert, GroupedNotification, normalize_group
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.parsing import parse_json, validate_payload
from tarsy.intake.sources.receiver import ROUTE_PREFIX, BodyReceiver

WHAT = "Alertmanager webhook (version 4)"


class AlertmanagerAlert(GroupedAlert):
    """One alert of an Alertmanager notification."""


class AlertmanagerWebhook(GroupedNotification):
    """The body of an Alertmanager ``webhook_config`` notification."""

    version: Literal["4"]
    alerts: list[AlertmanagerAlert]  # type: ignore[assignment]  # narrower item type


def parse_alertmanager(body: bytes | str) -> AlertmanagerWebhook:
    """Parse and validate an Alertmanager webhook body.

    Args:
        body: The raw request body.

    Returns:
        The validated notification.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not a version-4 notification (422, fields named).
    """
    return validate_payload(AlertmanagerWebhook, parse_json(body), WHAT)


def normalize_alertmanager(
    webhook: AlertmanagerWebhook, config: AlertmanagerSourceConfig
) -> list[NormalizedAlert]:
    """Return one normalized alert per alert of the notification, capped.

    Args:
        webhook: The validated notification.
        config: ``alert_sources.alertmanager``.

    Returns:
        The alerts in Alertmanager's order (``firing`` or ``resolved`` each;
        ``ignored`` beyond the cap).
    """
    return normalize_group(webhook, config)


class AlertmanagerReceiver(BodyReceiver):
    """``POST /alerts/alertmanager``: a receiver's ``webhook_config`` notification."""

    name = "alertmanager"
    paths = (f"{ROUTE_PREFIX}alertmanager",)

    def alerts(self, body: str, sources: AlertSourcesConfig) -> list[NormalizedAlert]:
        """One normalized alert per alert of the group."""
        return normalize_alertmanager(parse_alertmanager(body), sources.alertmanager)

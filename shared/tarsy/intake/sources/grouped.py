"""The grouped-notification shape Alertmanager and Grafana share, and its normalization.

Grafana's alerting is built on a fork of Prometheus Alertmanager and its
webhook body keeps Alertmanager's layout: one notification per alert *group*
(``groupLabels``, ``commonLabels``, ``commonAnnotations``, ``externalURL``,
``groupKey``, ``truncatedAlerts``) with the group's ``alerts``, each carrying
its own ``status``, ``labels``, ``annotations``, ``startsAt``, ``endsAt``,
``generatorURL`` and ``fingerprint``. The two senders differ only in their
``version`` and in a few extra fields (see :mod:`tarsy.intake.sources.alertmanager`
and :mod:`tarsy.intake.sources.grafana`).

A group is not tarsy's unit: one firing alert is one session. So each alert
becomes a :class:`~tarsy.intake.sources.normalized.NormalizedAlert` of its own, whose
data is the alert's fields plus the group context an investigator needs
(``commonLabels``, ``externalURL``). The alert's own ``status`` decides its
event — a "firing" group can carry resolved alerts.

The models ignore fields they do not know (senders add fields over time) and
are strict where the normalization depends on a field: each alert's
``status`` and ``fingerprint``, and labels and annotations being maps of
strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from tarsy.intake.sources.alert_type import derive_alert_type
from tarsy.intake.sources.config import SourceConfig
from tarsy.intake.sources.limits import cap_alerts
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.parsing import Tolerant

GroupStatus = Literal["firing", "resolved"]

RUNBOOK_ANNOTATION = "runbook_url"


class GroupedAlert(Tolerant):
    """One alert of a group notification."""

    status: GroupStatus
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = ""
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str = Field(min_length=1)

    def extra_data(self) -> dict[str, Any]:
        """Return the sender-specific fields worth showing the investigator."""
        return {}


class GroupedNotification(Tolerant):
    """One notification: a group of alerts and their common context."""

    receiver: str = ""
    status: GroupStatus
    alerts: list[GroupedAlert]
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    groupKey: str = ""
    truncatedAlerts: int = Field(default=0, ge=0)

    def extra_data(self) -> dict[str, Any]:
        """Return the sender-specific group fields worth showing the investigator."""
        return {}


def runbook_from(annotations: Mapping[str, str]) -> str | None:
    """Return the ``runbook_url`` annotation, if there is a non-blank one.

    Args:
        annotations: An alert's annotations.

    Returns:
        The URL, stripped, or ``None``.
    """
    url = annotations.get(RUNBOOK_ANNOTATION, "").strip()
    return url or None


def alert_data(notification: GroupedNotification, alert: GroupedAlert) -> dict[str, Any]:
    """Return what the investigation reads about one alert of a group.

    Args:
        notification: The group notification.
        alert: One of its alerts.

    Returns:
        The alert's own fields, its sender's extras, then the group context.
    """
    data: dict[str, Any] = {
        "status": alert.status,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": alert.startsAt,
        "endsAt": alert.endsAt,
        "generatorURL": alert.generatorURL,
        "fingerprint": alert.fingerprint,
        **alert.extra_data(),
        "commonLabels": dict(notification.commonLabels),
        "externalURL": notification.externalURL,
        "receiver": notification.receiver,
        **notification.extra_data(),
    }
    return data


def normalize_group(
    notification: GroupedNotification, config: SourceConfig
) -> list[NormalizedAlert]:
    """Turn a group notification into one normalized alert per alert, capped.

    Args:
        notification: The validated notification.
        config: The source's settings (alert type, cap).

    Returns:
        One entry per alert, in the sender's order; alerts beyond
        ``config.max_alerts_per_notification`` are ``ignored``.
    """
    alerts = [
        labelled_alert(
            alert.fingerprint,
            alert.status,
            alert_data(notification, alert),
            alert.annotations,
            config,
        )
        for alert in notification.alerts
    ]
    return cap_alerts(alerts, config.max_alerts_per_notification)


def labelled_alert(
    fingerprint: str,
    status: GroupStatus,
    data: dict[str, Any],
    annotations: Mapping[str, str],
    config: SourceConfig,
) -> NormalizedAlert:
    """One alert of a label-identified sender (Alertmanager, Grafana), normalized.

    Args:
        fingerprint: Its label fingerprint: the dedup key.
        status: ``firing`` or ``resolved``.
        data: What the investigation reads about it.
        annotations: Its annotations (the runbook comes from ``runbook_url``).
        config: The source's settings (alert type).

    Returns:
        The normalized alert.
    """
    return NormalizedAlert(
        source=config.source,
        fingerprint=fingerprint,
        alert_key=fingerprint,
        event=status,
        alert_type=derive_alert_type(data, config),
        data=data,
        runbook=runbook_from(annotations),
    )

"""Alertmanager's own alerts API, ``POST /api/v2/alerts``: Grafana's "Alertmanager" contact point.

Grafana has two ways to hand its alerts to another system. Its *Webhook*
contact point posts a group notification (:mod:`tarsy.intake.sources.grafana`). Its
*Alertmanager* contact point instead acts as a client of an Alertmanager: it
posts the alerts themselves to ``{url}/api/v2/alerts`` (``/api/v1/alerts``
before grafana/alerting moved to v2 in February 2024; the body is the same),
as Prometheus does. The
body is a JSON array of Alertmanager's ``postableAlert`` (``labels``,
``annotations``, ``startsAt``, ``endsAt``, ``generatorURL``), plus the
``UpdatedAt`` and ``Timeout`` that Grafana's Go encoding adds and nobody
reads. It has no status, no fingerprint, no group and no version.
Authentication is HTTP basic auth only, which Grafana sends when both a user
and a password are configured.

So this module works out what the webhook formats state outright, the way
Alertmanager itself does on that endpoint:

* **Identity.** An alert *is* its label set. Labels with an empty value are
  dropped, as Alertmanager drops them on receipt, and an alert with no label
  left is refused. The fingerprint is Alertmanager's own: 64-bit FNV-1a over
  the sorted label names and values, each followed by the byte ``0xff``,
  written as 16 hex digits. It is the value Alertmanager would show for the
  alert and put in its webhook's ``fingerprint``, so one alert is one alert
  for the ``alertmanager`` source whichever of its routes brings it.
* **State.** An alert whose ``endsAt`` is set and not after now is resolved;
  otherwise it fires. ``0001-01-01T00:00:00Z`` means "not set": it is Go's
  zero time, and Grafana sends it as the ``endsAt`` of every firing alert
  (Alertmanager clears the end of a still-firing alert before notifying).
* **Group context.** One post from Grafana's contact point is one
  notification group, so the labels shared by every alert of the post are
  the group's ``commonLabels``. The data carries them like the webhook's
  data does.

Alertmanager stores the valid alerts of a post and answers 400 for the rest.
tarsy refuses the whole post with a 422 naming each bad field instead: a
rejection writes nothing, and the sender's retry brings the valid alerts
again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import (
    AwareDatetime,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from tarsy.intake.sources.clock import utcnow
from tarsy.intake.sources.config import AlertmanagerSourceConfig, AlertSourcesConfig
from tarsy.intake.sources.errors import PayloadShapeError, problems_from
from tarsy.intake.sources.grouped import GroupStatus, labelled_alert
from tarsy.intake.sources.limits import cap_alerts
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.parsing import Tolerant, parse_json
from tarsy.intake.sources.receiver import ROUTE_PREFIX, BodyReceiver

WHAT = "Alertmanager API alerts (POST /api/v2/alerts)"

# 64-bit FNV-1a, as prometheus/common's model.LabelSet.Fingerprint uses it.
_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1
_SEPARATOR = 0xFF  # a byte that never occurs in UTF-8, so "a"+"bc" and "ab"+"c" differ


def label_fingerprint(labels: Mapping[str, str]) -> str:
    """Return Alertmanager's fingerprint of a label set.

    Grafana sends no fingerprint on this path, and Alertmanager computes its
    own from the labels. Computing the same value makes the dedup key
    stable across redeliveries and label order, and equal to the one an
    Alertmanager webhook carries for the same alert.

    Args:
        labels: The alert's labels (empty values already dropped).

    Returns:
        16 lowercase hex digits.
    """
    digest = _FNV64_OFFSET
    # Python sorts str by code point, which is the byte order of their UTF-8,
    # the order Go's sort.Strings uses.
    for name in sorted(labels):
        for text in (name, labels[name]):
            for byte in (*text.encode(), _SEPARATOR):
                digest = ((digest ^ byte) * _FNV64_PRIME) & _MASK64
    return f"{digest:016x}"


def _unset_if_zero(moment: datetime | None) -> datetime | None:
    # Go's zero time.Time (year 1) is how its JSON encoding says "no time".
    return None if moment is None or moment.year <= 1 else moment


class PostableAlert(Tolerant):
    """One alert of the array, as Alertmanager's ``postableAlert`` defines it."""

    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: AwareDatetime | None = None
    endsAt: AwareDatetime | None = None
    generatorURL: str | None = None

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        # Go encodes a nil map as null.
        return {} if value is None else value

    @field_validator("labels")
    @classmethod
    def _has_identity(cls, labels: dict[str, str]) -> dict[str, str]:
        kept = {name: value for name, value in labels.items() if value}
        if not kept:
            raise ValueError("needs a label with a value: the labels are the alert's identity")
        return kept

    @field_validator("startsAt")
    @classmethod
    def _start(cls, moment: datetime | None) -> datetime | None:
        return _unset_if_zero(moment)

    @field_validator("endsAt")
    @classmethod
    def _end(cls, moment: datetime | None, info: ValidationInfo) -> datetime | None:
        end = _unset_if_zero(moment)
        start = info.data.get("startsAt")
        if end is not None and start is not None and end < start:
            raise ValueError("the alert ends before it starts (endsAt is earlier than startsAt)")
        return end

    def is_resolved(self, now: datetime) -> bool:
        """Whether the alert is over at ``now``: its end is set and not after ``now``.

        Args:
            now: The current time, timezone-aware.

        Returns:
            True for a resolved alert, False for a firing one.
        """
        return self.endsAt is not None and self.endsAt <= now


# Built on first use (tarsy._pydantic): only an Alertmanager API post reads it.
_ALERTS: TypeAdapter[list[PostableAlert]] = TypeAdapter(
    list[PostableAlert], config=ConfigDict(defer_build=True)
)


def parse_alertmanager_api(body: bytes | str) -> list[PostableAlert]:
    """Parse and validate the body of a ``POST /api/v2/alerts``.

    Args:
        body: The raw request body.

    Returns:
        The alerts, in the sender's order.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not an array of postable alerts (422, fields named
            as ``<index>.<field>``).
    """
    payload = parse_json(body)
    if not isinstance(payload, list):
        raise PayloadShapeError.single(
            f"{WHAT} must be a JSON array of alerts",
            "(body)",
            "expected an array; a webhook notification (an object) goes to "
            "/alerts/alertmanager or /alerts/grafana",
            "list_type",
        )
    try:
        return _ALERTS.validate_python(payload)
    except ValidationError as e:
        raise PayloadShapeError(
            f"{WHAT} do not match their documented shape", problems_from(e)
        ) from e


def common_labels(alerts: Sequence[PostableAlert]) -> dict[str, str]:
    """Return the labels every alert of the post has, with the same value.

    Args:
        alerts: The alerts of one post.

    Returns:
        The shared labels, in the first alert's order; empty for no alerts.
    """
    if not alerts:
        return {}
    first, *rest = alerts
    return {
        name: value
        for name, value in first.labels.items()
        if all(other.labels.get(name) == value for other in rest)
    }


def _rfc3339(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat().replace("+00:00", "Z")


def alert_data(
    alert: PostableAlert, status: GroupStatus, fingerprint: str, common: Mapping[str, str]
) -> dict[str, Any]:
    """Return what the investigation reads about one alert.

    The keys are those of the webhook's per-alert data, so ``alert_type_from``
    paths and investigators read both routes alike.

    Args:
        alert: The alert.
        status: Its state at receipt.
        fingerprint: Its label fingerprint.
        common: The labels shared by every alert of the post.

    Returns:
        The data; an unset time is ``""``.
    """
    return {
        "status": status,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": _rfc3339(alert.startsAt),
        "endsAt": _rfc3339(alert.endsAt),
        "generatorURL": alert.generatorURL or "",
        "fingerprint": fingerprint,
        "commonLabels": dict(common),
    }


def normalize_alertmanager_api(
    alerts: Sequence[PostableAlert], config: AlertmanagerSourceConfig, now: datetime
) -> list[NormalizedAlert]:
    """Return one normalized alert per posted alert, capped.

    Args:
        alerts: The validated alerts.
        config: ``alert_sources.alertmanager`` (the route is Alertmanager's API).
        now: The current time (timezone-aware): what ``endsAt`` is compared with.

    Returns:
        The alerts in the sender's order, ``firing`` or ``resolved`` each,
        ``ignored`` beyond ``config.max_alerts_per_notification``.
    """
    common = common_labels(alerts)
    normalized = []
    for alert in alerts:
        fingerprint = label_fingerprint(alert.labels)
        status: GroupStatus = "resolved" if alert.is_resolved(now) else "firing"
        data = alert_data(alert, status, fingerprint, common)
        normalized.append(labelled_alert(fingerprint, status, data, alert.annotations, config))
    return cap_alerts(normalized, config.max_alerts_per_notification)


class AlertmanagerApiReceiver(BodyReceiver):
    """``POST /alerts/alertmanager/api/v2/alerts`` (and v1): an Alertmanager client's alerts.

    Grafana's "Alertmanager" contact point posts here. Its alerts belong to the
    ``alertmanager`` source; the answer is 200, the only success Alertmanager's
    API documents (``amtool`` takes any other code as an error). Whether an
    alert is resolved depends on the clock: its ``endsAt`` has passed.
    """

    name = "alertmanager"
    paths = tuple(f"{ROUTE_PREFIX}alertmanager/api/{v}/alerts" for v in ("v1", "v2"))
    success_status = 200

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self.clock = clock

    def alerts(self, body: str, sources: AlertSourcesConfig) -> list[NormalizedAlert]:
        """One normalized alert per posted alert, firing or resolved by the clock."""
        return normalize_alertmanager_api(
            parse_alertmanager_api(body), sources.alertmanager, self.clock()
        )

"""CloudWatch alarm state-change notifications, as SNS delivers them.

A CloudWatch alarm with an SNS action publishes, on each state change, a JSON
document as the SNS ``Message`` (a string inside the SNS envelope, so it is
decoded twice): ``AlarmName``, ``AlarmDescription``, ``AWSAccountId``,
``NewStateValue`` / ``OldStateValue`` (``ALARM``, ``OK``,
``INSUFFICIENT_DATA``), ``NewStateReason``, ``StateChangeTime``, ``Region``
(a display name such as "EU - Ireland"), ``AlarmArn`` and ``Trigger`` (the
metric, namespace, statistic, dimensions, period, threshold; metric-math
alarms carry ``Trigger.Metrics`` instead, composite alarms no trigger).

``ALARM`` starts an investigation and ``OK`` resolves it; ``INSUFFICIENT_DATA``
says nothing about the system and is ignored. The occurrence is the alarm ARN
plus its state-change time (a redelivery repeats both; the next time the
alarm fires has a new time) and the alarm itself is its ARN, which is what an
``OK`` is matched against. Old notifications without ``AlarmArn`` fall back to
the SNS ``MessageId`` for the occurrence and to account, region and name for
the alarm.

The whole alarm document becomes the alert's data (it is small and every
field helps), with the SNS ``Subject`` and ``TopicArn`` beside it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tarsy.intake.sources.alert_type import derive_alert_type
from tarsy.intake.sources.config import SnsSourceConfig
from tarsy.intake.sources.normalized import AlertEvent, NormalizedAlert
from tarsy.intake.sources.parsing import Tolerant, validate_payload

WHAT = "CloudWatch alarm notification"

AlarmState = Literal["ALARM", "OK", "INSUFFICIENT_DATA"]

EVENTS: dict[str, AlertEvent] = {
    "ALARM": "firing",
    "OK": "resolved",
    "INSUFFICIENT_DATA": "ignored",
}


class CloudWatchDimension(Tolerant):
    """One dimension of the alarm's metric."""

    name: str = ""
    value: str = ""


class CloudWatchTrigger(Tolerant):
    """What the alarm watches (absent for composite alarms)."""

    MetricName: str | None = None
    Namespace: str | None = None
    StatisticType: str | None = None
    Statistic: str | None = None
    ExtendedStatistic: str | None = None
    Unit: str | None = None
    Dimensions: list[CloudWatchDimension] = Field(default_factory=list)
    Period: int | None = None
    EvaluationPeriods: int | None = None
    ComparisonOperator: str | None = None
    Threshold: float | None = None
    TreatMissingData: str | None = None
    Metrics: list[dict[str, Any]] | None = None


class CloudWatchAlarm(Tolerant):
    """The alarm document inside an SNS notification's ``Message``."""

    AlarmName: str = Field(min_length=1)
    AlarmDescription: str | None = None
    AWSAccountId: str = ""
    NewStateValue: AlarmState
    OldStateValue: str = ""
    NewStateReason: str = ""
    StateChangeTime: str = ""
    Region: str = ""
    AlarmArn: str = ""
    Trigger: CloudWatchTrigger | None = None


def looks_like_alarm(document: Any) -> bool:
    """Whether a decoded SNS ``Message`` is meant as a CloudWatch alarm notification.

    Args:
        document: The decoded message.

    Returns:
        True for an object with both ``AlarmName`` and ``NewStateValue``.
    """
    return isinstance(document, dict) and "AlarmName" in document and "NewStateValue" in document


def alarm_keys(alarm: CloudWatchAlarm, message_id: str) -> tuple[str, str]:
    """Return the (fingerprint, alert key) of an alarm notification.

    Args:
        alarm: The alarm.
        message_id: The SNS ``MessageId`` (the fallback occurrence).

    Returns:
        ``("{AlarmArn}|{StateChangeTime}", AlarmArn)`` when both are present;
        otherwise the message id and an account/region/name identity.
    """
    if alarm.AlarmArn and alarm.StateChangeTime:
        return f"{alarm.AlarmArn}|{alarm.StateChangeTime}", alarm.AlarmArn
    if alarm.AlarmArn:
        return message_id, alarm.AlarmArn
    return message_id, f"{alarm.AWSAccountId}:{alarm.Region}:{alarm.AlarmName}"


def normalize_alarm(
    document: dict[str, Any],
    *,
    message_id: str,
    topic_arn: str,
    subject: str | None,
    config: SnsSourceConfig,
) -> NormalizedAlert:
    """Turn a decoded alarm document into a normalized alert.

    Args:
        document: The decoded ``Message`` (see :func:`looks_like_alarm`).
        message_id: The SNS ``MessageId``.
        topic_arn: The SNS ``TopicArn``.
        subject: The SNS ``Subject``, if any.
        config: ``alert_sources.sns``.

    Returns:
        The alert: firing (``ALARM``), resolved (``OK``) or ignored.

    Raises:
        PayloadShapeError: The alarm document is malformed (422, fields under ``Message``).
    """
    alarm = validate_payload(CloudWatchAlarm, document, WHAT, prefix="Message")
    fingerprint, alert_key = alarm_keys(alarm, message_id)
    data: dict[str, Any] = {**document, "TopicArn": topic_arn, "Subject": subject}
    event = EVENTS[alarm.NewStateValue]
    return NormalizedAlert(
        source="sns",
        fingerprint=fingerprint,
        alert_key=alert_key,
        event=event,
        reason=(
            f"CloudWatch alarm state {alarm.NewStateValue} starts no investigation"
            if event == "ignored"
            else None
        ),
        alert_type=derive_alert_type(data, config),
        data=data,
    )

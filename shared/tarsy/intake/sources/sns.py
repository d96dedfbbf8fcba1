"""AWS SNS HTTPS subscriptions: the message envelope, and what each message type asks.

SNS POSTs a JSON envelope (as ``text/plain``) of one of three types:

* ``SubscriptionConfirmation``, once, when the subscription is created: the
  endpoint proves it wants the messages by visiting ``SubscribeURL`` (or
  calling ``ConfirmSubscription`` with ``Token``). No session: the outcome is
  a :class:`SubscriptionConfirmation` for the route to act on.
* ``Notification``: a published message. Its ``Message`` is a string; for a
  CloudWatch alarm action it holds the alarm document as JSON
  (:mod:`tarsy.intake.sources.cloudwatch`), which becomes one normalized alert. A
  notification that is not an alarm is acknowledged and ignored, so a topic
  shared with other publishers does not make SNS retry.
* ``UnsubscribeConfirmation``, after the subscription is deleted: reported as
  an :class:`UnsubscribeConfirmation` (the route logs it); visiting its
  ``SubscribeURL`` would re-subscribe, so nothing does.

Every envelope carries ``SignatureVersion``, ``Signature`` and
``SigningCertURL``: verify them (:mod:`tarsy.intake.sources.sns_signature`) before
acting on anything here. A subscription with raw message delivery enabled has
no envelope and cannot be verified; it is refused as a shape error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.intake.sources.alert_type import derive_alert_type
from tarsy.intake.sources.cloudwatch import looks_like_alarm, normalize_alarm
from tarsy.intake.sources.config import SnsSourceConfig
from tarsy.intake.sources.errors import MalformedBodyError
from tarsy.intake.sources.limits import cap_alerts
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.parsing import (
    Tolerant,
    parse_json,
    require_object,
    shape_problem,
    validate_payload,
)

WHAT = "SNS message"

SignatureVersion = Literal["1", "2"]


class SnsEnvelope(Tolerant):
    """Fields every SNS HTTP(S) message has."""

    Type: str
    MessageId: str = Field(min_length=1)
    TopicArn: str = Field(min_length=1)
    Message: str
    Timestamp: str = Field(min_length=1)
    SignatureVersion: SignatureVersion
    Signature: str = Field(min_length=1)
    SigningCertURL: str = Field(min_length=1)


class SnsNotification(SnsEnvelope):
    """A published message."""

    Type: Literal["Notification"]
    Subject: str | None = None
    UnsubscribeURL: str = ""
    MessageAttributes: dict[str, Any] | None = None


class SnsSubscriptionConfirmation(SnsEnvelope):
    """Sent once when an HTTPS subscription is created."""

    Type: Literal["SubscriptionConfirmation"]
    Token: str = Field(min_length=1)
    SubscribeURL: str = Field(min_length=1)


class SnsUnsubscribeConfirmation(SnsEnvelope):
    """Sent after the subscription was deleted."""

    Type: Literal["UnsubscribeConfirmation"]
    Token: str = Field(min_length=1)
    SubscribeURL: str = Field(min_length=1)


SnsMessage = SnsNotification | SnsSubscriptionConfirmation | SnsUnsubscribeConfirmation

MESSAGE_TYPES: dict[str, type[SnsMessage]] = {
    "Notification": SnsNotification,
    "SubscriptionConfirmation": SnsSubscriptionConfirmation,
    "UnsubscribeConfirmation": SnsUnsubscribeConfirmation,
}


class _Outcome(DeferredModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    topic_arn: str
    message_id: str
    subscribe_url: str
    token: str


class SubscriptionConfirmation(_Outcome):
    """The subscription awaits confirmation: visit ``subscribe_url`` (after checking its host)."""

    kind: Literal["subscription_confirmation"] = "subscription_confirmation"


class UnsubscribeConfirmation(_Outcome):
    """The subscription was deleted; ``subscribe_url`` would re-subscribe."""

    kind: Literal["unsubscribe_confirmation"] = "unsubscribe_confirmation"


SnsOutcome = list[NormalizedAlert] | SubscriptionConfirmation | UnsubscribeConfirmation


def parse_sns(body: bytes | str) -> SnsMessage:
    """Parse and validate an SNS HTTP(S) message.

    Args:
        body: The raw request body.

    Returns:
        The typed message (by its ``Type``).

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not an SNS envelope, or an unknown ``Type`` (422, fields named).
    """
    payload = require_object(parse_json(body), WHAT)
    message_type = payload.get("Type")
    model = MESSAGE_TYPES.get(message_type) if isinstance(message_type, str) else None
    if model is None:
        known = ", ".join(MESSAGE_TYPES)
        raise shape_problem(
            WHAT,
            "Type",
            f"expected one of {known} (raw message delivery must be off)",
            "missing" if message_type is None else "literal_error",
        )
    return validate_payload(model, payload, WHAT)


def normalize_sns(message: SnsMessage, config: SnsSourceConfig) -> SnsOutcome:
    """Return what a verified SNS message asks of the route.

    Args:
        message: The message, its signature already verified.
        config: ``alert_sources.sns``.

    Returns:
        For a notification, its alerts (one; ``ignored`` when the message is
        not a CloudWatch alarm); for a confirmation, the typed outcome.

    Raises:
        PayloadShapeError: A CloudWatch alarm document of the wrong shape (422).
    """
    if isinstance(message, SnsSubscriptionConfirmation):
        return SubscriptionConfirmation(
            topic_arn=message.TopicArn,
            message_id=message.MessageId,
            subscribe_url=message.SubscribeURL,
            token=message.Token,
        )
    if isinstance(message, SnsUnsubscribeConfirmation):
        return UnsubscribeConfirmation(
            topic_arn=message.TopicArn,
            message_id=message.MessageId,
            subscribe_url=message.SubscribeURL,
            token=message.Token,
        )
    try:
        document: Any = parse_json(message.Message, prefix="Message")
    except MalformedBodyError:  # a plain-text message is simply not an alarm
        document = None
    if not looks_like_alarm(document):
        data: dict[str, Any] = {
            "Subject": message.Subject,
            "TopicArn": message.TopicArn,
            "MessageId": message.MessageId,
            "Timestamp": message.Timestamp,
        }
        alert = NormalizedAlert(
            source="sns",
            fingerprint=message.MessageId,
            alert_key=message.MessageId,
            event="ignored",
            reason="the SNS message is not a CloudWatch alarm notification",
            alert_type=derive_alert_type(data, config),
            data=data,
        )
        return [alert]
    alert = normalize_alarm(
        document,
        message_id=message.MessageId,
        topic_arn=message.TopicArn,
        subject=message.Subject,
        config=config,
    )
    return cap_alerts([alert], config.max_alerts_per_notification)

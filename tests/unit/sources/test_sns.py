"""SNS envelopes and the CloudWatch alarms inside them: typed outcomes, keys, shape errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tarsy.intake.sources.config import SnsSourceConfig
from tarsy.intake.sources.errors import MalformedBodyError, PayloadShapeError
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.sns import (
    SnsNotification,
    SnsSubscriptionConfirmation,
    SnsUnsubscribeConfirmation,
    SubscriptionConfirmation,
    UnsubscribeConfirmation,
    normalize_sns,
    parse_sns,
)
from tests.unit.sources.samples import as_body, fixture_bytes, fixture_json

CONFIG = SnsSourceConfig()
TOPIC = "arn:aws:sns:eu-west-1:111122223333:tarsy-cloudwatch-alarms"
ALARM_ARN = "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:checkout-db-cpu-high"


def alerts_of(body: bytes, config: SnsSourceConfig = CONFIG) -> list[NormalizedAlert]:
    outcome = normalize_sns(parse_sns(body), config)
    assert isinstance(outcome, list)
    return outcome


def with_alarm(**changes: Any) -> bytes:
    """The ALARM notification with fields of its alarm document changed (None deletes)."""
    payload = fixture_json("sns_notification_alarm.json")
    alarm = json.loads(payload["Message"])
    for key, value in changes.items():
        if value is None:
            alarm.pop(key, None)
        else:
            alarm[key] = value
    payload["Message"] = json.dumps(alarm)
    return as_body(payload)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("sns_notification_alarm.json", SnsNotification),
        ("sns_notification_ok.json", SnsNotification),
        ("sns_subscription_confirmation.json", SnsSubscriptionConfirmation),
        ("sns_unsubscribe_confirmation.json", SnsUnsubscribeConfirmation),
    ],
)
def test_parse_by_type(name: str, model: type[Any]) -> None:
    message = parse_sns(fixture_bytes(name))
    assert type(message) is model
    assert message.TopicArn == TOPIC


def test_alarm_fires_with_arn_and_state_change_time() -> None:
    (alert,) = alerts_of(fixture_bytes("sns_notification_alarm.json"))

    assert (alert.source, alert.event, alert.reason) == ("sns", "firing", None)
    assert alert.fingerprint == f"{ALARM_ARN}|2026-11-22T05:15:42.871+0000"
    assert alert.alert_key == ALARM_ARN
    assert alert.alert_type == "AWS/RDS"
    assert alert.data["AlarmName"] == "checkout-db-cpu-high"
    assert alert.data["NewStateReason"].startswith("Threshold Crossed")
    assert alert.data["Trigger"]["Dimensions"] == [
        {"value": "checkout-db-prod", "name": "DBInstanceIdentifier"}
    ]
    assert alert.data["Subject"] == 'ALARM: "checkout-db-cpu-high" in EU (Ireland)'
    assert alert.data["TopicArn"] == TOPIC


def test_ok_resolves_the_same_alarm_under_a_new_occurrence() -> None:
    (firing,) = alerts_of(fixture_bytes("sns_notification_alarm.json"))
    (resolved,) = alerts_of(fixture_bytes("sns_notification_ok.json"))

    assert resolved.event == "resolved"
    assert resolved.fingerprint != firing.fingerprint
    assert resolved.resolve_key == firing.resolve_key


def test_redelivery_has_the_same_dedup_key() -> None:
    payload = fixture_json("sns_notification_alarm.json")
    (first,) = alerts_of(as_body(payload))
    payload["Timestamp"] = "2026-11-22T05:16:12.000Z"  # SNS retry: same MessageId and alarm
    (again,) = alerts_of(as_body(payload))

    assert first.dedup_key == again.dedup_key


def test_insufficient_data_is_ignored() -> None:
    (alert,) = alerts_of(with_alarm(NewStateValue="INSUFFICIENT_DATA"))

    assert alert.event == "ignored"
    assert alert.reason is not None and "INSUFFICIENT_DATA" in alert.reason


def test_alarm_without_arn_falls_back_to_message_id() -> None:
    (alert,) = alerts_of(with_alarm(AlarmArn=None))

    assert alert.fingerprint == "8b3f6c2e-1d4a-5e9f-a7b8-0c1d2e3f4a5b"
    assert alert.alert_key == "111122223333:EU (Ireland):checkout-db-cpu-high"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "AWS/RDS"),
        ({"alert_type_from": "AlarmName"}, "checkout-db-cpu-high"),
        ({"alert_type_from": "Trigger.MetricName"}, "CPUUtilization"),
        ({"alert_type": "cloudwatch"}, "cloudwatch"),
    ],
)
def test_alert_type_mapping(config: dict[str, Any], expected: str) -> None:
    (alert,) = alerts_of(
        fixture_bytes("sns_notification_alarm.json"), SnsSourceConfig.model_validate(config)
    )
    assert alert.alert_type == expected


def test_composite_alarm_without_trigger_gets_the_source_name() -> None:
    (alert,) = alerts_of(with_alarm(Trigger=None, AlarmRule='ALARM("a") OR ALARM("b")'))

    assert alert.alert_type == "sns"
    assert alert.event == "firing"


@pytest.mark.parametrize("message", ["a plain text message", '{"hello": "world"}', "[1, 2]"])
def test_notification_that_is_not_an_alarm_is_ignored(message: str) -> None:
    payload = fixture_json("sns_notification_alarm.json")
    payload["Message"] = message

    (alert,) = alerts_of(as_body(payload))

    assert alert.event == "ignored"
    assert alert.fingerprint == "8b3f6c2e-1d4a-5e9f-a7b8-0c1d2e3f4a5b"


def test_subscription_confirmation_is_a_typed_outcome() -> None:
    outcome = normalize_sns(parse_sns(fixture_bytes("sns_subscription_confirmation.json")), CONFIG)

    assert isinstance(outcome, SubscriptionConfirmation)
    assert outcome.kind == "subscription_confirmation"
    assert outcome.topic_arn == TOPIC
    assert outcome.subscribe_url.startswith(
        "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription"
    )
    assert outcome.token.startswith("2336412f")


def test_unsubscribe_confirmation_is_a_typed_outcome() -> None:
    outcome = normalize_sns(parse_sns(fixture_bytes("sns_unsubscribe_confirmation.json")), CONFIG)

    assert isinstance(outcome, UnsubscribeConfirmation)
    assert outcome.kind == "unsubscribe_confirmation"
    assert outcome.message_id == "47138184-6831-46b8-8f7c-afc488602d7d"


@pytest.mark.parametrize(
    ("changes", "field", "kind"),
    [
        ({"NewStateValue": "BROKEN"}, "Message.NewStateValue", "literal_error"),
        ({"AlarmName": ""}, "Message.AlarmName", "string_too_short"),
        ({"Trigger": "not an object"}, "Message.Trigger", "model_type"),
        ({"Trigger": {"Period": "five minutes"}}, "Message.Trigger.Period", "int_parsing"),
    ],
)
def test_malformed_alarm_names_the_field(changes: dict[str, Any], field: str, kind: str) -> None:
    with pytest.raises(PayloadShapeError) as raised:
        alerts_of(with_alarm(**changes))

    assert raised.value.status == 422
    assert [(p["field"], p["type"]) for p in raised.value.problems] == [(field, kind)]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.pop("Type"), "Type"),
        (lambda p: p.update(Type="Telegram"), "Type"),
        (lambda p: p.update(Type=7), "Type"),
        (lambda p: p.pop("MessageId"), "MessageId"),
        (lambda p: p.pop("Signature"), "Signature"),
        (lambda p: p.pop("SigningCertURL"), "SigningCertURL"),
        (lambda p: p.update(SignatureVersion="3"), "SignatureVersion"),
        (lambda p: p.update(Message={"AlarmName": "x"}), "Message"),
    ],
)
def test_envelope_errors_name_the_field(mutate: Any, field: str) -> None:
    payload = fixture_json("sns_notification_alarm.json")
    mutate(payload)

    with pytest.raises(PayloadShapeError) as raised:
        parse_sns(as_body(payload))

    assert raised.value.fields == [field]


def test_confirmation_needs_its_subscribe_url() -> None:
    payload = fixture_json("sns_subscription_confirmation.json")
    del payload["SubscribeURL"]

    with pytest.raises(PayloadShapeError) as raised:
        parse_sns(as_body(payload))

    assert raised.value.fields == ["SubscribeURL"]


def test_raw_message_delivery_is_refused_as_shape() -> None:
    raw_alarm = json.loads(fixture_json("sns_notification_alarm.json")["Message"])

    with pytest.raises(PayloadShapeError) as raised:
        parse_sns(as_body(raw_alarm))

    assert raised.value.fields == ["Type"]
    assert "raw message delivery" in raised.value.problems[0]["message"]


def test_not_json_is_400() -> None:
    with pytest.raises(MalformedBodyError):
        parse_sns(b"Type=Notification&Message=hi")

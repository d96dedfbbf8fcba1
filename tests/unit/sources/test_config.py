"""``alert_sources:``: defaults, field-level errors, unknown keys refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tarsy.intake.sources.config import DEFAULT_CERT_HOST_PATTERN, AlertSourcesConfig
from tarsy.intake.sources.normalized import SOURCE_NAMES


def test_defaults() -> None:
    config = AlertSourcesConfig()

    assert [config.for_source(name).type_path for name in SOURCE_NAMES] == [
        "labels.alertname",
        "labels.alertname",
        "service",
        "Trigger.Namespace",
    ]
    for name in SOURCE_NAMES:
        block = config.for_source(name)
        assert block.source == name
        assert block.alert_type is None
        assert block.dedup_window_seconds == 3600
        assert block.cancel_on_resolve is False
        assert block.max_alerts_per_notification == 100
    assert config.pagerduty.signing_secrets == []
    assert config.sns.allowed_topic_arns == []
    assert config.sns.cert_host_pattern == DEFAULT_CERT_HOST_PATTERN


def test_a_full_section_loads() -> None:
    config = AlertSourcesConfig.model_validate(
        {
            "alertmanager": {"alert_type_from": "labels.team", "cancel_on_resolve": True},
            "grafana": {"alert_type": "grafana-alert", "dedup_window_seconds": 0},
            "pagerduty": {
                "signing_secrets": ["PAGERDUTY_SIGNING_SECRET", "projects/p/secrets/pd-old"],
                "max_alerts_per_notification": 1,
            },
            "sns": {
                "allowed_topic_arns": [
                    "arn:aws:sns:eu-west-1:111122223333:alarms",
                    "arn:aws-cn:sns:cn-north-1:111122223333:alarms.fifo",
                ],
                "cert_host_pattern": r"^sns\.eu-west-1\.amazonaws\.com$",
            },
        }
    )

    assert config.alertmanager.type_path == "labels.team"
    assert config.grafana.alert_type == "grafana-alert"
    assert config.pagerduty.signing_secrets[1] == "projects/p/secrets/pd-old"
    assert len(config.sns.allowed_topic_arns) == 2


@pytest.mark.parametrize(
    ("section", "loc", "needle"),
    [
        (
            {"alertmanager": {"alert_type_from": "labels"}},
            ("alertmanager", "alert_type_from"),
            "labels.<name>",
        ),
        (
            {"alertmanager": {"alert_type_from": "status"}},
            ("alertmanager", "alert_type_from"),
            "no field 'status'",
        ),
        (
            {"grafana": {"alert_type_from": "labels..x"}},
            ("grafana", "alert_type_from"),
            "dotted path",
        ),
        (
            {"pagerduty": {"alert_type_from": "labels.alertname"}},
            ("pagerduty", "alert_type_from"),
            "no field 'labels'",
        ),
        (
            {"sns": {"alert_type_from": "Trigger.Namespace.x", "alert_type": "x"}},
            ("sns", "alert_type"),
            "not both",
        ),
        ({"grafana": {"alert_type": ""}}, ("grafana", "alert_type"), "1 to 200"),
        ({"grafana": {"alert_type": "a;b"}}, ("grafana", "alert_type"), "1 to 200"),
        (
            {"alertmanager": {"dedup_window_seconds": -1}},
            ("alertmanager", "dedup_window_seconds"),
            "greater than or equal",
        ),
        (
            {"alertmanager": {"max_alerts_per_notification": 0}},
            ("alertmanager", "max_alerts_per_notification"),
            "greater than or equal",
        ),
        (
            {"alertmanager": {"cancel_on_resolve": "sometimes"}},
            ("alertmanager", "cancel_on_resolve"),
            "boolean",
        ),
        (
            {"pagerduty": {"signing_secrets": ["has space"]}},
            ("pagerduty", "signing_secrets", 0),
            "secret reference",
        ),
        ({"pagerduty": {"signing_secrets": ["A", "A"]}}, ("pagerduty", "signing_secrets"), "twice"),
        (
            {"sns": {"allowed_topic_arns": ["alarms"]}},
            ("sns", "allowed_topic_arns", 0),
            "topic ARN",
        ),
        (
            {"sns": {"allowed_topic_arns": ["arn:aws:sns:eu-west-1:12:alarms"]}},
            ("sns", "allowed_topic_arns", 0),
            "topic ARN",
        ),
        (
            {"sns": {"cert_host_pattern": "(unclosed"}},
            ("sns", "cert_host_pattern"),
            "regular expression",
        ),
        ({"sns": {"signing_secrets": ["X"]}}, ("sns", "signing_secrets"), "Extra inputs"),
        ({"alertmanager": {"alerttype": "x"}}, ("alertmanager", "alerttype"), "Extra inputs"),
        ({"opsgenie": {}}, ("opsgenie",), "Extra inputs"),
    ],
)
def test_errors_are_field_level(section: dict[str, Any], loc: tuple[Any, ...], needle: str) -> None:
    with pytest.raises(ValidationError) as raised:
        AlertSourcesConfig.model_validate(section)

    errors = raised.value.errors()
    assert [e["loc"] for e in errors] == [loc]
    assert needle in errors[0]["msg"]


def test_config_is_frozen() -> None:
    config = AlertSourcesConfig()
    with pytest.raises(ValidationError):
        config.alertmanager.dedup_window_seconds = 5  # type: ignore[misc]

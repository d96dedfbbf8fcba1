"""PagerDuty V3 webhooks: triggered starts, resolved resolves, everything else is ignored."""

from __future__ import annotations

from typing import Any

import pytest

from tarsy.intake.sources.config import PagerDutySourceConfig
from tarsy.intake.sources.errors import PayloadShapeError
from tarsy.intake.sources.normalized import AlertEvent
from tarsy.intake.sources.pagerduty import normalize_pagerduty, parse_pagerduty
from tests.unit.sources.samples import as_body, fixture_bytes, fixture_json

CONFIG = PagerDutySourceConfig()


@pytest.mark.parametrize(
    ("name", "event", "fingerprint"),
    [
        ("pagerduty_incident_triggered.json", "firing", "Q2K7V9XPL3M0TA"),
        ("pagerduty_incident_resolved.json", "resolved", "Q2K7V9XPL3M0TA"),
        ("pagerduty_incident_acknowledged.json", "ignored", "Q2K7V9XPL3M0TA"),
        ("pagerduty_ping.json", "ignored", "01FB7TA0000PINGPINGPINGPIN"),
    ],
)
def test_outcomes_and_keys(name: str, event: AlertEvent, fingerprint: str) -> None:
    (alert,) = normalize_pagerduty(parse_pagerduty(fixture_bytes(name)), CONFIG)

    assert (alert.source, alert.event, alert.fingerprint, alert.alert_key) == (
        "pagerduty",
        event,
        fingerprint,
        fingerprint,
    )
    assert (alert.reason is None) == (event != "ignored")


def test_triggered_incident_data() -> None:
    (alert,) = normalize_pagerduty(
        parse_pagerduty(fixture_bytes("pagerduty_incident_triggered.json")), CONFIG
    )

    assert alert.data["title"] == "Checkout API error rate above 5%"
    assert alert.data["service"] == "checkout-api (production)"
    assert alert.data["urgency"] == "high"
    assert alert.data["priority"] == "P1"
    assert alert.data["html_url"] == "https://acme-sre.pagerduty.com/incidents/Q2K7V9XPL3M0TA"
    assert alert.data["incident_number"] == 4821
    assert alert.data["teams"] == ["Payments"]
    assert alert.data["event_type"] == "incident.triggered"
    assert alert.alert_type == "checkout-api _production_"
    assert alert.runbook is None


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("incident.reopened", None),
        ("incident.escalated", None),
        ("incident.priority_updated", None),
        ("incident.unacknowledged", None),
        (
            "incident.annotated",
            {
                "incident": {"id": "Q2K7V9XPL3M0TA", "type": "incident_reference"},
                "id": "P2LA89X",
                "content": "looking into it",
                "type": "incident_note",
            },
        ),
        ("service.updated", {"id": "PX7Q2RS", "type": "service", "summary": "checkout-api"}),
    ],
)
def test_every_other_event_type_is_ignored(event_type: str, data: dict[str, Any] | None) -> None:
    payload = fixture_json("pagerduty_incident_acknowledged.json")
    payload["event"]["event_type"] = event_type
    if data is not None:
        payload["event"]["data"] = data

    (alert,) = normalize_pagerduty(parse_pagerduty(as_body(payload)), CONFIG)

    assert alert.event == "ignored"
    assert alert.reason is not None and event_type in alert.reason
    expected = "01FB7TR41M9WB2A6F8Z2C5Q7KD" if event_type == "service.updated" else "Q2K7V9XPL3M0TA"
    assert alert.fingerprint == expected


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "checkout-api _production_"),
        ({"alert_type_from": "priority"}, "P1"),
        ({"alert_type_from": "urgency"}, "high"),
        ({"alert_type_from": "escalation_policy"}, "Payments on-call"),
        ({"alert_type": "pagerduty-incident"}, "pagerduty-incident"),
    ],
)
def test_alert_type_mapping(config: dict[str, Any], expected: str) -> None:
    (alert,) = normalize_pagerduty(
        parse_pagerduty(fixture_bytes("pagerduty_incident_triggered.json")),
        PagerDutySourceConfig.model_validate(config),
    )

    assert alert.alert_type == expected


def test_missing_priority_falls_back_to_the_source_name() -> None:
    payload = fixture_json("pagerduty_incident_triggered.json")
    payload["event"]["data"]["priority"] = None
    config = PagerDutySourceConfig(alert_type_from="priority")

    (alert,) = normalize_pagerduty(parse_pagerduty(as_body(payload)), config)

    assert alert.data["priority"] is None
    assert alert.alert_type == "pagerduty"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.pop("event"), "event"),
        (lambda p: p["event"].pop("event_type"), "event.event_type"),
        (lambda p: p["event"].pop("id"), "event.id"),
        (lambda p: p["event"]["data"].pop("id"), "event.data.id"),
        (lambda p: p["event"].update(data=None), "event.data"),
        (lambda p: p["event"]["data"].update(number="four"), "event.data.number"),
    ],
)
def test_shape_errors_name_the_field(mutate: Any, field: str) -> None:
    payload = fixture_json("pagerduty_incident_triggered.json")
    mutate(payload)

    with pytest.raises(PayloadShapeError) as raised:
        normalize_pagerduty(parse_pagerduty(as_body(payload)), CONFIG)

    assert raised.value.status == 422
    assert raised.value.fields == [field]

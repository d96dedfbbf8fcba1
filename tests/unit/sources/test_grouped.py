"""Alertmanager and Grafana: one normalized alert per alert of a group, strict where it matters."""

from __future__ import annotations

from typing import Any

import pytest

from tarsy.intake.sources.alertmanager import (
    AlertmanagerReceiver,
    normalize_alertmanager,
    parse_alertmanager,
)
from tarsy.intake.sources.config import (
    AlertmanagerSourceConfig,
    AlertSourcesConfig,
    GrafanaSourceConfig,
)
from tarsy.intake.sources.errors import MalformedBodyError, PayloadShapeError
from tarsy.intake.sources.grafana import GrafanaReceiver, normalize_grafana, parse_grafana
from tarsy.intake.sources.normalized import NormalizedAlert, source_digest
from tarsy.intake.sources.pagerduty import PagerDutyReceiver
from tests.unit.sources.samples import as_body, fixture_bytes, fixture_json

AM = AlertmanagerSourceConfig()
GRAFANA = GrafanaSourceConfig()


def am_alerts(name: str) -> list[NormalizedAlert]:
    return normalize_alertmanager(parse_alertmanager(fixture_bytes(name)), AM)


def test_alertmanager_firing_group_becomes_one_alert_per_alert() -> None:
    alerts = normalize_alertmanager(
        parse_alertmanager(fixture_bytes("alertmanager_firing_group.json")), AM
    )

    assert [(a.source, a.fingerprint, a.event, a.alert_type) for a in alerts] == [
        ("alertmanager", "5f1a3c2b9e8d7a64", "firing", "KubePodCrashLooping"),
        ("alertmanager", "a07c44e1d2b3f985", "firing", "KubePodCrashLooping"),
    ]
    first, second = alerts
    assert first.alert_key == first.fingerprint
    assert first.runbook == "https://runbooks.example.com/kubernetes/KubePodCrashLooping"
    assert second.runbook is None
    assert first.data["labels"]["pod"] == "checkout-api-7d9c8b6f5-x2k4q"
    assert second.data["labels"]["pod"] == "checkout-worker-6b5c4d3e2-p9m8n"
    assert first.data["annotations"]["summary"].startswith("Pod checkout/checkout-api")
    assert first.data["startsAt"] == "2026-11-20T08:14:31.517Z"
    assert first.data["generatorURL"].startswith("http://prometheus.monitoring.svc:9090/graph")
    assert first.data["commonLabels"] == {
        "alertname": "KubePodCrashLooping",
        "namespace": "checkout",
        "severity": "critical",
        "prometheus": "monitoring/k8s",
    }
    assert first.data["externalURL"] == "http://alertmanager.monitoring.svc:9093"
    assert all(a.reason is None for a in alerts)


def test_alertmanager_resolved_matches_the_firing_fingerprint() -> None:
    firing = normalize_alertmanager(
        parse_alertmanager(fixture_bytes("alertmanager_firing_group.json")), AM
    )
    resolved = normalize_alertmanager(
        parse_alertmanager(fixture_bytes("alertmanager_resolved.json")), AM
    )

    assert [(a.event, a.fingerprint) for a in resolved] == [("resolved", "5f1a3c2b9e8d7a64")]
    assert resolved[0].resolve_key == firing[0].resolve_key == firing[0].dedup_key


def test_a_firing_group_can_carry_a_resolved_alert() -> None:
    payload = fixture_json("alertmanager_firing_group.json")
    payload["alerts"][1]["status"] = "resolved"

    alerts = normalize_alertmanager(parse_alertmanager(as_body(payload)), AM)

    assert [a.event for a in alerts] == ["firing", "resolved"]


def test_grafana_firing_keeps_its_links_and_values() -> None:
    (alert,) = normalize_grafana(parse_grafana(fixture_bytes("grafana_firing.json")), GRAFANA)

    assert (alert.source, alert.fingerprint, alert.event) == (
        "grafana",
        "3e9b0f61c2d4a857",
        "firing",
    )
    assert alert.alert_type == "HighRequestLatency"
    assert alert.runbook == "https://runbooks.example.com/checkout/high-latency"
    assert alert.data["values"] == {"A": 2.417, "C": 1}
    assert alert.data["dashboardURL"] == "https://grafana.example.com/d/checkout-slo?orgId=1"
    assert alert.data["silenceURL"].startswith("https://grafana.example.com/alerting/silence/new")
    assert alert.data["orgId"] == 1
    assert alert.data["externalURL"] == "https://grafana.example.com/"
    assert "imageURL" not in alert.data  # empty extras are left out
    assert "message" not in alert.data


def test_grafana_resolved() -> None:
    (alert,) = normalize_grafana(parse_grafana(fixture_bytes("grafana_resolved.json")), GRAFANA)

    assert (alert.event, alert.fingerprint) == ("resolved", "3e9b0f61c2d4a857")


def test_grafana_and_alertmanager_keys_do_not_collide() -> None:
    assert source_digest("grafana", "abc") != source_digest("alertmanager", "abc")
    assert "/" not in source_digest("sns", "arn:aws:cloudwatch:eu-west-1:1:alarm:a/b")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, ["KubePodCrashLooping", "KubePodCrashLooping"]),
        ({"alert_type_from": "labels.container"}, ["api", "worker"]),
        ({"alert_type_from": "labels.severity"}, ["critical", "critical"]),
        ({"alert_type_from": "commonLabels.namespace"}, ["checkout", "checkout"]),
        ({"alert_type_from": "labels.no_such_label"}, ["alertmanager", "alertmanager"]),
        ({"alert_type": "kubernetes"}, ["kubernetes", "kubernetes"]),
    ],
)
def test_alert_type_mapping(config: dict[str, Any], expected: list[str]) -> None:
    sources = AlertSourcesConfig.model_validate({"alertmanager": config})
    body = fixture_bytes("alertmanager_firing_group.json")

    alerts = AlertmanagerReceiver().alerts(body.decode(), sources)

    assert [a.alert_type for a in alerts] == expected


def test_the_grafana_and_pagerduty_receivers_give_their_alerts() -> None:
    sources = AlertSourcesConfig()

    grafana = GrafanaReceiver().alerts(fixture_bytes("grafana_firing.json").decode(), sources)
    pagerduty = PagerDutyReceiver().alerts(
        fixture_bytes("pagerduty_incident_triggered.json").decode(), sources
    )

    assert [(a.source, a.event) for a in grafana + pagerduty] == [
        ("grafana", "firing"),
        ("pagerduty", "firing"),
    ]


def test_extra_fields_are_tolerated() -> None:
    payload = fixture_json("alertmanager_firing_group.json")
    payload["someNewField"] = {"added": "by a later Alertmanager"}
    payload["alerts"][0]["anotherNewField"] = 1

    alerts = normalize_alertmanager(parse_alertmanager(as_body(payload)), AM)

    assert len(alerts) == 2
    assert "anotherNewField" not in alerts[0].data


def test_cap_applies_to_a_big_group() -> None:
    payload = fixture_json("alertmanager_firing_group.json")
    template = payload["alerts"][0]
    payload["alerts"] = [dict(template, fingerprint=f"{i:016x}") for i in range(5)]
    config = AlertmanagerSourceConfig(max_alerts_per_notification=3)

    alerts = normalize_alertmanager(parse_alertmanager(as_body(payload)), config)

    assert [a.event for a in alerts] == ["firing"] * 3 + ["ignored"] * 2
    assert alerts[3].reason is not None and "max_alerts_per_notification (3)" in alerts[3].reason
    assert [a.fingerprint for a in alerts] == [f"{i:016x}" for i in range(5)]


def _mutate(name: str, path: list[str | int], value: Any) -> bytes:
    payload = fixture_json(name)
    target: Any = payload
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return as_body(payload)


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "kind"),
    [
        (["version"], "3", "version", "literal_error"),
        (["version"], 4, "version", "literal_error"),
        (["version"], _DELETE, "version", "missing"),
        (["alerts"], _DELETE, "alerts", "missing"),
        (["alerts"], {"not": "a list"}, "alerts", "list_type"),
        (["status"], "pending", "status", "literal_error"),
        (["alerts", 0, "status"], "pending", "alerts.0.status", "literal_error"),
        (["alerts", 1, "fingerprint"], _DELETE, "alerts.1.fingerprint", "missing"),
        (["alerts", 1, "fingerprint"], "", "alerts.1.fingerprint", "string_too_short"),
        (["alerts", 0, "labels", "severity"], 3, "alerts.0.labels.severity", "string_type"),
        (["alerts", 0, "labels"], _DELETE, "alerts.0.labels", "missing"),
        (["truncatedAlerts"], -1, "truncatedAlerts", "greater_than_equal"),
    ],
)
def test_alertmanager_shape_errors_name_the_field(
    path: list[str | int], value: Any, field: str, kind: str
) -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_alertmanager(_mutate("alertmanager_firing_group.json", path, value))

    error = raised.value
    assert error.status == 422
    assert field in error.fields
    assert any(entry["field"] == field and entry["type"] == kind for entry in error.problems)
    assert all(set(entry) == {"field", "message", "type"} for entry in error.problems)


def test_grafana_body_on_the_alertmanager_route_is_refused_by_version() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_alertmanager(fixture_bytes("grafana_firing.json"))

    assert raised.value.fields == ["version"]


def test_grafana_requires_its_own_version() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_grafana(fixture_bytes("alertmanager_firing_group.json"))

    assert raised.value.fields == ["version"]


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe", b"[1, 2"])
def test_malformed_json_is_400(body: bytes) -> None:
    with pytest.raises(MalformedBodyError) as raised:
        parse_alertmanager(body)

    assert raised.value.status == 400


@pytest.mark.parametrize("body", [b"[]", b"null", b'"text"', b"4"])
def test_json_that_is_not_an_object_is_422(body: bytes) -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_grafana(body)

    assert raised.value.fields == ["(body)"]

"""Alerts posted to the Alertmanager API route (Grafana's "Alertmanager" contact point).

The bodies are hand-written (there is no Grafana binary here): the JSON
encoding of the ``[]*types.Alert`` that grafana/alerting's Alertmanager
notifier posts, checked against Alertmanager's ``postableAlert`` in its
``api/v2/openapi.yaml``. The clock is passed in, so firing and resolved are
decided against a fixed "now".
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tarsy.intake.sources.alertmanager_api import (
    AlertmanagerApiReceiver,
    label_fingerprint,
    normalize_alertmanager_api,
    parse_alertmanager_api,
)
from tarsy.intake.sources.config import AlertmanagerSourceConfig, AlertSourcesConfig
from tarsy.intake.sources.errors import MalformedBodyError, PayloadShapeError
from tarsy.intake.sources.normalized import NormalizedAlert
from tests.unit.sources.samples import as_body, fixture_bytes

AM = AlertmanagerSourceConfig()
# Two days after the fixtures' alerts started.
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def fixture_alerts(name: str) -> list[dict[str, Any]]:
    value = json.loads(fixture_bytes(name))
    assert isinstance(value, list)
    return value


def normalized(
    body: bytes, config: AlertmanagerSourceConfig = AM, now: datetime = NOW
) -> list[NormalizedAlert]:
    return normalize_alertmanager_api(parse_alertmanager_api(body), config, now)


def one_alert(**fields: Any) -> bytes:
    alert: dict[str, Any] = {"labels": {"alertname": "DiskFull", "instance": "db-1"}, **fields}
    return as_body([alert])


# ─── firing ──────────────────────────────────────────────────────────────────


def test_a_firing_post_becomes_one_firing_alert_per_alert() -> None:
    alerts = normalized(fixture_bytes("grafana_alertmanager_firing.json"))

    assert [(a.source, a.event, a.fingerprint, a.alert_type) for a in alerts] == [
        ("alertmanager", "firing", "643a98a69832f543", "HighRequestLatency"),
        ("alertmanager", "firing", "4568dbe401abfbd3", "HighRequestLatency"),
    ]
    first, second = alerts
    assert first.alert_key == first.fingerprint
    assert first.runbook == "https://runbooks.example.com/checkout/high-latency"
    assert second.runbook is None
    assert first.reason is None
    assert first.data == {
        "status": "firing",
        "labels": {
            "__alert_rule_uid__": "fe3k2mq8zr4sgc",
            "alertname": "HighRequestLatency",
            "grafana_folder": "Checkout",
            "service": "checkout-api",
            "severity": "warning",
            "team": "payments",
        },
        "annotations": fixture_alerts("grafana_alertmanager_firing.json")[0]["annotations"],
        "startsAt": "2026-11-21T14:02:10Z",
        "endsAt": "",  # Go's zero time: not set
        "generatorURL": "https://grafana.example.com/alerting/grafana/fe3k2mq8zr4sgc/view?orgId=1",
        "fingerprint": "643a98a69832f543",
        # One post of the contact point is one group: what all its alerts share.
        "commonLabels": {
            "__alert_rule_uid__": "fe3k2mq8zr4sgc",
            "alertname": "HighRequestLatency",
            "grafana_folder": "Checkout",
            "severity": "warning",
            "team": "payments",
        },
    }


def test_an_end_still_ahead_is_firing_as_prometheus_posts_it() -> None:
    body = one_alert(
        startsAt="2026-11-23T11:00:00Z", endsAt=(NOW + timedelta(minutes=4)).isoformat()
    )
    [alert] = normalized(body)
    assert alert.event == "firing"
    assert alert.data["endsAt"] == "2026-11-23T12:04:00Z"


def test_an_alert_without_times_fires() -> None:
    [alert] = normalized(one_alert())
    assert (alert.event, alert.data["startsAt"], alert.data["endsAt"]) == ("firing", "", "")
    assert alert.data["annotations"] == {} and alert.data["generatorURL"] == ""


# ─── resolved ────────────────────────────────────────────────────────────────


def test_a_past_end_is_resolved_and_matches_the_firing_alert() -> None:
    [firing, _] = normalized(fixture_bytes("grafana_alertmanager_firing.json"))
    [resolved] = normalized(fixture_bytes("grafana_alertmanager_resolved.json"))

    assert (resolved.event, resolved.fingerprint) == ("resolved", firing.fingerprint)
    assert resolved.resolve_key == firing.resolve_key == firing.dedup_key
    assert resolved.data["status"] == "resolved"
    assert resolved.data["endsAt"] == "2026-11-21T14:40:10Z"


@pytest.mark.parametrize(
    ("ends_at", "event"),
    [
        ("2026-11-23T12:00:01Z", "firing"),
        ("2026-11-23T12:00:00Z", "resolved"),  # "not after now", as Alertmanager decides
        ("2026-11-23T13:00:00+01:00", "resolved"),  # the same instant in another zone
        ("2026-11-23T13:00:01+01:00", "firing"),
        ("2026-11-23T11:59:59.999999999Z", "resolved"),  # Go's nanoseconds
    ],
)
def test_resolved_means_the_end_is_not_after_now(ends_at: str, event: str) -> None:
    [alert] = normalized(one_alert(startsAt="2026-11-23T11:00:00Z", endsAt=ends_at))
    assert alert.event == event


def test_the_clock_is_injected_through_the_receiver() -> None:
    body = fixture_bytes("grafana_alertmanager_resolved.json").decode()
    config = AlertSourcesConfig()
    before_the_end = datetime(2026, 11, 21, 14, 30, tzinfo=UTC)
    [early] = AlertmanagerApiReceiver(clock=lambda: before_the_end).alerts(body, config)
    [late] = AlertmanagerApiReceiver(clock=lambda: NOW).alerts(body, config)
    assert (early.event, late.event) == ("firing", "resolved")


# ─── the fingerprint ─────────────────────────────────────────────────────────


def test_the_fingerprint_is_alertmanagers_own() -> None:
    # prometheus/common model/signature_test.go: LabelsToSignature and labelSetToFingerprint.
    assert label_fingerprint({}) == f"{14695981039346656037:016x}"
    labels = {"name": "garland, briggs", "fear": "love is not enough"}
    assert label_fingerprint(labels) == f"{5799056148416392346:016x}"


def test_the_fingerprint_ignores_label_order_and_empty_labels() -> None:
    labels = {"alertname": "DiskFull", "instance": "db-1", "severity": "page"}
    reordered = dict(reversed(labels.items()))
    with_empty = {**labels, "pod": ""}

    fingerprints = {
        normalized(as_body([{"labels": variant}]))[0].fingerprint
        for variant in (labels, reordered, with_empty)
    }

    assert fingerprints == {label_fingerprint(labels)}
    other = normalized(as_body([{"labels": {**labels, "severity": "ticket"}}]))[0]
    assert other.fingerprint not in fingerprints


def test_the_fingerprint_separates_names_from_values() -> None:
    assert label_fingerprint({"ab": "c"}) != label_fingerprint({"a": "bc"})


def test_annotations_and_times_are_not_part_of_the_identity() -> None:
    a = one_alert(annotations={"summary": "one"}, startsAt="2026-11-23T10:00:00Z")
    b = one_alert(annotations={"summary": "two"}, startsAt="2026-11-23T11:00:00Z")
    assert normalized(a)[0].fingerprint == normalized(b)[0].fingerprint


def test_unicode_labels_hash_their_utf8_bytes_in_code_point_order() -> None:
    # "é" (U+00E9) sorts before "ü" (U+00FC) as code points and as UTF-8 bytes.
    labels = {"ü": "1", "é": "2"}
    assert label_fingerprint(labels) == label_fingerprint(dict(sorted(labels.items())))
    assert label_fingerprint(labels) != label_fingerprint({"ü": "2", "é": "1"})


# ─── mapping, cap ────────────────────────────────────────────────────────────


def test_alert_type_from_a_common_label_or_the_source_name() -> None:
    config = AlertmanagerSourceConfig(alert_type_from="commonLabels.team")
    alerts = normalized(fixture_bytes("grafana_alertmanager_firing.json"), config)
    assert {a.alert_type for a in alerts} == {"payments"}
    [unnamed] = normalized(as_body([{"labels": {"instance": "db-1"}}]))
    assert unnamed.alert_type == "alertmanager"  # no alertname: the default chain


def test_alerts_beyond_the_cap_are_ignored() -> None:
    config = AlertmanagerSourceConfig(max_alerts_per_notification=1)
    alerts = normalized(fixture_bytes("grafana_alertmanager_firing.json"), config)
    assert [a.event for a in alerts] == ["firing", "ignored"]
    assert "max_alerts_per_notification (1)" in (alerts[1].reason or "")


def test_an_empty_post_is_no_alert() -> None:
    assert normalized(b"[]") == []


def test_null_annotations_as_go_encodes_a_nil_map() -> None:
    [alert] = normalized(one_alert(annotations=None))
    assert alert.data["annotations"] == {}


# ─── bad bodies ──────────────────────────────────────────────────────────────

LABELS = {"alertname": "DiskFull"}

BAD_BODIES: dict[str, tuple[Any, list[str]]] = {
    "a-webhook-object": ({"version": "4", "alerts": []}, ["(body)"]),
    "an-item-not-an-object": ([{"labels": LABELS}, "DiskFull"], ["1"]),
    "no-labels": ([{"annotations": {}}], ["0.labels"]),
    "null-labels": ([{"labels": None}], ["0.labels"]),
    "no-label-with-a-value": ([{"labels": {"alertname": ""}}], ["0.labels"]),
    "a-label-not-a-string": ([{"labels": {"alertname": "x", "code": 500}}], ["0.labels.code"]),
    "an-annotation-not-a-string": (
        [{"labels": LABELS, "annotations": {"n": [1]}}],
        ["0.annotations.n"],
    ),
    "a-start-not-a-time": ([{"labels": LABELS, "startsAt": "yesterday"}], ["0.startsAt"]),
    "a-time-without-its-zone": (
        [{"labels": LABELS, "endsAt": "2026-11-23T10:00:00"}],
        ["0.endsAt"],
    ),
    "an-end-before-the-start": (
        [
            {"labels": LABELS},
            {
                "labels": LABELS,
                "startsAt": "2026-11-23T10:00:00Z",
                "endsAt": "2026-11-23T09:00:00Z",
            },
        ],
        ["1.endsAt"],
    ),
    "a-generator-url-not-a-string": ([{"labels": LABELS, "generatorURL": 7}], ["0.generatorURL"]),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_bodies_are_422_naming_the_field(case: str) -> None:
    payload, fields = BAD_BODIES[case]
    with pytest.raises(PayloadShapeError) as raised:
        parse_alertmanager_api(as_body(payload))
    assert raised.value.status == 422
    assert raised.value.fields == fields


def test_a_webhook_body_posted_here_says_where_it_goes() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_alertmanager_api(fixture_bytes("alertmanager_firing_group.json"))
    assert "/alerts/alertmanager" in raised.value.problems[0]["message"]


def test_not_json_is_400() -> None:
    with pytest.raises(MalformedBodyError) as raised:
        parse_alertmanager_api(b'[{"labels": ')
    assert raised.value.status == 400

"""Reading an alert type from alert data: cleaned, never refused, source name as fallback."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tarsy.intake.sources.alert_type import clean_alert_type, derive_alert_type, lookup
from tarsy.intake.sources.config import ALERT_TYPE_PATTERN, AlertmanagerSourceConfig

DATA: dict[str, Any] = {
    "labels": {"alertname": "KubePodCrashLooping", "team": "payments"},
    "annotations": {"summary": "x"},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("labels.alertname", "KubePodCrashLooping"),
        ("labels.missing", None),
        ("labels.alertname.deeper", None),
        ("annotations", {"summary": "x"}),
        ("nothing", None),
    ],
)
def test_lookup(path: str, expected: Any) -> None:
    assert lookup(DATA, path) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("HighCPU", "HighCPU"),
        ("AWS/RDS", "AWS/RDS"),
        ("  padded  ", "padded"),
        ("checkout-api (production)", "checkout-api _production_"),
        ("a;b|c", "a_b_c"),
        ("x" * 300, "x" * 200),
        ("Überlast", "Überlast"),
        (42, "42"),
        ("", None),
        ("   ", None),
        ("!!!", None),
        (None, None),
        (True, None),
        ({"a": 1}, None),
        (["a"], None),
    ],
)
def test_clean_alert_type(value: object, expected: str | None) -> None:
    cleaned = clean_alert_type(value)
    assert cleaned == expected
    if cleaned is not None:
        assert re.fullmatch(ALERT_TYPE_PATTERN, cleaned)
        assert len(cleaned) <= 200


@pytest.mark.parametrize(
    ("config", "data", "expected"),
    [
        (AlertmanagerSourceConfig(), DATA, "KubePodCrashLooping"),
        (AlertmanagerSourceConfig(alert_type_from="labels.team"), DATA, "payments"),
        (AlertmanagerSourceConfig(alert_type_from="labels.nope"), DATA, "alertmanager"),
        (AlertmanagerSourceConfig(), {"labels": {"alertname": "()"}}, "alertmanager"),
        (AlertmanagerSourceConfig(alert_type="fixed"), DATA, "fixed"),
        (AlertmanagerSourceConfig(alert_type="fixed"), {}, "fixed"),
    ],
)
def test_derive_alert_type(
    config: AlertmanagerSourceConfig, data: dict[str, Any], expected: str
) -> None:
    assert derive_alert_type(data, config) == expected

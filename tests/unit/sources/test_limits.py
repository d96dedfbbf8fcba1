"""The per-notification cap: first N processed, the rest reported ignored."""

from __future__ import annotations

import pytest

from tarsy.intake.sources.limits import cap_alerts, over_cap_reason
from tarsy.intake.sources.normalized import AlertEvent, NormalizedAlert


def alert(i: int, event: AlertEvent = "firing", reason: str | None = None) -> NormalizedAlert:
    return NormalizedAlert(
        source="alertmanager",
        fingerprint=f"fp{i}",
        alert_key=f"fp{i}",
        event=event,
        reason=reason,
        alert_type="T",
        data={"i": i},
    )


@pytest.mark.parametrize(
    ("count", "limit", "processed"),
    [(0, 1, 0), (1, 1, 1), (3, 5, 3), (5, 5, 5), (6, 5, 5), (250, 100, 100)],
)
def test_first_n_processed_rest_ignored(count: int, limit: int, processed: int) -> None:
    alerts = [alert(i) for i in range(count)]

    capped = cap_alerts(alerts, limit)

    assert len(capped) == count
    assert [a.fingerprint for a in capped] == [a.fingerprint for a in alerts]
    assert [a.event for a in capped] == ["firing"] * processed + ["ignored"] * (count - processed)
    assert all(a.reason == over_cap_reason(limit) for a in capped[processed:])
    assert capped[:processed] == alerts[:processed]


def test_resolutions_count_and_ignored_keep_their_reason() -> None:
    alerts = [
        alert(0, "resolved"),
        alert(1, "ignored", "own reason"),
        alert(2),
        alert(3, "ignored", "x"),
    ]

    capped = cap_alerts(alerts, 1)

    assert [(a.event, a.reason) for a in capped] == [
        ("resolved", None),
        ("ignored", "own reason"),
        ("ignored", over_cap_reason(1)),
        ("ignored", "x"),
    ]


def test_input_is_not_modified() -> None:
    alerts = [alert(0), alert(1)]
    cap_alerts(alerts, 1)
    assert [a.event for a in alerts] == ["firing", "firing"]


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        cap_alerts([alert(0)], 0)


def test_stable_across_redeliveries() -> None:
    alerts = [alert(i) for i in range(10)]
    first = cap_alerts(alerts, 4)
    second = cap_alerts(list(alerts), 4)
    assert [a.dedup_key for a in first if a.event == "firing"] == [
        a.dedup_key for a in second if a.event == "firing"
    ]

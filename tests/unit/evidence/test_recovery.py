"""Recovery: what the alert names turned healthy after the alert began."""

from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import recovery
from tarsy.evidence.snapshot import AlertFacts

from .cluster import T0, deployment, iso, pod, snapshot

ALERT = AlertFacts(
    name="ReplicasMismatch", labels={"namespace": "orders", "deployment": "api"}, starts_at=T0
)


def _available(since: float) -> list[dict[str, Any]]:
    return [{"type": "Available", "status": "True", "lastTransitionTime": iso(since)}]


def test_a_deployment_whole_again_after_the_alert_began_recovered() -> None:
    cluster = snapshot(
        deployment("api", replicas=3, ready=3, conditions=_available(2)), alert=ALERT
    )
    [found] = recovery.recovered(cluster)
    assert found.severity == 1 and found.subject.name == "api"
    assert found.finding == (
        f"Deployment orders/api recovered after the alert began: Available=True since {iso(2)} "
        f"(2 min after the alert's start at {iso(0)}), and 3 of 3 replicas are available and up "
        "to date now; what the alert reports no longer holds."
    )


def test_healthy_since_before_the_alert_or_still_short_is_no_recovery() -> None:
    before = snapshot(
        deployment("api", replicas=3, ready=3, conditions=_available(-30)), alert=ALERT
    )
    short = snapshot(deployment("api", replicas=3, ready=2, conditions=_available(2)), alert=ALERT)
    other = snapshot(deployment("web", replicas=3, ready=3, conditions=_available(2)), alert=ALERT)
    assert recovery.recovered(before) == []
    assert recovery.recovered(short) == []
    assert recovery.recovered(other) == []  # not the alert's


def test_the_alerts_pod_ready_again_after_the_alert_began_recovered() -> None:
    alert = AlertFacts(name="PodNotReady", labels={"namespace": "orders", "pod": "api-0"},
                       starts_at=T0)  # fmt: skip
    ready = pod("api-0")
    ready.status["conditions"] = [
        {"type": "Ready", "status": "True", "lastTransitionTime": iso(0.5)}
    ]
    [found] = recovery.recovered(snapshot(ready, alert=alert))
    assert found.finding.startswith(
        f"Pod orders/api-0 recovered after the alert began: Ready since {iso(0.5)} "
        "(under a minute after"
    )

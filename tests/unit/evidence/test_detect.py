from __future__ import annotations

import pytest

from tarsy.evidence import detections
from tarsy.evidence.detections import CHECKS, detect
from tarsy.evidence.snapshot import Detection, ObjectRef, Snapshot

from .cluster import container, log, pod, running, snapshot, terminated, waiting


def _sick_cluster() -> Snapshot:
    crashing = pod(
        "api-1",
        statuses=[
            waiting("app", "CrashLoopBackOff", restarts=5, last=terminated("OOMKilled", 137))
        ],
    )
    crashing.spec["containers"] = [container("app", resources={"limits": {"memory": "64Mi"}})]
    return snapshot(
        crashing, log("api-1", "fatal: out of memory"), pod("web-1", statuses=[running()])
    )


def test_detect_orders_likely_causes_before_symptoms() -> None:
    found = detect(_sick_cluster())
    assert [d.check for d in found] == ["oom_killed", "crash_loop", "log_signals"]
    assert [d.severity for d in found] == [1, 2, 2]


def test_a_disabled_check_is_not_run() -> None:
    found = detect(_sick_cluster(), disabled={"oom_killed"})
    assert [d.check for d in found] == ["crash_loop", "log_signals"]


def test_a_healthy_cluster_has_no_findings() -> None:
    assert detect(snapshot(pod("web-1"), pod("web-2"))) == []


def test_repeated_findings_are_kept_once_and_a_failing_check_hides_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    same = Detection(
        check="twice", subject=ObjectRef(kind="Pod", name="p"), finding="same", severity=3
    )

    def twice(_: Snapshot) -> list[Detection]:
        return [same, same]

    def broken(_: Snapshot) -> list[Detection]:
        raise KeyError("a defect")

    monkeypatch.setattr(detections, "CHECKS", {"broken": broken, "twice": twice})
    assert detections.detect(Snapshot()) == [same]


def test_every_check_is_registered_by_the_name_its_findings_carry() -> None:
    assert {
        "crash_loop",
        "oom_killed",
        "image_pull",
        "config_drift",
        "unresolvable_host",
        "quota_exhausted",
        "unschedulable",
        "probe_failure",
        "evicted",
        "network_policy_blocks",
        "certificate",
        "rollout_regression",
        "node_saturation",
        "deployment_unavailable",
        "progress_deadline",
        "service_no_endpoints",
        "pvc_pending",
    } <= set(CHECKS)
    for check in CHECKS.values():
        assert check(Snapshot()) == []


def test_within_a_severity_the_finding_that_explains_comes_before_the_one_that_shows() -> None:
    from .cluster import event, obj

    config_map = obj(
        "ConfigMap",
        "api-env",
        data={"DB": "db2"},
        metadata={
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"data": {"DB": "db"}}'
            }
        },
    )
    reader = pod(
        "api-1",
        containers=[container("app", envFrom=[{"configMapRef": {"name": "api-env"}}])],
        statuses=[
            waiting("app", "CrashLoopBackOff", restarts=3, last=terminated("OOMKilled", 137))
        ],
    )
    found = detect(snapshot(reader, config_map, event(reader, "Evicted", "low on memory")))
    assert [d.check for d in found] == ["config_drift", "oom_killed", "crash_loop", "evicted"]

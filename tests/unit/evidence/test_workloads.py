from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import workloads
from tarsy.evidence.snapshot import KubeObject, ObjectRef

from .cluster import container, event, iso, obj, snapshot


def _replica_set(**status: Any) -> KubeObject:
    return obj("ReplicaSet", "billing-7d9", spec={"replicas": 3}, status={"replicas": 0, **status})


def test_a_replica_set_that_cannot_create_pods_quotes_the_controllers_reason() -> None:
    rs = _replica_set()
    denied = event(rs, "FailedCreate", 'pods "billing-7d9-x" is forbidden: exceeded quota: q1')
    [found] = workloads.replica_set_failed_create(snapshot(rs, denied))
    assert found.severity == 1
    assert "ReplicaSet orders/billing-7d9 cannot create its pods (0 of 3 exist)" in found.finding
    assert "exceeded quota: q1" in found.finding
    assert found.evidence == [rs.source, denied.source]


def test_a_replica_failure_condition_alone_is_enough() -> None:
    failure = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'serviceaccount "builder" not found',
    }
    [found] = workloads.replica_set_failed_create(snapshot(_replica_set(conditions=[failure])))
    assert "ReplicaFailure=True (FailedCreate: serviceaccount 'builder' not found)" in (
        found.finding.replace('"', "'")
    )
    assert workloads.replica_set_failed_create(snapshot(_replica_set())) == []


def _stateful_set(ready: int, **spec: Any) -> KubeObject:
    return obj(
        "StatefulSet",
        "store",
        spec={"replicas": 3, **spec},
        status={"readyReplicas": ready, "currentRevision": "store-1", "updateRevision": "store-1"},
    )


def test_a_statefulset_naming_a_missing_service_and_class_says_which() -> None:
    sts = _stateful_set(
        0,
        serviceName="store-headless",
        volumeClaimTemplates=[{"spec": {"storageClassName": "fast-ssd"}}],
    )
    missing = [
        ObjectRef(kind="Service", name="store-headless", namespace="orders"),
        ObjectRef(kind="StorageClass", name="fast-ssd"),
    ]
    [found] = workloads.statefulset_not_ready(snapshot(sts, *missing))
    assert found.severity == 1
    assert "has 0 of 3 replicas ready" in found.finding
    assert "governing Service orders/store-headless does not exist" in found.finding
    assert "StorageClass fast-ssd of its volumeClaimTemplates does not exist" in found.finding


def test_a_short_statefulset_is_a_symptom_and_a_full_one_is_quiet() -> None:
    [found] = workloads.statefulset_not_ready(snapshot(_stateful_set(1, serviceName="s")))
    assert found.severity == 2 and "1 of 3 replicas ready." in found.finding
    assert workloads.statefulset_not_ready(snapshot(_stateful_set(3, serviceName="s"))) == []


def test_a_daemonset_with_unavailable_pods_gives_the_counts() -> None:
    ds = obj(
        "DaemonSet",
        "agent",
        status={"desiredNumberScheduled": 4, "numberReady": 2, "numberUnavailable": 2},
    )
    [found] = workloads.daemonset_unavailable(snapshot(ds))
    assert "DaemonSet orders/agent has 2 of 4 pods ready (2 unavailable)." == found.finding


def test_schedules_are_validated_by_field_count_syntax_and_range() -> None:
    assert workloads.schedule_problem("*/5 * * * *") == ""
    assert workloads.schedule_problem("0 3 * * MON-FRI") == ""
    assert workloads.schedule_problem("@hourly") == ""
    assert workloads.schedule_problem("CRON_TZ=UTC 0 3 * * *") == ""
    assert "has 4 fields, not 5" in workloads.schedule_problem("0 3 * *")
    assert 'invalid field "61"' in workloads.schedule_problem("61 * * * *")
    assert 'invalid field "x?y"' in workloads.schedule_problem("0 x?y * * *")
    assert workloads.schedule_problem("") == "it has no schedule"


def _cron(**spec: Any) -> KubeObject:
    return obj(
        "CronJob",
        "nightly",
        spec={"schedule": "0 2 * * *", **spec},
        status={"lastScheduleTime": iso(-600)},
    )


def _job(name: str, created: float, failed: bool) -> KubeObject:
    conditions = (
        [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ]
        if failed
        else []
    )
    return obj(
        "Job",
        name,
        metadata={
            "ownerReferences": [{"kind": "CronJob", "name": "nightly"}],
            "creationTimestamp": iso(created),
        },
        status={"conditions": conditions},
    )


def test_a_cronjob_suspended_with_a_bad_schedule_and_a_failed_last_job_says_all_three() -> None:
    cron = _cron(schedule="0 2 * *", suspend=True)
    found = workloads.cronjob_problems(
        snapshot(cron, _job("nightly-1", -1500, False), _job("nightly-2", -60, True))
    )
    texts = [f.finding for f in found]
    assert [f.severity for f in found] == [1, 2, 2]
    assert "never runs: its schedule" in texts[0]
    assert "is suspended (spec.suspend: true); it last ran at" in texts[1]
    assert "newest Job nightly-2 failed: Failed=True (BackoffLimitExceeded" in texts[2]


def test_a_cronjob_whose_newest_job_succeeded_is_quiet() -> None:
    cron = _cron()
    assert (
        workloads.cronjob_problems(
            snapshot(cron, _job("nightly-1", -1500, True), _job("nightly-2", -60, False))
        )
        == []
    )


def _hpa(**status: Any) -> KubeObject:
    return obj(
        "HorizontalPodAutoscaler",
        "web",
        spec={
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
        },
        status={"currentReplicas": 2, "desiredReplicas": 2, **status},
    )


def _web(requests: dict[str, str]) -> KubeObject:
    template = {"spec": {"containers": [container("web", resources={"requests": requests})]}}
    return obj("Deployment", "web", spec={"template": template})


def test_an_hpa_on_cpu_over_containers_without_cpu_requests_cannot_scale() -> None:
    hpa, web = _hpa(), _web({"memory": "128Mi"})
    [found] = workloads.hpa_problems(snapshot(hpa, web))
    assert found.severity == 1
    assert "scales on cpu utilization but Deployment web's containers web request no cpu" in (
        found.finding
    )
    assert found.evidence == [hpa.source, web.source]


def test_an_hpa_whose_target_is_missing_says_so() -> None:
    missing = ObjectRef(kind="Deployment", name="web", namespace="orders")
    [found] = workloads.hpa_problems(snapshot(_hpa(), missing))
    assert "its scale target Deployment orders/web does not exist" in found.finding


def test_an_hpa_at_its_maximum_is_a_capacity_ceiling() -> None:
    [found] = workloads.hpa_problems(
        snapshot(_hpa(currentReplicas=5, desiredReplicas=5), _web({"cpu": "100m"}))
    )
    assert found.severity == 2
    assert "is at its maximum of 5 replicas (5 running, 5 desired)" in found.finding
    assert workloads.hpa_problems(snapshot(_hpa(), _web({"cpu": "100m"}))) == []


def test_an_hpa_that_cannot_read_its_metric_quotes_the_condition() -> None:
    inactive = {
        "type": "ScalingActive",
        "status": "False",
        "reason": "FailedGetResourceMetric",
        "message": "unable to get metrics for resource cpu",
    }
    [found] = workloads.hpa_problems(snapshot(_hpa(conditions=[inactive])))
    assert "ScalingActive=False (FailedGetResourceMetric: unable to get metrics" in found.finding


def _pdb(healthy: int, desired: int, expected: int) -> KubeObject:
    return obj(
        "PodDisruptionBudget",
        "db",
        spec={"minAvailable": 3},
        status={
            "disruptionsAllowed": 0,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        },
    )


def test_a_pdb_that_allows_no_disruption_says_why_and_how_much_it_matters() -> None:
    [tight] = workloads.pdb_blocks(snapshot(_pdb(3, 3, 3)))
    assert tight.severity == 3
    assert "allows no disruption: 3 of 3 pods healthy, 3 required (minAvailable 3)" in (
        tight.finding
    )
    [short] = workloads.pdb_blocks(snapshot(_pdb(1, 3, 3)))
    assert short.severity == 2 and "fewer pods are healthy than it requires" in short.finding
    [empty] = workloads.pdb_blocks(snapshot(_pdb(0, 0, 0)))
    assert "selects no pod" in empty.finding


def test_a_pdb_that_allows_disruptions_is_quiet() -> None:
    pdb = _pdb(3, 2, 3)
    pdb.body["status"]["disruptionsAllowed"] = 1
    assert workloads.pdb_blocks(snapshot(pdb)) == []

from __future__ import annotations

from tarsy.evidence.detections import quota
from tarsy.evidence.snapshot import ObjectRef

from .cluster import event, obj, snapshot


def test_a_quota_used_up_names_the_resource_and_both_figures() -> None:
    full = obj(
        "ResourceQuota",
        "team-quota",
        status={
            "hard": {"limits.memory": "2Gi", "pods": "10"},
            "used": {"limits.memory": "2048Mi", "pods": "4"},
        },
    )
    [found] = quota.quota_exhausted(snapshot(full))
    assert (
        found.finding
        == "ResourceQuota orders/team-quota is used up: limits.memory 2048Mi used of 2Gi."
    )


def test_a_quota_with_room_left_or_a_zero_limit_is_not_reported() -> None:
    room = obj(
        "ResourceQuota",
        "team-quota",
        status={
            "hard": {"pods": "10", "services.loadbalancers": "0"},
            "used": {"pods": "9", "services.loadbalancers": "0"},
        },
    )
    assert quota.quota_exhausted(snapshot(room)) == []


def test_a_creation_refused_by_a_quota_is_a_likely_cause_with_the_figures_quoted() -> None:
    owner = ObjectRef(kind="ReplicaSet", name="reports-6c8", namespace="orders")
    refused = event(
        owner,
        "FailedCreate",
        'Error creating: pods "reports-6c8-x" is forbidden: exceeded quota: team-quota, '
        "requested: limits.memory=512Mi, used: limits.memory=2Gi, limited: limits.memory=2Gi",
        count=9,
    )
    [found] = quota.quota_exhausted(snapshot(refused))
    assert found.severity == 1 and found.subject == owner
    assert "ReplicaSet orders/reports-6c8 cannot create pods" in found.finding
    assert "requested: limits.memory=512Mi, used: limits.memory=2Gi" in found.finding
    assert "9 times" in found.finding


def test_a_creation_refused_for_another_reason_is_not_a_quota_finding() -> None:
    owner = ObjectRef(kind="ReplicaSet", name="reports-6c8", namespace="orders")
    refused = event(
        owner,
        "FailedCreate",
        'pods "x" is forbidden: error looking up service account orders/reports',
    )
    assert quota.quota_exhausted(snapshot(refused)) == []

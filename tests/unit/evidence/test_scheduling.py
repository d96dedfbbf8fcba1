from __future__ import annotations

from typing import Any

import pytest

from tarsy.evidence.detections import scheduling
from tarsy.evidence.snapshot import KubeObject

from .cluster import container, event, pod, snapshot


def _pending(**extra: Any) -> KubeObject:
    heavy = container("app", resources={"requests": {"cpu": "3500m", "memory": "6Gi"}})
    return pod("analytics-0", phase="Pending", containers=[heavy], statuses=[], node="", **extra)


def test_an_unschedulable_pod_quotes_the_scheduler_and_names_its_requests() -> None:
    waiting = _pending()
    message = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."  # noqa: E501
    failed = event(waiting, "FailedScheduling", message, count=12)
    [found] = scheduling.unschedulable(snapshot(waiting, failed))
    text = found.finding
    assert "cannot be scheduled: not enough free CPU on any node" in text
    assert "requests cpu 3500m, memory 6Gi" in text
    assert "0/3 nodes are available: 3 Insufficient cpu." in text and "12 times" in text
    assert found.evidence == [waiting.source, failed.source]


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ("0/4 nodes are available: 4 node(s) had untolerated taint {dedicated: gpu}.", "taints"),
        (
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
            "node affinity",
        ),
        (
            '0/4 nodes are available: persistentvolumeclaim "data-analytics-0" not found.',
            "does not exist",
        ),
        ("0/2 nodes are available: 2 Too many pods.", "maximum number of pods"),
        ("0/2 nodes are available: 2 Insufficient memory.", "memory"),
        ("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.", "not bound"),
    ],
)
def test_the_scheduler_message_is_classified(message: str, cause: str) -> None:
    assert any(cause in found for found in scheduling.classify(message))


def test_an_unscheduled_pod_condition_counts_without_an_event() -> None:
    waiting = _pending(
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 node(s) were unschedulable.",
            }
        ]
    )
    [found] = scheduling.unschedulable(snapshot(waiting))
    assert "nodes are cordoned" in found.finding


def test_a_running_pod_or_a_pending_pod_being_scheduled_is_not_reported() -> None:
    starting = _pending(conditions=[{"type": "PodScheduled", "status": "True"}])
    assert scheduling.unschedulable(snapshot(pod("analytics-0"), starting)) == []

from __future__ import annotations

from tarsy.evidence.detections import config, events, storage
from tarsy.evidence.snapshot import ObjectRef

from .cluster import event, obj, pod, snapshot


def test_warning_events_no_other_check_reads_are_grouped_and_ranked_by_count() -> None:
    claim = ObjectRef(kind="PersistentVolumeClaim", name="data-0", namespace="orders")
    node = ObjectRef(kind="Node", name="node-a")
    items = [
        event(claim, "VolumeResizeFailed", "resize failed: quota", count=2, seen=-9),
        event(claim, "VolumeResizeFailed", "resize failed: quota", count=3, seen=-2),
        event(node, "CNIError", "failed to allocate address", count=1),
        event(claim, "FailedScheduling", "read elsewhere", count=50),
        event(claim, "Resized", "normal", type="Normal", count=9),
    ]
    found = events.warning_events(snapshot(*items))
    assert [f.finding.split(":")[0] for f in found] == [
        "PersistentVolumeClaim orders/data-0 has Warning events",
        "Node node-a has Warning events",
    ]
    assert "VolumeResizeFailed" in found[0].finding and "(5 times" in found[0].finding


def test_an_empty_configmap_a_pod_reads_is_reported_and_a_full_one_is_not() -> None:
    reader = pod("api-1")
    reader.body["spec"]["volumes"] = [
        {"name": "c", "configMap": {"name": "api-conf"}},
        {"name": "d", "configMap": {"name": "full"}},
    ]
    empty = obj("ConfigMap", "api-conf", data={})
    full = obj("ConfigMap", "full", data={"k": "v"})
    [found] = config.config_map_empty(snapshot(reader, empty, full))
    assert (
        found.finding
        == "ConfigMap orders/api-conf is empty (no data keys), and pods api-1 read it."
    )


def test_a_lost_claim_and_a_failed_volume_are_reported() -> None:
    lost = obj(
        "PersistentVolumeClaim", "data-0", spec={"volumeName": "pv-9"}, status={"phase": "Lost"}
    )
    failed = obj(
        "PersistentVolume",
        "pv-3",
        namespace="",
        spec={"claimRef": {"namespace": "orders", "name": "logs-0"}},
        status={"phase": "Failed", "message": "recycle failed"},
    )
    bound = obj("PersistentVolumeClaim", "data-1", status={"phase": "Bound"})
    found = storage.volume_lost(snapshot(lost, failed, bound))
    assert [(f.severity, f.finding) for f in found] == [
        (
            1,
            "PersistentVolumeClaim orders/data-0 is Lost: PersistentVolume pv-9 it was bound "
            "to no longer exists.",
        ),
        (2, "PersistentVolume pv-3 (claimed by orders/logs-0) is Failed: recycle failed."),
    ]

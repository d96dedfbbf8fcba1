from __future__ import annotations

from tarsy.evidence.detections import storage
from tarsy.evidence.snapshot import KubeObject, ObjectRef

from .cluster import event, obj, snapshot


def _claim(phase: str, storage_class: str = "fast-ssd") -> KubeObject:
    return obj(
        "PersistentVolumeClaim",
        "data-ledger-0",
        spec={"storageClassName": storage_class, "resources": {"requests": {"storage": "20Gi"}}},
        status={"phase": phase},
    )


def test_a_pending_claim_quotes_its_latest_event_with_class_and_size() -> None:
    claim = _claim("Pending")
    old = event(
        claim, "ExternalProvisioning", "waiting for a volume to be created", type="Normal", seen=-9
    )
    latest = event(
        claim, "ProvisioningFailed", 'storageclass.storage.k8s.io "fast-ssd" not found', seen=-1
    )
    missing = ObjectRef(kind="StorageClass", name="fast-ssd")
    [found] = storage.pvc_pending(snapshot(claim, old, latest, missing))
    assert found.severity == 1
    text = found.finding
    assert "PersistentVolumeClaim orders/data-ledger-0 is Pending (20Gi requested" in text
    assert "storageClassName fast-ssd, which does not exist" in text
    assert (
        "latest event ProvisioningFailed: \"storageclass.storage.k8s.io 'fast-ssd' not found\""
        in text
    )


def test_a_bound_claim_is_not_reported() -> None:
    assert storage.pvc_pending(snapshot(_claim("Bound"))) == []


def test_a_claim_waiting_for_its_first_consumer_is_only_context() -> None:
    claim = _claim("Pending")
    waiting = event(
        claim,
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
        type="Normal",
    )
    [found] = storage.pvc_pending(snapshot(claim, waiting))
    assert found.severity == 3 and "WaitForFirstConsumer" in found.finding

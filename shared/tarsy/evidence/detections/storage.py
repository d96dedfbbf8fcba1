"""Storage checks: PersistentVolumeClaims that stay Pending.

Design constraint: pure functions of the snapshot; the finding quotes the
claim's latest event, where the provisioner says why.
"""

from __future__ import annotations

from tarsy.evidence.detections.kube import as_dict, detection, event_line, sources
from tarsy.evidence.snapshot import Detection, KubeEvent, ObjectRef, Snapshot


def _storage_class(snapshot: Snapshot, name: str) -> str:
    if not name:
        return "no storageClassName (the default class)"
    if ObjectRef(kind="StorageClass", name=name) in snapshot.absent:
        return f"storageClassName {name}, which does not exist"
    return f"storageClassName {name}"


def _severity(events: list[KubeEvent]) -> int:
    if not events:
        return 2
    if events[0].reason == "WaitForFirstConsumer":
        return 3  # binding waits for a pod by design: context, not a fault
    return 1 if events[0].type == "Warning" else 2


def pvc_pending(snapshot: Snapshot) -> list[Detection]:
    """PersistentVolumeClaims in phase Pending, with their class, size and latest event."""
    found: list[Detection] = []
    for claim in snapshot.of_kind("PersistentVolumeClaim"):
        if claim.status.get("phase") != "Pending":
            continue
        events = snapshot.events_of(claim.ref)
        size = as_dict(as_dict(claim.spec.get("resources")).get("requests")).get("storage")
        latest = f"; latest event {event_line(events[0])}" if events else "; no event gathered"
        finding = (
            f"PersistentVolumeClaim {claim.namespace}/{claim.name} is Pending "
            f"({size or 'no size'} requested, "
            f"{_storage_class(snapshot, str(claim.spec.get('storageClassName') or ''))})"
            f"{latest}."
        )
        evidence = sources(claim, *events[:1])
        found.append(detection("pvc_pending", claim.ref, finding, evidence, _severity(events)))
    return found

"""Storage checks: PersistentVolumeClaims that stay Pending or are Lost; failed volumes.

Design constraint: pure functions of the snapshot; the finding quotes the
claim's latest event, where the provisioner says why.
"""

from __future__ import annotations

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import as_dict, detection, event_line, sources
from tarsy.evidence.snapshot import Detection, KubeEvent, ObjectRef, Snapshot
from tarsy.models import Severity


def _storage_class(snapshot: Snapshot, name: str) -> str:
    if not name:
        return "no storageClassName (the default class)"
    if ObjectRef(kind="StorageClass", name=name) in snapshot.absent:
        return f"storageClassName {name}, which does not exist"
    return f"storageClassName {name}"


def _severity(events: list[KubeEvent]) -> Severity:
    if not events:
        return Severity.SYMPTOM
    if events[0].reason == "WaitForFirstConsumer":
        return Severity.CONTEXT  # binding waits for a pod by design: context, not a fault
    return Severity.LIKELY_CAUSE if events[0].type == "Warning" else Severity.SYMPTOM


@check("pvc_pending")
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
        found.append(detection(claim.ref, finding, evidence, _severity(events)))
    return found


@check("volume_lost")
def volume_lost(snapshot: Snapshot) -> list[Detection]:
    """Claims in phase Lost (their volume is gone) and PersistentVolumes in phase Failed.

    A Lost claim's data is unreachable until its volume returns: the cause
    of every pod that mounts it. A Failed volume could not be reclaimed.
    """
    found: list[Detection] = []
    for claim in snapshot.of_kind("PersistentVolumeClaim"):
        if claim.status.get("phase") != "Lost":
            continue
        bound = str(claim.spec.get("volumeName") or "its volume")
        finding = (
            f"PersistentVolumeClaim {claim.namespace}/{claim.name} is Lost: "
            f"PersistentVolume {bound} it was bound to no longer exists."
        )
        found.append(detection(claim.ref, finding, sources(claim), Severity.LIKELY_CAUSE))
    for volume in snapshot.of_kind("PersistentVolume"):
        if volume.status.get("phase") != "Failed":
            continue
        claim_ref = as_dict(volume.spec.get("claimRef"))
        owner = (
            f" (claimed by {claim_ref.get('namespace')}/{claim_ref.get('name')})"
            if claim_ref
            else ""
        )
        message = volume.status.get("message") or volume.status.get("reason") or "no message"
        finding = f"PersistentVolume {volume.name}{owner} is Failed: {message}."
        found.append(detection(volume.ref, finding, sources(volume), Severity.SYMPTOM))
    return found

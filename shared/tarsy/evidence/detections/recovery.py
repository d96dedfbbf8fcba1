"""Recovery: what the alert names became healthy again after the alert began.

Design constraint: an alert stays firing in the notification a person reads
after its condition cleared, and an investigation that restates the symptom
then proposes a fix for something no longer broken. So where the object the
alert names (its Deployment, or its pod) is healthy now and its condition
turned healthy after the alert's start (the condition's own
``lastTransitionTime``), that is said first, with the times: it is what
explains the alert best. Healthy now but since before the alert began proves
nothing about the alert, and is not reported.
"""

from __future__ import annotations

from datetime import datetime

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    condition,
    detection,
    number,
    parse_time,
    pod_ready,
    reference_time,
    sources,
    stamp,
)
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot
from tarsy.models import Severity


def _after(snapshot: Snapshot, entry: dict[str, object] | None) -> datetime | None:
    """When a True condition last turned True, if that was after the alert began."""
    if entry is None or entry.get("status") != "True":
        return None
    when = parse_time(entry.get("lastTransitionTime"))
    start = reference_time(snapshot)
    return when if when is not None and when > start else None


def _minutes(later: datetime, earlier: datetime) -> str:
    minutes = (later - earlier).total_seconds() / 60
    return "under a minute" if minutes < 1 else f"{minutes:.0f} min"


def _deployment_whole(deployment: KubeObject) -> tuple[int, int] | None:
    """(available, wanted) when every wanted replica is available and up to date, else None."""
    wanted = int(number(deployment.spec.get("replicas"), 1))
    status = deployment.status
    available = int(number(status.get("availableReplicas"), 0))
    updated = int(number(status.get("updatedReplicas"), available))
    unavailable = int(number(status.get("unavailableReplicas"), 0))
    if wanted < 1 or available < wanted or updated < wanted or unavailable:
        return None
    return available, wanted


def _named(snapshot: Snapshot, kind: str, label: str) -> KubeObject | None:
    name = snapshot.alert.labels.get(label)
    namespace = snapshot.alert.labels.get("namespace", "")
    return snapshot.get(kind, name, namespace) if name else None


@check("recovered")
def recovered(snapshot: Snapshot) -> list[Detection]:
    """The alert's Deployment or pod turned healthy after the alert began, and is healthy now."""
    start = reference_time(snapshot)
    found: list[Detection] = []
    deployment = _named(snapshot, "Deployment", "deployment")
    if deployment is not None:
        whole = _deployment_whole(deployment)
        since = _after(snapshot, condition(deployment, "Available"))
        if whole is not None and since is not None:
            finding = (
                f"Deployment {deployment.namespace}/{deployment.name} recovered after the alert "
                f"began: Available=True since {stamp(since)} ({_minutes(since, start)} after the "
                f"alert's start at {stamp(start)}), and {whole[0]} of {whole[1]} replicas are "
                "available and up to date now; what the alert reports no longer holds."
            )
            found.append(
                detection(deployment.ref, finding, sources(deployment), Severity.LIKELY_CAUSE)
            )
    pod = _named(snapshot, "Pod", "pod")
    if pod is not None and pod_ready(pod):
        since = _after(snapshot, condition(pod, "Ready"))
        if since is not None:
            finding = (
                f"Pod {pod.namespace}/{pod.name} recovered after the alert began: Ready since "
                f"{stamp(since)} ({_minutes(since, start)} after the alert's start at "
                f"{stamp(start)}); what the alert reports no longer holds."
            )
            found.append(detection(pod.ref, finding, sources(pod), Severity.LIKELY_CAUSE))
    return found

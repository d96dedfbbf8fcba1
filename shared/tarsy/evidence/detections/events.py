"""Event checks: Warning events that no other check reads, grouped by object and reason.

Design constraint: the other checks quote the events of their own
concern (scheduling, pulls, probes, mounts, evictions, ...); what is left
is what a cluster said that nothing else explains (a failed volume resize,
a network plugin's error, a controller's sync failure). Grouping by
object and reason makes a storm of repeats one line; the most repeated
come first, and at most :data:`MAX_FINDINGS` are reported.
"""

from __future__ import annotations

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import detection, event_line
from tarsy.evidence.snapshot import Detection, KubeEvent, ObjectRef, Snapshot
from tarsy.models import Severity

# The reasons other checks already read (pods, scheduling, storage, workloads, rollouts).
READ_ELSEWHERE = frozenset(
    {
        "BackOff",
        "Failed",
        "FailedScheduling",
        "Unhealthy",
        "Killing",
        "Evicted",
        "FailedMount",
        "FailedAttachVolume",
        "FailedMapVolume",
        "FailedCreatePodSandBox",
        "FailedCreate",
        "ProvisioningFailed",
        "ExternalProvisioning",
        "WaitForFirstConsumer",
        "ProgressDeadlineExceeded",
        "InspectFailed",
        "ErrImageNeverPull",
    }
)
MAX_FINDINGS = 5


def _grouped(events: list[KubeEvent]) -> dict[tuple[ObjectRef, str], list[KubeEvent]]:
    groups: dict[tuple[ObjectRef, str], list[KubeEvent]] = {}
    for event in events:
        ref = event.object
        if not ref.namespace and event.namespace:
            ref = ref.model_copy(update={"namespace": event.namespace})
        groups.setdefault((ref, event.reason), []).append(event)
    return groups


@check("warning_events")
def warning_events(snapshot: Snapshot) -> list[Detection]:
    """Warning events whose reason no other check reads, one finding per object and reason."""
    warnings = [
        e for e in snapshot.events if e.type == "Warning" and e.reason not in READ_ELSEWHERE
    ]
    groups = _grouped(warnings)
    ranked = sorted(groups.items(), key=lambda item: -sum(e.count for e in item[1]))
    found: list[Detection] = []
    for (ref, _reason), group in ranked[:MAX_FINDINGS]:
        newest = max(group, key=lambda e: e.last_seen.timestamp() if e.last_seen else 0.0)
        total = sum(e.count for e in group)
        if total != newest.count:
            newest = newest.model_copy(update={"count": total})
        finding = f"{ref} has Warning events: {event_line(newest)}."
        found.append(detection(ref, finding, [newest.source], Severity.SYMPTOM))
    return found

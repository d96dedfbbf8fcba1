"""Quota checks: ResourceQuotas used up, and the creations they refused.

Design constraint: pure functions of the snapshot; figures are compared as
Kubernetes quantities (``1536Mi`` against ``3Gi``), and printed as the
quota prints them.
"""

from __future__ import annotations

import re

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import detection, event_line, sources, text_map
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import Detection, Snapshot
from tarsy.models import Severity

_EXCEEDED = re.compile(r"exceeded quota", re.IGNORECASE)


def full_resources(hard: dict[str, str], used: dict[str, str]) -> list[str]:
    """The resources whose use reaches the hard limit, as ``resource used/hard``.

    Args:
        hard: ``status.hard`` (or ``spec.hard``).
        used: ``status.used``.

    Returns:
        One text per resource at or over its limit (limits of zero left out:
        those forbid a resource on purpose).
    """
    full: list[str] = []
    for resource, limit in sorted(hard.items()):
        have, most = quantity(used.get(resource, "")), quantity(limit)
        if have is not None and most is not None and most > 0 and have >= most:
            full.append(f"{resource} {used[resource]} used of {limit}")
    return full


@check("quota_exhausted")
def quota_exhausted(snapshot: Snapshot) -> list[Detection]:
    """ResourceQuotas at their limit, and FailedCreate events that exceeded a quota."""
    found: list[Detection] = []
    for quota in snapshot.of_kind("ResourceQuota"):
        hard = text_map(quota.status.get("hard")) or text_map(quota.spec.get("hard"))
        full = full_resources(hard, text_map(quota.status.get("used")))
        if full:
            finding = f"ResourceQuota {quota.namespace}/{quota.name} is used up: {'; '.join(full)}."
            found.append(detection(quota.ref, finding, sources(quota), Severity.SYMPTOM))
    refused = [
        e for e in snapshot.events if e.reason == "FailedCreate" and _EXCEEDED.search(e.message)
    ]
    for event in refused:
        finding = f"{event.object} cannot create pods: {event_line(event)}."
        found.append(detection(event.object, finding, sources(event), Severity.LIKELY_CAUSE))
    return found

"""Scheduling checks: Pending pods the scheduler cannot place, and why.

Design constraint: pure functions of the snapshot. The scheduler's message
is quoted as it is, and classified by the phrases the scheduler prints
("Insufficient cpu", "untolerated taint", ...), so the reader knows both
what was said and what it means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    cpu_text,
    detection,
    dicts,
    memory_text,
    quoted,
    sources,
    words,
)
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot
from tarsy.models import Severity

_CAUSES = (
    (words(r"Insufficient cpu"), "not enough free CPU on any node"),
    (words(r"Insufficient memory"), "not enough free memory on any node"),
    (words(r"Insufficient ([\w./-]*gpu[\w./-]*)"), "no free GPU"),
    (words(r"Insufficient ephemeral-storage"), "not enough ephemeral storage"),
    (
        words(r"untolerated taint|had taints? .* that the pod didn't tolerate"),
        "node taints the pod does not tolerate",
    ),
    (
        words(r"didn't match Pod's node affinity|didn't match node selector|affinity/selector"),
        "no node matches its node affinity or nodeSelector",
    ),
    (words(r"pod anti-affinity"), "its pod anti-affinity rules"),
    (words(r"(?<!anti-)pod affinity"), "its pod affinity rules"),
    (
        words(r"persistentvolumeclaim .* not found"),
        "a PersistentVolumeClaim it mounts does not exist",
    ),
    (
        words(r"volume node affinity conflict"),
        "its bound volumes live where no schedulable node can reach them",
    ),
    (words(r"unbound immediate PersistentVolumeClaims|unbound"), "its claims are not bound"),
    (words(r"Too many pods"), "the nodes hold their maximum number of pods"),
    (words(r"node\(s\) were unschedulable|unschedulable: true"), "nodes are cordoned"),
    (words(r"didn't have free ports"), "the host port it asks for is taken"),
)


def classify(message: str) -> list[str]:
    """What a scheduler message says is missing, in the scheduler's order of phrases.

    Args:
        message: A FailedScheduling event's or PodScheduled condition's message.

    Returns:
        The causes found (empty when none is recognized).
    """
    return [cause for pattern, cause in _CAUSES if pattern.search(message)]


def _requests(pod: KubeObject) -> str:
    cpu, memory = 0.0, 0.0
    for container in dicts(pod.spec.get("containers")):
        asked: Mapping[str, Any] = as_dict(as_dict(container.get("resources")).get("requests"))
        cpu += quantity(str(asked.get("cpu", "0"))) or 0.0
        memory += quantity(str(asked.get("memory", "0"))) or 0.0
    return f"requests cpu {cpu_text(cpu)}, memory {memory_text(memory)}"


@check("unschedulable")
def unschedulable(snapshot: Snapshot) -> list[Detection]:
    """Pending pods with a FailedScheduling event or PodScheduled=False, the reason classified."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        if pod.status.get("phase") != "Pending":
            continue
        events = [e for e in snapshot.events_of(pod.ref) if e.reason == "FailedScheduling"]
        scheduled = condition(pod, "PodScheduled") or {}
        if events:
            message = events[0].message
        elif scheduled.get("status") == "False":
            message = str(scheduled.get("message") or scheduled.get("reason") or "")
        else:
            continue
        causes = classify(message)
        meaning = "; ".join(causes) if causes else "a reason not classified"
        needs = (
            f" (the pod {_requests(pod)})"
            if any("CPU" in c or "memory" in c for c in causes)
            else ""
        )
        times = f", {events[0].count} times" if events and events[0].count > 1 else ""
        finding = (
            f"Pod {pod.namespace}/{pod.name} cannot be scheduled: {meaning}{needs}; the "
            f"scheduler said {quoted(message, 300)}{times}."
        )
        found.append(detection(pod.ref, finding, sources(pod, *events[:1]), Severity.LIKELY_CAUSE))
    return found

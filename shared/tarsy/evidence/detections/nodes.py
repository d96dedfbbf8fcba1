"""Node checks: pressure conditions, nodes not Ready, and nodes near their capacity.

Design constraint: pure functions of the snapshot. Saturation compares the
metrics API's usage with the node's allocatable figures, and names the pods
on the node that use the most, when their usage was gathered.
"""

from __future__ import annotations

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    condition,
    condition_text,
    cpu_text,
    detection,
    memory_text,
    sources,
    text_map,
)
from tarsy.evidence.load import SATURATED, node_shares, usage_of
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import Detection, KubeObject, ObjectRef, Snapshot, Usage
from tarsy.models import Severity

_PRESSURES = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@check("node_pressure")
def node_pressure(snapshot: Snapshot) -> list[Detection]:
    """Nodes with MemoryPressure, DiskPressure, PIDPressure or NetworkUnavailable True."""
    found: list[Detection] = []
    for node in snapshot.of_kind("Node"):
        pressing = [
            condition_text(entry)
            for kind in _PRESSURES
            if (entry := condition(node, kind)) is not None and entry.get("status") == "True"
        ]
        if pressing:
            finding = f"Node {node.name} is under pressure: {'; '.join(pressing)}."
            found.append(detection(node.ref, finding, sources(node), Severity.LIKELY_CAUSE))
    return found


def _pods_on(snapshot: Snapshot, node: KubeObject) -> set[ObjectRef]:
    """The pods on ``node``: fetched ones by ``spec.nodeName``, listed ones by their NODE column."""
    fetched = {p.ref for p in snapshot.of_kind("Pod") if p.spec.get("nodeName") == node.name}
    listed = {
        r.ref for r in snapshot.rows if r.kind == "Pod" and r.columns.get("NODE") == node.name
    }
    return fetched | listed


def _ranked(snapshot: Snapshot, node: KubeObject, by_memory: bool) -> list[Usage]:
    """The measured pods on ``node``, in every namespace gathered, those using the most first."""
    usage = [u for ref in _pods_on(snapshot, node) if (u := usage_of(snapshot, ref)) is not None]
    return sorted(usage, key=lambda u: (-_figure(u, by_memory), u.ref.namespace, u.ref.name))


def _figure(usage: Usage, by_memory: bool) -> float:
    return (usage.memory_bytes if by_memory else usage.cpu_millicores) or 0.0


def _listed(usage: list[Usage], by_memory: bool) -> str:
    return ", ".join(
        f"{u.ref.namespace}/{u.ref.name} "
        + (memory_text(u.memory_bytes) if by_memory else cpu_text(_figure(u, by_memory) / 1000))
        for u in usage
    )


def _who_uses_it(
    snapshot: Snapshot, node: KubeObject, by_memory: bool
) -> tuple[str, bool, list[str]]:
    """The node's top pods; the alert's pods there; whether other namespaces' pods lead.

    A node saturated by pods of other namespaces while the alert's pods run on it is
    contention from a neighbour: the finding says so, and is then a likely cause.
    """
    ranked = _ranked(snapshot, node, by_memory)
    top = ranked[:3]
    if not top:
        return "", False, []
    text = f"; top pods there: {_listed(top, by_memory)}"
    namespace = snapshot.alert.labels.get("namespace", "")
    own = [u for u in ranked if namespace and u.ref.namespace == namespace]
    rest = [u for u in own if u not in top][:3]
    if rest:
        text += f"; the alert's namespace's pods there: {_listed(rest, by_memory)}"
    neighbours = bool(own) and top[0].ref.namespace != namespace
    if neighbours:
        text += f"; pods of other namespaces than {namespace} use the most of it"
    return text, neighbours, [u.source for u in [*top, *rest]]


def _saturation(snapshot: Snapshot, node: KubeObject) -> tuple[list[str], bool, list[str]]:
    """The saturated figures of ``node``, whether memory is one, and the usage's evidence."""
    usage = usage_of(snapshot, node.ref)
    if usage is None:
        return [], False, []
    cpu_share, memory_share = node_shares(snapshot, node)
    allocatable = text_map(node.status.get("allocatable"))
    parts: list[str] = []
    if cpu_share is not None and cpu_share >= SATURATED and usage.cpu_millicores is not None:
        cpu = quantity(allocatable.get("cpu", "")) or 0.0
        parts.append(
            f"using CPU {cpu_text(usage.cpu_millicores / 1000)} of {cpu_text(cpu)} allocatable "
            f"({cpu_share:.0%})"
        )
    memory_full = memory_share is not None and memory_share >= SATURATED
    if memory_full and usage.memory_bytes is not None:
        memory = quantity(allocatable.get("memory", "")) or 0.0
        parts.append(
            f"using memory {memory_text(usage.memory_bytes)} of {memory_text(memory)} allocatable "
            f"({memory_share:.0%})"
        )
    return parts, memory_full, [usage.source]


@check("node_saturation")
def node_saturation(snapshot: Snapshot) -> list[Detection]:
    """Nodes at or above 90% of allocatable CPU or memory, or not Ready; with their top pods."""
    found: list[Detection] = []
    for node in snapshot.of_kind("Node"):
        ready = condition(node, "Ready")
        not_ready = ready is not None and ready.get("status") != "True"
        parts, memory_full, evidence = _saturation(snapshot, node)
        if not parts and not not_ready:
            continue
        if not_ready and ready is not None:
            parts.insert(0, f"not ready: {condition_text(ready)}")
        if node.spec.get("unschedulable"):
            parts.append("cordoned (unschedulable)")
        top, neighbours, top_sources = _who_uses_it(snapshot, node, memory_full)
        finding = f"Node {node.name} is {'; '.join(parts)}{top}."
        severity = Severity.LIKELY_CAUSE if not_ready or neighbours else Severity.SYMPTOM
        found.append(detection(node.ref, finding, sources(node, *evidence, *top_sources), severity))
    return found

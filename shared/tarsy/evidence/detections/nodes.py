"""Node checks: pressure conditions, nodes not Ready, and nodes near their capacity.

Design constraint: pure functions of the snapshot. Saturation compares the
metrics API's usage with the node's allocatable figures, and names the pods
on the node that use the most, when their usage was gathered.
"""

from __future__ import annotations

from tarsy.evidence.detections.kube import (
    condition,
    condition_text,
    cpu_text,
    detection,
    memory_text,
    sources,
    text_map,
)
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot, Usage

SATURATED = 0.9
_PRESSURES = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


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
            found.append(detection("node_pressure", node.ref, finding, sources(node), 1))
    return found


def _top_pods(snapshot: Snapshot, node: KubeObject, by_memory: bool) -> tuple[str, list[str]]:
    on_node = {p.ref for p in snapshot.of_kind("Pod") if p.spec.get("nodeName") == node.name}
    usage = [u for u in snapshot.usage if u.ref in on_node]

    def figure(item: Usage) -> float:
        return (item.memory_bytes if by_memory else item.cpu_millicores) or 0.0

    top = sorted(usage, key=figure, reverse=True)[:3]
    if not top:
        return "", []
    shown = ", ".join(
        f"{u.ref.namespace}/{u.ref.name} "
        + (memory_text(u.memory_bytes) if by_memory else cpu_text(figure(u) / 1000))
        for u in top
    )
    return f"; top pods there: {shown}", [u.source for u in top]


def _saturation(snapshot: Snapshot, node: KubeObject) -> tuple[list[str], bool, list[str]]:
    """The saturated figures of ``node``, whether memory is one, and the usage's evidence."""
    usage = next((u for u in snapshot.usage if u.ref == node.ref), None)
    allocatable = text_map(node.status.get("allocatable"))
    if usage is None:
        return [], False, []
    parts: list[str] = []
    cpu = quantity(allocatable.get("cpu", ""))
    memory = quantity(allocatable.get("memory", ""))
    if cpu and usage.cpu_millicores is not None and usage.cpu_millicores / 1000 >= SATURATED * cpu:
        share = usage.cpu_millicores / 1000 / cpu
        parts.append(
            f"using CPU {cpu_text(usage.cpu_millicores / 1000)} of {cpu_text(cpu)} allocatable "
            f"({share:.0%})"
        )
    memory_full = bool(
        memory and usage.memory_bytes is not None and usage.memory_bytes >= SATURATED * memory
    )
    if memory and memory_full and usage.memory_bytes is not None:
        parts.append(
            f"using memory {memory_text(usage.memory_bytes)} of {memory_text(memory)} allocatable "
            f"({usage.memory_bytes / memory:.0%})"
        )
    return parts, memory_full, [usage.source]


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
        top, top_sources = _top_pods(snapshot, node, memory_full)
        finding = f"Node {node.name} is {'; '.join(parts)}{top}."
        severity = 1 if not_ready else 2
        found.append(
            detection(
                "node_saturation",
                node.ref,
                finding,
                sources(node, *evidence, *top_sources),
                severity,
            )
        )
    return found

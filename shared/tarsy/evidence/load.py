"""How loaded a node is: the metrics API's usage against the node's allocatable (pure).

Design constraint: one reading of "near capacity" for the node check
(:mod:`tarsy.evidence.detections.nodes`) and for the target source that
follows a busy node to its neighbours (:mod:`tarsy.evidence.targets`), so
that what is gathered and what is reported agree.
"""

from __future__ import annotations

from tarsy.evidence.fields import as_dict
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import KubeObject, ObjectRef, Snapshot, Usage

# At or above this share of allocatable CPU or memory a node is near its capacity.
SATURATED = 0.9


def usage_of(snapshot: Snapshot, ref: ObjectRef) -> Usage | None:
    """The metrics API's figures for ``ref``: the first gathered row that has any."""
    return next(
        (
            u
            for u in snapshot.usage
            if u.ref == ref and (u.cpu_millicores is not None or u.memory_bytes is not None)
        ),
        None,
    )


def node_shares(snapshot: Snapshot, node: KubeObject) -> tuple[float | None, float | None]:
    """The node's (CPU, memory) usage as shares of its allocatable; None where unknown."""
    usage = usage_of(snapshot, node.ref)
    allocatable = as_dict(node.status.get("allocatable"))
    cpu = quantity(str(allocatable.get("cpu", "")))
    memory = quantity(str(allocatable.get("memory", "")))
    if usage is None:
        return None, None
    cpu_share = usage.cpu_millicores / 1000 / cpu if cpu and usage.cpu_millicores else None
    memory_share = usage.memory_bytes / memory if memory and usage.memory_bytes else None
    return cpu_share, memory_share


def saturated(snapshot: Snapshot, node: KubeObject) -> bool:
    """Whether the node uses at least :data:`SATURATED` of its allocatable CPU or memory."""
    return any(share is not None and share >= SATURATED for share in node_shares(snapshot, node))

"""Small builders of Kubernetes objects as the API serves them, for detection tests.

Each builder returns a :class:`KubeObject` (or event, log, usage) whose
``source`` names the call that would have returned it, so a test can assert
that a finding points at its evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tarsy.evidence.snapshot import (
    AlertFacts,
    KubeEvent,
    KubeObject,
    ListedRow,
    MetricSeries,
    ObjectRef,
    PodLog,
    Snapshot,
    Usage,
)

Item = KubeObject | KubeEvent | PodLog | Usage | ListedRow | ObjectRef | MetricSeries
T0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    """A time ``minutes`` after T0 (negative: before)."""
    return datetime.fromtimestamp(T0.timestamp() + minutes * 60, tz=UTC)


def iso(minutes: float) -> str:
    """``at(minutes)`` as the API prints it."""
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


def obj(kind: str, name: str, namespace: str = "orders", **body: Any) -> KubeObject:
    """Any object: ``metadata`` extras go in ``metadata=``, the rest at the top level."""
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    metadata.update(body.pop("metadata", {}))
    full = {"kind": kind, "metadata": metadata, **body}
    source = f"get-{kind.lower()}-{name}"
    return KubeObject(kind=kind, body=full, source=source)


def container(
    name: str = "app", image: str = "registry.example.com/shop/app:1.0", **extra: Any
) -> dict[str, Any]:
    """A container spec."""
    return {"name": name, "image": image, **extra}


def running(
    name: str = "app", restarts: int = 0, ready: bool = True, **extra: Any
) -> dict[str, Any]:
    """A running container's status."""
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": iso(-5)}},
        **extra,
    }


def terminated(reason: str, exit_code: int, finished: float = -1) -> dict[str, Any]:
    """A ``terminated`` state."""
    return {"terminated": {"reason": reason, "exitCode": exit_code, "finishedAt": iso(finished)}}


def waiting(
    name: str, reason: str, message: str = "", restarts: int = 0, last: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A waiting container's status, with its last state."""
    return {
        "name": name,
        "ready": False,
        "restartCount": restarts,
        "state": {"waiting": {"reason": reason, "message": message}},
        "lastState": last or {},
    }


def pod(
    name: str,
    namespace: str = "orders",
    *,
    containers: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    owner: str | None = None,
    node: str = "node-a",
    ip: str = "",
    created: float = -30,
    **status: Any,
) -> KubeObject:
    """A pod; Ready follows its container statuses."""
    statuses = statuses if statuses is not None else [running()]
    ready = phase == "Running" and all(s.get("ready") for s in statuses)
    metadata: dict[str, Any] = {
        "labels": labels or {"app": name},
        "creationTimestamp": iso(created),
    }
    if owner:
        metadata["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": owner, "apiVersion": "apps/v1"}
        ]
    return obj(
        "Pod",
        name,
        namespace,
        metadata=metadata,
        spec={"nodeName": node, "containers": containers or [container()]},
        status={
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": statuses,
            **status,
        },
    )


def replica_set(
    name: str,
    deployment: str,
    revision: int,
    spec: dict[str, Any],
    namespace: str = "orders",
    *,
    replicas: int = 1,
    ready: int = 1,
    created: float = -60,
    labels: dict[str, str] | None = None,
) -> KubeObject:
    """A Deployment's ReplicaSet at ``revision`` with pod template ``spec``."""
    return obj(
        "ReplicaSet",
        name,
        namespace,
        metadata={
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            "ownerReferences": [{"kind": "Deployment", "name": deployment}],
            "creationTimestamp": iso(created),
        },
        spec={
            "replicas": replicas,
            "template": {"metadata": {"labels": labels or {}}, "spec": spec},
        },
        status={"replicas": replicas, "readyReplicas": ready},
    )


def deployment(
    name: str,
    namespace: str = "orders",
    *,
    replicas: int = 2,
    ready: int = 2,
    conditions: list[dict[str, Any]] | None = None,
) -> KubeObject:
    """A Deployment with replica counts and conditions."""
    return obj(
        "Deployment",
        name,
        namespace,
        spec={"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
        status={
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": conditions or [],
        },
    )


def event(
    about: KubeObject | ObjectRef,
    reason: str,
    message: str,
    *,
    type: str = "Warning",
    count: int = 1,
    seen: float = -1,
) -> KubeEvent:
    """An event about ``about``."""
    ref = about.ref if isinstance(about, KubeObject) else about
    return KubeEvent(
        namespace=ref.namespace,
        object=ref,
        type=type,
        reason=reason,
        message=message,
        count=count,
        last_seen=at(seen),
        source=f"events-{ref.namespace or 'cluster'}",
    )


def log(
    pod_name: str,
    text: str,
    *,
    container: str = "app",
    previous: bool = True,
    namespace: str = "orders",
) -> PodLog:
    """A container's log."""
    which = "previous" if previous else "current"
    return PodLog(
        namespace=namespace,
        pod=pod_name,
        container=container,
        previous=previous,
        text=text,
        source=f"log-{pod_name}-{container}-{which}",
    )


def usage(
    kind: str,
    name: str,
    namespace: str = "",
    *,
    cpu_m: float | None = None,
    memory: float | None = None,
) -> Usage:
    """A metrics-API figure for a pod or node."""
    return Usage(
        ref=ObjectRef(kind=kind, name=name, namespace=namespace),
        cpu_millicores=cpu_m,
        memory_bytes=memory,
        source=f"top-{kind.lower()}s",
    )


def series(
    measures: str,
    values: Sequence[float],
    *,
    start: float = -60,
    step: float = 5,
    query: str = "q",
    source: str = "",
    **labels: str,
) -> MetricSeries:
    """A series of ``values``, one every ``step`` minutes from ``start`` (minutes after T0)."""
    points = [(at(start + n * step).timestamp(), v) for n, v in enumerate(values)]
    name = source or f"query-{measures}-{'-'.join(labels.values()) or 'all'}"
    return MetricSeries(measures=measures, query=query, labels=labels, points=points, source=name)


def snapshot(*items: Item, alert: AlertFacts | None = None) -> Snapshot:
    """A snapshot holding ``items`` in their lists."""
    built = Snapshot(alert=alert or AlertFacts(starts_at=T0))
    for item in items:
        if isinstance(item, KubeObject):
            built.objects.append(item)
        elif isinstance(item, KubeEvent):
            built.events.append(item)
        elif isinstance(item, PodLog):
            built.logs.append(item)
        elif isinstance(item, Usage):
            built.usage.append(item)
        elif isinstance(item, ListedRow):
            built.rows.append(item)
        elif isinstance(item, MetricSeries):
            built.series.append(item)
        else:
            built.absent.append(item)
    return built

"""What was released shortly before the alert: new ReplicaSets and the pods that run them (pure).

Design constraint: a release regression leaves its pods Running and ready,
so nothing unhealthy points at them; what does is time. A ReplicaSet
created in the hour before the alert began is new code (a Deployment's new
revision, or a new workload such as a canary), and its pods' logs are where
the regression speaks. One reading of "released shortly before" serves the
target source that gathers those logs (:mod:`tarsy.evidence.targets`) and
the log check that weighs what they say (:mod:`tarsy.evidence.detections.logs`),
so that what is gathered and what is reported agree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tarsy.evidence.fields import dicts, parse_time
from tarsy.evidence.snapshot import AlertFacts, KubeObject, Snapshot

# How long before the alert's start a new ReplicaSet counts as released shortly before.
WINDOW = timedelta(hours=1)
# A ReplicaSet created this soon after the start is still part of it (clocks, delays).
GRACE = timedelta(minutes=2)


def alert_start(alert: AlertFacts) -> datetime | None:
    """The alert's start, aware; None when the alert has none (no window to judge by)."""
    starts = alert.starts_at
    if starts is None:
        return None
    return starts if starts.tzinfo else starts.replace(tzinfo=UTC)


def minutes_before(replica_set: KubeObject, start: datetime) -> float | None:
    """Minutes from the ReplicaSet's creation to ``start``, when it lies in the window."""
    created = parse_time(replica_set.metadata.get("creationTimestamp"))
    if created is None or not (start - WINDOW <= created <= start + GRACE):
        return None
    return max(0.0, (start - created).total_seconds() / 60)


def new_replica_sets(snapshot: Snapshot, alert: AlertFacts) -> list[KubeObject]:
    """The gathered ReplicaSets created in the window before ``alert`` began, newest first."""
    start = alert_start(alert)
    if start is None:
        return []
    found = [rs for rs in snapshot.of_kind("ReplicaSet") if minutes_before(rs, start) is not None]
    return sorted(found, key=lambda rs: minutes_before(rs, start) or 0.0)


def runs(replica_set: KubeObject, namespace: str, pod: str, owner: str | None = None) -> bool:
    """Whether pod ``namespace/pod`` is one of ``replica_set``'s.

    By its owner reference when the pod was fetched (``owner``), else by the name
    the ReplicaSet controller gives its pods (``<replicaset>-<suffix>``), which a
    listed row carries.
    """
    if namespace != replica_set.namespace:
        return False
    if owner is not None:
        return owner == replica_set.name
    prefix = f"{replica_set.name}-"
    return pod.startswith(prefix) and "-" not in pod[len(prefix) :]


def owner_of(pod: KubeObject) -> str | None:
    """A fetched pod's ReplicaSet, by its owner reference."""
    for owner in dicts(pod.metadata.get("ownerReferences")):
        if owner.get("kind") == "ReplicaSet" and owner.get("name"):
            return str(owner["name"])
    return None


def release_of(snapshot: Snapshot, namespace: str, pod: str) -> KubeObject | None:
    """The new ReplicaSet (:func:`new_replica_sets`) that pod ``namespace/pod`` runs, if any."""
    fetched = snapshot.get("Pod", pod, namespace)
    owner = owner_of(fetched) if fetched is not None else None
    released = new_replica_sets(snapshot, snapshot.alert)
    return next((rs for rs in released if runs(rs, namespace, pod, owner)), None)

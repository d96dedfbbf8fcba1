"""What changed shortly before the alert began: rollouts, edits, nodes, scaling, jobs.

Design constraint: context, not a cause (severity 3). A change close before
a failure is where a reader looks first, but closeness proves nothing, so
the finding states the change, its time and how long before the alert it
came, and no verdict. Times are judged against the alert's start
(:func:`reference_time`); a change after it, or longer than :data:`WINDOW`
before it, is not reported. Only what the gathered objects and events
record is read: creation times, ``managedFields`` times, scaling events.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    created,
    detection,
    dicts,
    owner_name,
    parse_time,
    quoted,
    reference_time,
    revision,
    sources,
    stamp,
)
from tarsy.evidence.detections.rollouts import revision_changes
from tarsy.evidence.snapshot import Detection, KubeEvent, KubeObject, Snapshot
from tarsy.models import Severity

# How long before the alert's start a change counts as "shortly before".
WINDOW = timedelta(hours=1)
# At most this many changes are reported (rollouts first, then edits, scaling, jobs).
MAX_FINDINGS = 5
# A change recorded this soon after the start is still part of it (clocks, event delay).
GRACE = timedelta(minutes=2)
_CONTROL_PLANE = "kube-controller-manager"
_ROUTINE_NODE_REASON = "NodeHas"
_SCALE_REASONS = {"ScalingReplicaSet", "SuccessfulRescale", "SuccessfulCreate", "SuccessfulDelete"}


def _before(when: datetime | None, start: datetime) -> str | None:
    """``N min before the alert`` when ``when`` lies in the window, else None."""
    if when is None or not (start - WINDOW <= when <= start + GRACE):
        return None
    minutes = (start - when).total_seconds() / 60
    if minutes < 0:
        return "as the alert began"
    return f"{minutes:.0f} min before the alert began"


def _rollouts(snapshot: Snapshot, start: datetime) -> list[Detection]:
    found: list[Detection] = []
    for replica_set in snapshot.of_kind("ReplicaSet"):
        deployment = owner_name(replica_set, "Deployment")
        when = _before(created(replica_set), start)
        # Revision 1 is the Deployment's first: a creation, not a change of what ran.
        if deployment is None or when is None or revision(replica_set) == 1:
            continue
        changes = revision_changes(snapshot, replica_set, deployment)
        # What the revision changed, where the one before it was gathered: the change
        # itself is the context a reader needs, not only that a rollout happened.
        changed = f"; it changed {'; '.join(changes[:4])}" if changes else ""
        finding = (
            f"Deployment {replica_set.namespace}/{deployment} rolled out revision "
            f"{revision(replica_set) or 'unknown'} (ReplicaSet {replica_set.name}) at "
            f"{stamp(created(replica_set))}, {when}{changed}."
        )
        found.append(detection(replica_set.ref, finding, sources(replica_set), Severity.CONTEXT))
    return found


def _newest_write(obj: KubeObject) -> tuple[datetime, str] | None:
    """The newest ``managedFields`` write after creation: (time, manager)."""
    made = created(obj)
    writes = [
        (when, str(entry.get("manager") or "an unknown manager"))
        for entry in dicts(obj.metadata.get("managedFields"))
        if (when := parse_time(entry.get("time"))) is not None and (made is None or when > made)
    ]
    return max(writes) if writes else None


def _edits(snapshot: Snapshot, start: datetime) -> list[Detection]:
    found: list[Detection] = []
    for obj in [*snapshot.of_kind("ConfigMap"), *snapshot.of_kind("Secret")]:
        write = _newest_write(obj)
        when = _before(write[0], start) if write else None
        # The control plane rewrites some objects itself (the root CA bundle): not an edit.
        if write is None or when is None or write[1] == _CONTROL_PLANE:
            continue
        finding = (
            f"{obj.kind} {obj.namespace}/{obj.name} was edited by {write[1]} at "
            f"{stamp(write[0])}, {when}."
        )
        found.append(detection(obj.ref, finding, sources(obj), Severity.CONTEXT))
    return found


def _scaling(snapshot: Snapshot, start: datetime) -> list[Detection]:
    found: list[Detection] = []
    for event in snapshot.events:
        if event.reason not in _SCALE_REASONS or event.object.kind == "ReplicaSet":
            continue  # a ReplicaSet's own pod creations follow the Deployment's scaling
        when = _before(event.last_seen, start)
        if when is None:
            continue
        finding = (
            f"{event.object} scaled: {event.reason} {quoted(event.message)} at "
            f"{stamp(event.last_seen)}, {when}."
        )
        found.append(detection(event.object, finding, [event.source], Severity.CONTEXT))
    return found


def _node_changes(snapshot: Snapshot, start: datetime) -> list[Detection]:
    """A node's own events in the window: cordons, drains, reboots, upgrades, removals.

    The kubelet's routine ``NodeHas...`` status reports are not changes. Each node's
    newest such event is reported, with its message: the message says why (a
    maintenance window, an upgrade, the autoscaler).
    """
    newest: dict[str, KubeEvent] = {}
    for event in snapshot.events:
        if event.object.kind != "Node" or event.reason.startswith(_ROUTINE_NODE_REASON):
            continue
        if _before(event.last_seen, start) is None:
            continue
        kept = newest.get(event.object.name)
        if kept is None or (kept.last_seen or start) < (event.last_seen or start):
            newest[event.object.name] = event
    found: list[Detection] = []
    for event in sorted(newest.values(), key=lambda e: (e.last_seen or start, e.object.name)):
        finding = (
            f"Node {event.object.name}: {event.reason} {quoted(event.message)} at "
            f"{stamp(event.last_seen)}, {_before(event.last_seen, start)}."
        )
        found.append(detection(event.object, finding, [event.source], Severity.CONTEXT))
    return found


def _alert_nodes(snapshot: Snapshot) -> set[str]:
    """The nodes of the pods the alert names, else of every gathered pod not owned by a Job."""
    named = snapshot.alert.labels.get("pod", "")
    pods = [p for p in snapshot.of_kind("Pod") if named and p.name == named]
    if not pods:
        pods = [p for p in snapshot.of_kind("Pod") if owner_name(p, "Job") is None]
    return {str(p.spec.get("nodeName")) for p in pods if p.spec.get("nodeName")}


def _jobs_on_node(snapshot: Snapshot, start: datetime) -> list[Detection]:
    found: list[Detection] = []
    nodes = _alert_nodes(snapshot)
    for pod in snapshot.of_kind("Pod"):
        job = owner_name(pod, "Job")
        node = str(pod.spec.get("nodeName") or "")
        when = _before(created(pod), start)
        if job is None or node not in nodes or when is None:
            continue
        finding = (
            f"Job {pod.namespace}/{job} started pod {pod.name} on node {node} (where the "
            f"alert's pods run) at {stamp(created(pod))}, {when}."
        )
        found.append(detection(pod.ref, finding, sources(pod), Severity.CONTEXT))
    return found


@check("recent_change")
def recent_change(snapshot: Snapshot) -> list[Detection]:
    """Rollouts, ConfigMap/Secret edits, node events, scaling, Jobs on the same node, before it.

    Reported only when the alert carries its start: without it "before" has no anchor.
    """
    if snapshot.alert.starts_at is None:
        return []
    start = reference_time(snapshot)
    found = [
        *_rollouts(snapshot, start),
        *_edits(snapshot, start),
        *_node_changes(snapshot, start),
        *_scaling(snapshot, start),
        *_jobs_on_node(snapshot, start),
    ]
    # Context is worth a few lines: the kinds of change in order, each capped.
    return found[:MAX_FINDINGS]

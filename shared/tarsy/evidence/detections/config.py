"""ConfigMap checks: a ConfigMap a pod reads that changed from what was applied, or after rollout.

Design constraint: pure functions of the snapshot. Two traces of a change
are read, both kept by the API server itself: the
``kubectl.kubernetes.io/last-applied-configuration`` annotation (what was
last applied, against the data now) and ``managedFields`` times (who wrote
the data, and when, against the creation of the pod's ReplicaSet).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    annotations_of,
    as_dict,
    containers,
    created,
    detection,
    dicts,
    parse_time,
    pod_replica_set,
    quoted,
    sources,
    stamp,
    text_map,
)
from tarsy.evidence.snapshot import Detection, KubeObject, ObjectRef, Snapshot
from tarsy.models import Severity

_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Every pod with a service account token mounts this one; the control plane rewrites it.
_CLUSTER_MANAGED = {"kube-root-ca.crt"}
SAME_APPLY = timedelta(minutes=1)


def config_map_names(pod: KubeObject) -> Iterator[str]:
    """The ConfigMaps ``pod`` reads: envFrom, env valueFrom, volumes (projected too).

    Args:
        pod: A gathered pod.

    Yields:
        Each name, possibly repeated.
    """
    for container in containers(pod.spec):
        for source in dicts(container.get("envFrom")):
            name = as_dict(source.get("configMapRef")).get("name")
            if name:
                yield str(name)
        for env in dicts(container.get("env")):
            name = as_dict(as_dict(env.get("valueFrom")).get("configMapKeyRef")).get("name")
            if name:
                yield str(name)
    for volume in dicts(pod.spec.get("volumes")):
        name = as_dict(volume.get("configMap")).get("name")
        if name:
            yield str(name)
        for source in dicts(as_dict(volume.get("projected")).get("sources")):
            name = as_dict(source.get("configMap")).get("name")
            if name:
                yield str(name)


def _short(value: str | None) -> str:
    return "(absent)" if value is None else quoted(value, 60)


def applied_changes(config_map: KubeObject) -> list[str]:
    """Each key whose data differs from the last-applied annotation: ``KEY: applied → current``.

    Args:
        config_map: A gathered ConfigMap.

    Returns:
        One text per changed, added or removed key, sorted by key; empty when
        the annotation is absent or unreadable.
    """
    try:
        applied = json.loads(annotations_of(config_map).get(_LAST_APPLIED, ""))
    except ValueError:
        return []
    if not isinstance(applied, dict):
        return []
    was = text_map(applied.get("data"))
    now = text_map(config_map.body.get("data"))
    return [
        f"{key}: {_short(was.get(key))} → {_short(now.get(key))}"
        for key in sorted({*was, *now})
        if was.get(key) != now.get(key)
    ]


def _writes_data(entry: Mapping[str, object]) -> bool:
    fields = as_dict(entry.get("fieldsV1"))
    return "f:data" in fields or "f:binaryData" in fields or not fields


def _writes_after(config_map: KubeObject, since: datetime) -> list[str]:
    """The managedFields writes of the data after ``since``, and annotations holding later times."""
    # One apply of a whole manifest may write the ConfigMap just after the Deployment.
    since = since + SAME_APPLY
    found: list[str] = []
    for entry in dicts(config_map.metadata.get("managedFields")):
        when = parse_time(entry.get("time"))
        if when is not None and when > since and _writes_data(entry):
            found.append(
                f"written by {entry.get('manager', 'an unknown manager')} "
                f"({entry.get('operation', 'Update')}) at {stamp(when)}"
            )
    for key, value in annotations_of(config_map).items():
        when = parse_time(value) if key != _LAST_APPLIED else None
        if when is not None and when > since:
            found.append(f"annotation {key} says {stamp(when)}")
    return found


def _rollout_time(snapshot: Snapshot, pod: KubeObject) -> tuple[str, datetime | None, str | None]:
    """What the pod's configuration was read at: its ReplicaSet's creation, else the pod's."""
    replica_set = pod_replica_set(snapshot, pod)
    if replica_set is not None and created(replica_set) is not None:
        return f"ReplicaSet {replica_set.name}", created(replica_set), replica_set.source
    return f"pod {pod.name}", created(pod), None


def _finding(
    snapshot: Snapshot, pod: KubeObject, config_map: KubeObject
) -> tuple[str, Severity, str | None] | None:
    changes = applied_changes(config_map)
    label, since, since_source = _rollout_time(snapshot, pod)
    writes = _writes_after(config_map, since) if since is not None else []
    if not changes and not writes:
        return None
    parts: list[str] = []
    if changes:
        parts.append(f"its data differs from its last-applied configuration: {'; '.join(changes)}")
    if writes:
        parts.append(
            f"it was changed after {label} was created at {stamp(since)}: {'; '.join(writes)}"
        )
    text = (
        f"ConfigMap {config_map.namespace}/{config_map.name}, read by pod {pod.name}, "
        f"changed: {'; and '.join(parts)}."
    )
    return text, (Severity.LIKELY_CAUSE if changes else Severity.SYMPTOM), since_source


@check("config_drift")
def config_drift(snapshot: Snapshot) -> list[Detection]:
    """ConfigMaps pods read whose data drifted from what was applied, or changed after rollout."""
    found: list[Detection] = []
    reported: set[ObjectRef] = set()
    for pod in snapshot.of_kind("Pod"):
        for name in dict.fromkeys(config_map_names(pod)):
            if name in _CLUSTER_MANAGED:
                continue
            config_map = snapshot.get("ConfigMap", name, pod.namespace)
            if config_map is None or config_map.ref in reported:
                continue
            result = _finding(snapshot, pod, config_map)
            if result is None:
                continue
            reported.add(config_map.ref)
            text, severity, since_source = result
            evidence = sources(config_map, pod, since_source)
            found.append(detection(config_map.ref, text, evidence, severity))
    return found


@check("config_map_empty")
def config_map_empty(snapshot: Snapshot) -> list[Detection]:
    """ConfigMaps that gathered pods read and that hold no data at all.

    An empty ConfigMap a pod reads gives it no settings: every key it
    expects is missing, which the pod's own log then reports.
    """
    found: list[Detection] = []
    readers: dict[ObjectRef, list[str]] = {}
    for pod in snapshot.of_kind("Pod"):
        for name in dict.fromkeys(config_map_names(pod)):
            ref = ObjectRef(kind="ConfigMap", name=name, namespace=pod.namespace)
            readers.setdefault(ref, []).append(pod.name)
    for ref, pods in readers.items():
        config_map = snapshot.get("ConfigMap", ref.name, ref.namespace)
        if config_map is None or ref.name in _CLUSTER_MANAGED:
            continue
        if as_dict(config_map.body.get("data")) or as_dict(config_map.body.get("binaryData")):
            continue
        finding = (
            f"ConfigMap {ref.namespace}/{ref.name} is empty (no data keys), and pods "
            f"{', '.join(pods[:3])} read it."
        )
        found.append(detection(ref, finding, sources(config_map), Severity.SYMPTOM))
    return found

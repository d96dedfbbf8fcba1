"""Deployment checks: a new revision failing where the previous ran; stuck or unavailable rollouts.

Design constraint: pure functions of the snapshot. A regression is shown by
what changed between the two pod templates (image, env, config references,
resources, probes, command), since the change is what the reader undoes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    condition_text,
    container_statuses,
    detection,
    dicts,
    owned,
    pod_ready,
    replica_sets,
    revision,
    sources,
    state_of,
    trim,
)
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot

_FIELDS = (
    "image",
    "command",
    "args",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
)


def _compact(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return json.dumps(trim(value, 60))
    return trim(json.dumps(value, sort_keys=True, separators=(",", ":")), 120)


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for env in dicts(container.get("env")):
        if "value" in env:
            found[str(env.get("name"))] = _compact(str(env["value"]))
            continue
        source = as_dict(env.get("valueFrom"))
        for key, ref in source.items():
            ref = as_dict(ref)
            found[str(env.get("name"))] = (
                f"{key} {ref.get('name', '')} {ref.get('key', '')}".strip()
            )
    return found


def _env_from(container: Mapping[str, Any]) -> list[str]:
    return sorted(
        f"{kind} {as_dict(ref).get('name')}"
        for source in dicts(container.get("envFrom"))
        for kind, ref in source.items()
        if kind in ("configMapRef", "secretRef")
    )


def _volumes(spec: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for volume in dicts(spec.get("volumes")):
        for kind, field in (
            ("configMap", "name"),
            ("secret", "secretName"),
            ("persistentVolumeClaim", "claimName"),
        ):
            if kind in volume:
                found.append(f"{kind} {as_dict(volume[kind]).get(field)}")
    return sorted(found)


def _container_changes(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    changes = [
        f"{name} {field} {_compact(old.get(field))} → {_compact(new.get(field))}"
        for field in _FIELDS
        if old.get(field) != new.get(field)
    ]
    old_env, new_env = _env(old), _env(new)
    changes += [
        f"{name} env {key} {old_env.get(key, '(unset)')} → {new_env.get(key, '(unset)')}"
        for key in sorted({*old_env, *new_env})
        if old_env.get(key) != new_env.get(key)
    ]
    if _env_from(old) != _env_from(new):
        changes.append(f"{name} envFrom {_env_from(old)} → {_env_from(new)}")
    return changes


def template_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two pod templates' specs, one compact text per change.

    Args:
        old: The previous template's ``spec``.
        new: The new template's ``spec``.

    Returns:
        Texts like ``api image "shop/api:1.4" → "shop/api:1.5"``; empty when equal.
    """
    olds = {str(c.get("name")): c for c in dicts(old.get("containers"))}
    news = {str(c.get("name")): c for c in dicts(new.get("containers"))}
    changes: list[str] = []
    for name in sorted({*olds, *news}):
        if name not in olds or name not in news:
            changes.append(f"container {name} {'added' if name in news else 'removed'}")
            continue
        changes += _container_changes(name, olds[name], news[name])
    if _volumes(old) != _volumes(new):
        changes.append(f"volumes {_volumes(old)} → {_volumes(new)}")
    return changes


def _template_spec(replica_set: KubeObject) -> dict[str, Any]:
    return as_dict(as_dict(replica_set.spec.get("template")).get("spec"))


def _health(snapshot: Snapshot, replica_set: KubeObject) -> tuple[int, int, list[str], list[str]]:
    """Ready and total pods of a ReplicaSet, the troubles of those not ready, and their sources."""
    pods = owned(snapshot, "Pod", replica_set)
    if not pods:
        total = replica_set.status.get("replicas", 0)
        ready = replica_set.status.get("readyReplicas", 0)
        counts = (ready if isinstance(ready, int) else 0, total if isinstance(total, int) else 0)
        return counts[0], counts[1], [], []
    troubles: list[str] = []
    for pod in pods:
        if pod_ready(pod):
            continue
        for status in container_statuses(pod):
            waiting = state_of(status, "state", "waiting").get("reason")
            if waiting or status.get("restartCount"):
                troubles.append(
                    f"{pod.name} {waiting or 'running'} ({status.get('restartCount', 0)} restarts)"
                )
                break
        else:
            troubles.append(f"{pod.name} {pod.status.get('phase', 'unknown')}, not ready")
    ready = sum(1 for p in pods if pod_ready(p))
    return ready, len(pods), troubles, [p.source for p in pods]


def rollout_regression(snapshot: Snapshot) -> list[Detection]:
    """Deployments whose newest ReplicaSet fails while the previous one's pods are ready."""
    found: list[Detection] = []
    for deployment in snapshot.of_kind("Deployment"):
        revisions = replica_sets(snapshot, deployment.namespace, deployment.name)
        if len(revisions) < 2:
            continue
        new, old = revisions[0], revisions[1]
        new_ready, new_total, troubles, new_sources = _health(snapshot, new)
        old_ready, _old_total, _, old_sources = _health(snapshot, old)
        if new_total == 0 or new_ready == new_total or old_ready == 0:
            continue
        changes = template_changes(_template_spec(old), _template_spec(new))
        changed = "; ".join(changes[:8]) if changes else "no difference in the pod template"
        failing = f" ({'; '.join(troubles[:3])})" if troubles else ""
        finding = (
            f"Deployment {deployment.namespace}/{deployment.name}: the new revision "
            f"{revision(new)} ({new.name}) has {new_ready}/{new_total} pods ready{failing} while "
            f"the previous revision {revision(old)} ({old.name}) has {old_ready} ready; "
            f"changed: {changed}."
        )
        evidence = sources(deployment, new, old, *new_sources[:3], *old_sources[:1])
        found.append(detection("rollout_regression", deployment.ref, finding, evidence, 1))
    return found


def _replicas(deployment: KubeObject) -> str:
    status = deployment.status
    return (
        f"{deployment.spec.get('replicas', 1)} desired, "
        f"{status.get('updatedReplicas', 0)} updated, "
        f"{status.get('readyReplicas', 0)} ready, {status.get('availableReplicas', 0)} available"
    )


def progress_deadline(snapshot: Snapshot) -> list[Detection]:
    """Deployments with Progressing=False (ProgressDeadlineExceeded), with their replica counts."""
    found: list[Detection] = []
    for deployment in snapshot.of_kind("Deployment"):
        entry = condition(deployment, "Progressing")
        if entry is None or entry.get("status") != "False":
            continue
        finding = (
            f"Deployment {deployment.namespace}/{deployment.name} stopped progressing: "
            f"{condition_text(entry)}; replicas {_replicas(deployment)} "
            f"(progressDeadlineSeconds {deployment.spec.get('progressDeadlineSeconds', 600)})."
        )
        found.append(
            detection("progress_deadline", deployment.ref, finding, sources(deployment), 2)
        )
    return found


def deployment_unavailable(snapshot: Snapshot) -> list[Detection]:
    """Deployments with Available=False, with their replica counts."""
    found: list[Detection] = []
    for deployment in snapshot.of_kind("Deployment"):
        entry = condition(deployment, "Available")
        if entry is None or entry.get("status") != "False":
            continue
        finding = (
            f"Deployment {deployment.namespace}/{deployment.name} is unavailable: "
            f"{condition_text(entry)}; replicas {_replicas(deployment)}."
        )
        found.append(
            detection("deployment_unavailable", deployment.ref, finding, sources(deployment), 2)
        )
    return found

"""Deployment checks: a new revision failing where the previous ran; stuck or unavailable rollouts.

Design constraint: pure functions of the snapshot. A regression is shown by
what changed between the two pod templates (image, env, config references,
resources, probes, command), since the change is what the reader undoes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    condition_text,
    container_statuses,
    created,
    detection,
    dicts,
    owned,
    pod_ready,
    reference_time,
    replica_sets,
    revision,
    sources,
    state_of,
    trim,
)
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot
from tarsy.models import Severity

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
        for kind, key in (
            ("configMap", "name"),
            ("secret", "secretName"),
            ("persistentVolumeClaim", "claimName"),
        ):
            if kind in volume:
                found.append(f"{kind} {as_dict(volume[kind]).get(key)}")
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


def revision_changes(snapshot: Snapshot, replica_set: KubeObject, deployment: str) -> list[str]:
    """What ``replica_set``'s pod template changed from the revision before it (gathered ones).

    Empty when the revision before was not gathered, or nothing in the template differs.
    """
    revisions = replica_sets(snapshot, replica_set.namespace, deployment)
    names = [r.name for r in revisions]
    if replica_set.name not in names:
        return []
    index = names.index(replica_set.name)
    if index + 1 >= len(revisions):
        return []
    return template_changes(_template_spec(revisions[index + 1]), _template_spec(replica_set))


# Waiting reasons of a pod still starting: not yet a failure.
_STARTING = {"ContainerCreating", "PodInitializing"}
# A revision whose pods were not gathered is judged failing once its ReplicaSet is this old.
SETTLE = timedelta(minutes=10)


@dataclass
class _Health:
    ready: int
    total: int
    troubles: list[str] = field(default_factory=list)
    failing: bool = False
    evidence: list[str] = field(default_factory=list)


def _pod_trouble(pod: KubeObject) -> tuple[str, bool]:
    """A pod not ready in words, and whether it fails (rather than still starting)."""
    for status in container_statuses(pod):
        waiting = str(state_of(status, "state", "waiting").get("reason") or "")
        restarts = status.get("restartCount") or 0
        if waiting or restarts:
            text = f"{pod.name} {waiting or 'running'} ({restarts} restarts)"
            return text, bool(restarts) or waiting not in _STARTING
    phase = str(pod.status.get("phase") or "unknown")
    return f"{pod.name} {phase}, not ready", phase == "Running"


def _health(snapshot: Snapshot, replica_set: KubeObject) -> _Health:
    """A ReplicaSet's ready and total pods, the troubles of those not ready, whether it fails."""
    pods = owned(snapshot, "Pod", replica_set)
    if not pods:
        total = replica_set.status.get("replicas", 0)
        ready = replica_set.status.get("readyReplicas", 0)
        made = created(replica_set)
        old = made is not None and reference_time(snapshot) - made >= SETTLE
        health = _Health(
            ready if isinstance(ready, int) else 0, total if isinstance(total, int) else 0
        )
        health.failing = old and health.ready < health.total
        return health
    health = _Health(sum(1 for p in pods if pod_ready(p)), len(pods))
    health.evidence = [p.source for p in pods]
    for pod in pods:
        if not pod_ready(pod):
            text, failing = _pod_trouble(pod)
            health.troubles.append(text)
            health.failing = health.failing or failing
    return health


@check("rollout_regression")
def rollout_regression(snapshot: Snapshot) -> list[Detection]:
    """Deployments whose newest ReplicaSet fails while the previous one's pods are ready."""
    found: list[Detection] = []
    for deployment in snapshot.of_kind("Deployment"):
        revisions = replica_sets(snapshot, deployment.namespace, deployment.name)
        if len(revisions) < 2:
            continue
        new, old = revisions[0], revisions[1]
        fresh, previous = _health(snapshot, new), _health(snapshot, old)
        if not fresh.failing or previous.ready == 0:
            continue
        changes = template_changes(_template_spec(old), _template_spec(new))
        changed = "; ".join(changes[:8]) if changes else "no difference in the pod template"
        failing = f" ({'; '.join(fresh.troubles[:3])})" if fresh.troubles else ""
        finding = (
            f"Deployment {deployment.namespace}/{deployment.name}: the new revision "
            f"{revision(new)} ({new.name}) has {fresh.ready}/{fresh.total} pods ready{failing} "
            f"while the previous revision {revision(old)} ({old.name}) has {previous.ready} ready; "
            f"changed: {changed}."
        )
        evidence = sources(deployment, new, old, *fresh.evidence[:3], *previous.evidence[:1])
        found.append(detection(deployment.ref, finding, evidence, Severity.LIKELY_CAUSE))
    return found


def _replicas(deployment: KubeObject) -> str:
    status = deployment.status
    return (
        f"{deployment.spec.get('replicas', 1)} desired, "
        f"{status.get('updatedReplicas', 0)} updated, "
        f"{status.get('readyReplicas', 0)} ready, {status.get('availableReplicas', 0)} available"
    )


@check("progress_deadline")
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
        found.append(detection(deployment.ref, finding, sources(deployment), Severity.SYMPTOM))
    return found


@check("deployment_unavailable")
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
        found.append(detection(deployment.ref, finding, sources(deployment), Severity.SYMPTOM))
    return found

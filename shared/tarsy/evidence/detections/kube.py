"""Reading Kubernetes objects as the API serves them: the helpers every check shares (pure).

Design constraint: a gathered body may lack any field, hold a field of an
unexpected type, or be a partial view; these helpers never raise, and
answer "nothing" for what they cannot read, so a check only ever misses a
finding, never crashes the detections of the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

# Re-exported: the checks read untyped fields through this module.
from tarsy.evidence.fields import as_dict as as_dict
from tarsy.evidence.fields import dicts as dicts
from tarsy.evidence.fields import parse_time as parse_time
from tarsy.evidence.snapshot import Detection, KubeEvent, KubeObject, ObjectRef, Snapshot
from tarsy.models import Severity

_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def items(value: object) -> list[object]:
    """``value`` when it is a list, else an empty list."""
    return list(value) if isinstance(value, list) else []


def scalar(value: object) -> str:
    """A field that should be text or a number, as text; "" for anything else (lists, maps)."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else ""
    return str(value) if isinstance(value, str | int | float) else ""


def number(value: object, default: float) -> float:
    """A field that should be a number, or ``default`` when it is not one."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value)) if isinstance(value, str) else default
    except ValueError:
        return default


def text_map(value: object) -> dict[str, str]:
    """A mapping of text to text (labels, selectors, ConfigMap data)."""
    return {str(k): str(v) for k, v in as_dict(value).items()}


def stamp(value: datetime | None) -> str:
    """A time as the API prints it, in UTC (``2026-11-27T10:02:03Z``); "an unknown time"."""
    if value is None:
        return "an unknown time"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reference_time(snapshot: Snapshot) -> datetime:
    """The time findings are judged at: the alert's start, else now."""
    # The alert's start keeps a detection reproducible; now is only the fallback.
    starts = snapshot.alert.starts_at
    if starts is not None:
        return starts if starts.tzinfo else starts.replace(tzinfo=UTC)
    return datetime.now(UTC)


def memory_text(value: float | None) -> str:
    """Bytes in the largest binary unit that keeps one decimal (``335544320`` → ``320Mi``)."""
    if value is None:
        return "unknown"
    for unit, size in _BINARY:
        if value >= size:
            return f"{value / size:.1f}".removesuffix(".0") + unit
    return f"{value:.0f}"


def cpu_text(cores: float | None) -> str:
    """Cores as Kubernetes prints them (``0.75`` → ``750m``, ``2`` → ``2``)."""
    if cores is None:
        return "unknown"
    if cores >= 1 and float(cores).is_integer():
        return str(int(cores))
    return f"{cores * 1000:.0f}m"


def trim(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def quoted(text: str, limit: int = 200) -> str:
    """``text`` trimmed and in double quotes (its own double quotes made single, not escaped)."""
    # Backslash escapes are noise to a reader; the quote marks only delimit the text.
    return '"' + trim(text, limit).replace('"', "'") + '"'


def labels(obj: KubeObject) -> dict[str, str]:
    """``metadata.labels``."""
    return text_map(obj.metadata.get("labels"))


def annotations_of(obj: KubeObject) -> dict[str, str]:
    """``metadata.annotations``."""
    return text_map(obj.metadata.get("annotations"))


def created(obj: KubeObject) -> datetime | None:
    """``metadata.creationTimestamp``."""
    return parse_time(obj.metadata.get("creationTimestamp"))


def selector_text(selector: Mapping[str, str]) -> str:
    """A label selector as ``kubectl`` writes it (``app=api,tier=web``); "everything"."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "everything"


def selector_description(selector: object) -> str:
    """A LabelSelector in words: ``app=api, tier in (web,edge)``; "all" when empty."""
    body = as_dict(selector)
    parts = [f"{k}={v}" for k, v in sorted(text_map(body.get("matchLabels")).items())]
    for expression in dicts(body.get("matchExpressions")):
        values = ",".join(str(v) for v in items(expression.get("values")))
        operator = str(expression.get("operator", ""))
        shown = f" {operator.lower()} ({values})" if values else f" {operator}"
        parts.append(f"{expression.get('key')}{shown}")
    return ", ".join(parts) or "all"


def plural(count: int, word: str) -> str:
    """``1 pod``, ``2 pods``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _expression_holds(expression: Mapping[str, Any], have: Mapping[str, str]) -> bool:
    key = str(expression.get("key", ""))
    operator = str(expression.get("operator", ""))
    values = {str(v) for v in items(expression.get("values"))}
    if operator == "In":
        return key in have and have[key] in values
    if operator == "NotIn":
        return key not in have or have[key] not in values
    if operator == "Exists":
        return key in have
    if operator == "DoesNotExist":
        return key not in have
    return False


def selects(selector: object, have: Mapping[str, str]) -> bool:
    """Whether a LabelSelector (``matchLabels``, ``matchExpressions``) selects ``have``.

    An empty selector selects everything, as in a NetworkPolicy's ``podSelector: {}``.
    """
    body = as_dict(selector)
    wanted = text_map(body.get("matchLabels"))
    if any(have.get(key) != value for key, value in wanted.items()):
        return False
    return all(_expression_holds(e, have) for e in dicts(body.get("matchExpressions")))


def condition(obj: KubeObject, kind: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of type ``kind``."""
    for entry in dicts(obj.status.get("conditions")):
        if entry.get("type") == kind:
            return entry
    return None


def condition_text(entry: Mapping[str, Any]) -> str:
    """A condition as ``Ready=False (Reason: message)``."""
    reason = str(entry.get("reason") or "")
    message = trim(str(entry.get("message") or ""), 240)
    detail = ": ".join(part for part in (reason, message) if part)
    head = f"{entry.get('type')}={entry.get('status')}"
    return f"{head} ({detail})" if detail else head


def owner_name(obj: KubeObject, kind: str) -> str | None:
    """The name of ``obj``'s owner of ``kind`` (a pod's ReplicaSet, a ReplicaSet's Deployment)."""
    for owner in dicts(obj.metadata.get("ownerReferences")):
        if owner.get("kind") == kind and owner.get("name"):
            return str(owner["name"])
    return None


def owned(snapshot: Snapshot, kind: str, owner: KubeObject) -> list[KubeObject]:
    """The gathered objects of ``kind`` in ``owner``'s namespace that ``owner`` owns."""
    return [
        obj
        for obj in snapshot.of_kind(kind)
        if obj.namespace == owner.namespace and owner_name(obj, owner.kind) == owner.name
    ]


def pod_replica_set(snapshot: Snapshot, pod: KubeObject) -> KubeObject | None:
    """The gathered ReplicaSet that owns ``pod``."""
    name = owner_name(pod, "ReplicaSet")
    return snapshot.get("ReplicaSet", name, pod.namespace) if name else None


def revision(replica_set: KubeObject) -> int:
    """A ReplicaSet's ``deployment.kubernetes.io/revision`` (0 when absent)."""
    value = annotations_of(replica_set).get("deployment.kubernetes.io/revision", "")
    return int(value) if value.isdecimal() else 0


def replica_sets(snapshot: Snapshot, namespace: str, deployment: str) -> list[KubeObject]:
    """The gathered ReplicaSets of Deployment ``namespace/deployment``, newest revision first."""
    found = [
        rs
        for rs in snapshot.of_kind("ReplicaSet")
        if rs.namespace == namespace and owner_name(rs, "Deployment") == deployment
    ]
    return sorted(found, key=revision, reverse=True)


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A pod spec's init containers then containers."""
    return [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]


def container_spec(pod: KubeObject, name: str) -> dict[str, Any]:
    """The spec of ``pod``'s container ``name`` (empty when not found)."""
    for container in containers(pod.spec):
        if container.get("name") == name:
            return container
    return {}


def container_statuses(pod: KubeObject) -> list[dict[str, Any]]:
    """A pod's init container statuses then container statuses."""
    return [
        *dicts(pod.status.get("initContainerStatuses")),
        *dicts(pod.status.get("containerStatuses")),
    ]


def state_of(status: Mapping[str, Any], which: str, state: str) -> dict[str, Any]:
    """``status[which][state]`` (``state``/``lastState``; ``waiting``/``terminated``)."""
    return as_dict(as_dict(status.get(which)).get(state))


def pod_ready(pod: KubeObject) -> bool:
    """Whether ``pod`` runs with condition Ready=True."""
    entry = condition(pod, "Ready")
    return pod.status.get("phase") == "Running" and entry is not None and entry["status"] == "True"


def event_line(event: KubeEvent) -> str:
    """An event as ``Reason: message (N times, last at time)``."""
    seen = f", last at {stamp(event.last_seen)}" if event.last_seen else ""
    times = f"{event.count} times" if event.count > 1 else "once"
    return f"{event.reason}: {quoted(event.message, 240)} ({times}{seen})"


def sources(*items: KubeObject | KubeEvent | str | None) -> list[str]:
    """The evidence ids of ``items`` (objects, events or ids), in order, without repeats."""
    found: list[str] = []
    for item in items:
        source = item if isinstance(item, str) or item is None else item.source
        if source and source not in found:
            found.append(source)
    return found


def detection(
    subject: ObjectRef, finding: str, evidence: Iterable[str], severity: Severity
) -> Detection:
    """A :class:`Detection`, its evidence without repeats (its check names it when it returns)."""
    return Detection(
        subject=subject,
        finding=finding,
        evidence=list(dict.fromkeys(evidence)),
        severity=severity,
    )


def image_parts(image: str) -> tuple[str, str]:
    """An image reference as (repository, tag or digest); the tag is "latest" when absent."""
    name, at, digest = image.partition("@")
    if at:
        return name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name, "@" + digest
    head, _, last = name.rpartition("/")
    if ":" in last:
        repo, tag = last.rsplit(":", 1)
        return (f"{head}/{repo}" if head else repo), tag
    return name, "latest"


def words(pattern: str) -> re.Pattern[str]:
    """A case-insensitive pattern."""
    return re.compile(pattern, re.IGNORECASE)


def pods_in(snapshot: Snapshot, namespace: str) -> Iterator[KubeObject]:
    """The gathered pods of ``namespace``."""
    return (p for p in snapshot.of_kind("Pod") if p.namespace == namespace)

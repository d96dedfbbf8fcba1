"""Workload controller checks: ReplicaSets, StatefulSets, DaemonSets, CronJobs, HPAs, PDBs.

Design constraint: pure functions of the snapshot, one per controller, each
reading only the controller's own spec and status, its events and what the
gather phase looked up for it (a missing object is known only when a lookup
said NotFound: :attr:`Snapshot.absent`; never guessed from its absence in
the snapshot). A finding names the counts, the condition's words and the
missing object, so the reader can act on it alone.
"""

from __future__ import annotations

import re

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    condition_text,
    containers,
    created,
    detection,
    dicts,
    event_line,
    number,
    owned,
    quoted,
    scalar,
    sources,
    stamp,
)
from tarsy.evidence.snapshot import Detection, KubeObject, ObjectRef, Snapshot
from tarsy.models import Severity


def _count(obj: KubeObject, key: str, default: float = 0) -> int:
    return int(number(obj.status.get(key), default))


def _absent(snapshot: Snapshot, kind: str, name: str, namespace: str = "") -> bool:
    return ObjectRef(kind=kind, name=name, namespace=namespace) in snapshot.absent


# ─── ReplicaSet ───────────────────────────────────────────────────────────────


@check("replica_set_failed_create")
def replica_set_failed_create(snapshot: Snapshot) -> list[Detection]:
    """ReplicaSets that cannot create their pods (ReplicaFailure=True or FailedCreate events).

    The controller's message names why (a quota, an admission webhook, a pod
    security rule, a missing service account): it is quoted whole.
    """
    found: list[Detection] = []
    for replica_set in snapshot.of_kind("ReplicaSet"):
        failure = condition(replica_set, "ReplicaFailure")
        events = [e for e in snapshot.events_of(replica_set.ref) if e.reason == "FailedCreate"]
        if (failure is None or failure.get("status") != "True") and not events:
            continue
        said = event_line(events[0]) if events else condition_text(failure or {})
        finding = (
            f"ReplicaSet {replica_set.namespace}/{replica_set.name} cannot create its pods "
            f"({_count(replica_set, 'replicas')} of "
            f"{int(number(replica_set.spec.get('replicas'), 1))} exist): {said}."
        )
        evidence = sources(replica_set, *events[:1])
        found.append(detection(replica_set.ref, finding, evidence, Severity.LIKELY_CAUSE))
    return found


# ─── StatefulSet ──────────────────────────────────────────────────────────────


def _claim_classes(stateful_set: KubeObject) -> list[str]:
    return [
        scalar(as_dict(template.get("spec")).get("storageClassName"))
        for template in dicts(stateful_set.spec.get("volumeClaimTemplates"))
    ]


def _statefulset_missing(snapshot: Snapshot, stateful_set: KubeObject) -> list[str]:
    """The objects a StatefulSet names that a lookup found missing."""
    missing: list[str] = []
    service = scalar(stateful_set.spec.get("serviceName"))
    if service and _absent(snapshot, "Service", service, stateful_set.namespace):
        missing.append(f"its governing Service {stateful_set.namespace}/{service} does not exist")
    for name in dict.fromkeys(_claim_classes(stateful_set)):
        if name and _absent(snapshot, "StorageClass", name):
            missing.append(f"the StorageClass {name} of its volumeClaimTemplates does not exist")
    return missing


@check("statefulset_not_ready")
def statefulset_not_ready(snapshot: Snapshot) -> list[Detection]:
    """StatefulSets with fewer ready replicas than wanted, or naming a missing Service/class.

    A missing governing Service or StorageClass is the cause (severity 1); a
    shortfall alone is a symptom whose pods the pod checks explain.
    """
    found: list[Detection] = []
    for stateful_set in snapshot.of_kind("StatefulSet"):
        wanted = int(number(stateful_set.spec.get("replicas"), 1))
        ready = _count(stateful_set, "readyReplicas")
        missing = _statefulset_missing(snapshot, stateful_set)
        if ready >= wanted and not missing:
            continue
        head = f"StatefulSet {stateful_set.namespace}/{stateful_set.name} has {ready} of {wanted} "
        finding = head + "replicas ready" + (f": {'; '.join(missing)}" if missing else "")
        current, update = (
            scalar(stateful_set.status.get("currentRevision")),
            scalar(stateful_set.status.get("updateRevision")),
        )
        if current and update and current != update:
            finding += f"; a rollout from {current} to {update} is in progress"
        severity = Severity.LIKELY_CAUSE if missing else Severity.SYMPTOM
        found.append(detection(stateful_set.ref, finding + ".", sources(stateful_set), severity))
    return found


# ─── DaemonSet ────────────────────────────────────────────────────────────────


@check("daemonset_unavailable")
def daemonset_unavailable(snapshot: Snapshot) -> list[Detection]:
    """DaemonSets whose pods are unavailable, or not scheduled on every node they should be."""
    found: list[Detection] = []
    for daemon_set in snapshot.of_kind("DaemonSet"):
        desired = _count(daemon_set, "desiredNumberScheduled")
        ready = _count(daemon_set, "numberReady")
        misscheduled = _count(daemon_set, "numberMisscheduled")
        if desired == 0 or (ready >= desired and misscheduled == 0):
            continue
        extra = f"; {misscheduled} run where they should not" if misscheduled else ""
        finding = (
            f"DaemonSet {daemon_set.namespace}/{daemon_set.name} has {ready} of {desired} "
            f"pods ready ({_count(daemon_set, 'numberUnavailable')} unavailable){extra}."
        )
        found.append(detection(daemon_set.ref, finding, sources(daemon_set), Severity.SYMPTOM))
    return found


# ─── CronJob ──────────────────────────────────────────────────────────────────

_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_CRON_FIELD = re.compile(
    r"^(\*|\?|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?(,(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?)*$"
)
_CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _field_valid(field: str, low: int, high: int) -> bool:
    if not _CRON_FIELD.match(field):
        return False
    numbers = [int(n) for n in re.findall(r"(?<![/0-9])([0-9]+)", field)]
    return all(low <= n <= high for n in numbers)


def schedule_problem(schedule: str) -> str:
    """Why a CronJob schedule is not valid ("" when it is): fields, syntax, ranges.

    Args:
        schedule: ``spec.schedule``, with an optional ``CRON_TZ=``/``TZ=`` prefix.

    Returns:
        The problem in words, or "".
    """
    text = schedule.strip()
    if not text:
        return "it has no schedule"
    fields = text.split()
    if fields[0].startswith(("CRON_TZ=", "TZ=")):
        fields = fields[1:]
    if len(fields) == 1 and fields[0].lower() in _MACROS:
        return ""
    if fields[0].lower() == "@every" and len(fields) == 2:
        return ""
    if len(fields) != 5:
        return f"its schedule {quoted(text)} has {len(fields)} fields, not 5"
    for field, (low, high) in zip(fields, _CRON_RANGES, strict=True):
        if not _field_valid(field, low, high):
            return f"its schedule {quoted(text)} has an invalid field {quoted(field)}"
    return ""


def _newest_job(snapshot: Snapshot, cron_job: KubeObject) -> KubeObject | None:
    jobs = owned(snapshot, "Job", cron_job)
    return max(jobs, key=lambda j: stamp(created(j))) if jobs else None


@check("cronjob")
def cronjob_problems(snapshot: Snapshot) -> list[Detection]:
    """CronJobs that cannot run as meant: suspended, an invalid schedule, the last Job failed."""
    found: list[Detection] = []
    for cron_job in snapshot.of_kind("CronJob"):
        name = f"CronJob {cron_job.namespace}/{cron_job.name}"
        problem = schedule_problem(scalar(cron_job.spec.get("schedule")))
        if problem:
            finding = f"{name} never runs: {problem}."
            found.append(detection(cron_job.ref, finding, sources(cron_job), Severity.LIKELY_CAUSE))
        if cron_job.spec.get("suspend") is True:
            last = scalar(cron_job.status.get("lastScheduleTime")) or "no recorded time"
            finding = f"{name} is suspended (spec.suspend: true); it last ran at {last}."
            found.append(detection(cron_job.ref, finding, sources(cron_job), Severity.SYMPTOM))
        job = _newest_job(snapshot, cron_job)
        failed = condition(job, "Failed") if job is not None else None
        if job is not None and failed is not None and failed.get("status") == "True":
            finding = f"{name}'s newest Job {job.name} failed: {condition_text(failed)}."
            found.append(detection(cron_job.ref, finding, sources(cron_job, job), Severity.SYMPTOM))
    return found


# ─── HorizontalPodAutoscaler ──────────────────────────────────────────────────


def _resource_metrics(hpa: KubeObject) -> list[str]:
    """The resources (cpu, memory) an HPA scales on by utilization of requests."""
    names: list[str] = []
    for metric in dicts(hpa.spec.get("metrics")):
        resource = as_dict(metric.get("resource")) or as_dict(metric.get("containerResource"))
        target = as_dict(resource.get("target"))
        if resource.get("name") and (
            target.get("type") == "Utilization" or "targetAverageUtilization" in resource
        ):
            names.append(str(resource["name"]))
    if not dicts(hpa.spec.get("metrics")) and "targetCPUUtilizationPercentage" in hpa.spec:
        names.append("cpu")  # autoscaling/v1
    return names


def _without_requests(target: KubeObject, resource: str) -> list[str]:
    """The containers of a workload's pod template that request no ``resource``."""
    template = as_dict(as_dict(target.spec.get("template")).get("spec"))
    return [
        str(c.get("name"))
        for c in containers(template)
        if resource not in as_dict(as_dict(c.get("resources")).get("requests"))
    ]


def _hpa_target_problems(snapshot: Snapshot, hpa: KubeObject) -> tuple[list[str], list[str]]:
    ref = as_dict(hpa.spec.get("scaleTargetRef"))
    kind, name = scalar(ref.get("kind")), scalar(ref.get("name"))
    if not (kind and name):
        return ["it names no scale target"], []
    if _absent(snapshot, kind, name, hpa.namespace):
        return [f"its scale target {kind} {hpa.namespace}/{name} does not exist"], []
    target = snapshot.get(kind, name, hpa.namespace)
    if target is None:
        return [], []
    problems = [
        f"it scales on {resource} utilization but {kind} {name}'s containers "
        f"{', '.join(missing)} request no {resource}"
        for resource in _resource_metrics(hpa)
        if (missing := _without_requests(target, resource))
    ]
    return problems, [target.source]


@check("hpa")
def hpa_problems(snapshot: Snapshot) -> list[Detection]:
    """HPAs that cannot scale (missing target, no requests, ScalingActive=False) or are at max.

    At its maximum the HPA wants more than it may have: a capacity ceiling,
    reported as a symptom with the current figures.
    """
    found: list[Detection] = []
    for hpa in snapshot.of_kind("HorizontalPodAutoscaler"):
        name = f"HorizontalPodAutoscaler {hpa.namespace}/{hpa.name}"
        problems, extra = _hpa_target_problems(snapshot, hpa)
        active = condition(hpa, "ScalingActive")
        if active is not None and active.get("status") == "False":
            problems.append(f"it cannot compute a scale ({condition_text(active)})")
        if problems:
            finding = f"{name} cannot scale: {'; '.join(problems)}."
            found.append(detection(hpa.ref, finding, sources(hpa, *extra), Severity.LIKELY_CAUSE))
            continue
        maximum = int(number(hpa.spec.get("maxReplicas"), 0))
        current = _count(hpa, "currentReplicas")
        desired = _count(hpa, "desiredReplicas")
        limited = condition(hpa, "ScalingLimited")
        at_max = maximum > 0 and current >= maximum and desired >= maximum
        if at_max or (limited is not None and limited.get("reason") == "TooManyReplicas"):
            said = f" ({condition_text(limited)})" if limited else ""
            finding = (
                f"{name} is at its maximum of {maximum} replicas ({current} running, "
                f"{desired} desired){said}: it cannot add capacity."
            )
            found.append(detection(hpa.ref, finding, sources(hpa), Severity.SYMPTOM))
    return found


# ─── PodDisruptionBudget ──────────────────────────────────────────────────────


@check("pdb")
def pdb_blocks(snapshot: Snapshot) -> list[Detection]:
    """PodDisruptionBudgets that allow no disruption now (drains and evictions wait on them).

    With fewer healthy pods than the budget wants it is a symptom of those
    pods; with all healthy and still none allowed, the budget itself is
    too tight for any voluntary disruption: context for a stuck drain.
    """
    found: list[Detection] = []
    for pdb in snapshot.of_kind("PodDisruptionBudget"):
        if "disruptionsAllowed" not in pdb.status or _count(pdb, "disruptionsAllowed", 1) > 0:
            continue
        expected = _count(pdb, "expectedPods")
        if expected == 0:
            finding = f"PodDisruptionBudget {pdb.namespace}/{pdb.name} selects no pod."
            found.append(detection(pdb.ref, finding, sources(pdb), Severity.CONTEXT))
            continue
        healthy, wanted = _count(pdb, "currentHealthy"), _count(pdb, "desiredHealthy")
        rule = ", ".join(
            f"{key} {pdb.spec[key]}"
            for key in ("minAvailable", "maxUnavailable")
            if key in pdb.spec
        )
        finding = (
            f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows no disruption: "
            f"{healthy} of {expected} pods healthy, {wanted} required ({rule or 'no rule'})"
        )
        if healthy < wanted:
            finding += "; fewer pods are healthy than it requires."
            found.append(detection(pdb.ref, finding, sources(pdb), Severity.SYMPTOM))
        else:
            finding += "; evictions and node drains wait until it allows one."
            found.append(detection(pdb.ref, finding, sources(pdb), Severity.CONTEXT))
    return found

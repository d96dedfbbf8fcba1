"""Detections: plain code that reads a :class:`Snapshot` into one-sentence findings.

Design constraint: every check is a pure function of the snapshot, with no
I/O, judging times against the alert's start (the clock only when the alert
has none), so it is tested on clusters built in the tests. A finding
carries its evidence (names, figures, reasons, times), not only a label,
because the model that reads it may read nothing else. A check that cannot
read a field finds nothing; it never raises.

:data:`CHECKS` names every check; :func:`detect` runs those not disabled,
drops repeated findings and orders them: likely causes first, then
symptoms, then context, each in the order the checks found them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType

from tarsy.evidence.detections import (
    certificates,
    changes,
    config,
    events,
    logs,
    metrics,
    network,
    nodes,
    pods,
    policies,
    quota,
    recovery,
    rollouts,
    routing,
    scheduling,
    storage,
    workloads,
)
from tarsy.evidence.snapshot import Detection, Snapshot

logger = logging.getLogger(__name__)

Check = Callable[[Snapshot], list[Detection]]

# Within a severity, findings keep this order: the checks that explain a failure
# (what changed, what is missing) before those that only show it.
CHECKS: Mapping[str, Check] = MappingProxyType(
    {
        "recovered": recovery.recovered,
        "config_drift": config.config_drift,
        "unresolvable_host": network.unresolvable_host,
        "network_policy_blocks": network.network_policy_blocks,
        "rollout_regression": rollouts.rollout_regression,
        "webhook": routing.webhook_unavailable,
        "ingress": routing.ingress_problems,
        "gateway": routing.gateway_problems,
        "replica_set_failed_create": workloads.replica_set_failed_create,
        "cronjob": workloads.cronjob_problems,
        "hpa": workloads.hpa_problems,
        "statefulset_not_ready": workloads.statefulset_not_ready,
        "out_of_line": metrics.out_of_line,
        "level_shift": metrics.level_shift,
        "image_pull": pods.image_pull,
        "container_config": pods.container_config,
        "container_creating": pods.container_creating,
        "oom_killed": pods.oom_killed,
        "resource_saturation": metrics.resource_saturation,
        "service_port_mismatch": network.service_port_mismatch,
        "service_no_endpoints": network.service_no_endpoints,
        "quota_exhausted": quota.quota_exhausted,
        "unschedulable": scheduling.unschedulable,
        "pvc_pending": storage.pvc_pending,
        "volume_lost": storage.volume_lost,
        "certificate": certificates.certificate,
        "node_pressure": nodes.node_pressure,
        "node_saturation": nodes.node_saturation,
        "crash_loop": pods.crash_loop,
        "log_signals": logs.log_signals,
        "probe_failure": pods.probe_failure,
        "evicted": pods.evicted,
        "job_failed": pods.job_failed,
        "progress_deadline": rollouts.progress_deadline,
        "deployment_unavailable": rollouts.deployment_unavailable,
        "daemonset_unavailable": workloads.daemonset_unavailable,
        "pdb": workloads.pdb_blocks,
        "config_map_empty": config.config_map_empty,
        "network_policy_scope": policies.network_policy_scope,
        "warning_events": events.warning_events,
        "recent_change": changes.recent_change,
    }
)


def detect(snapshot: Snapshot, disabled: Collection[str] = ()) -> list[Detection]:
    """Run every check not in ``disabled``; drop repeats; order by severity, then as found.

    Args:
        snapshot: What the gather phase saw.
        disabled: Names of checks (keys of :data:`CHECKS`) not to run.

    Returns:
        The findings, likely causes first; a check that failed contributes none.
    """
    found: list[Detection] = []
    seen: set[tuple[str, str, str]] = set()
    for name, check in CHECKS.items():
        if name in disabled:
            continue
        try:
            results = check(snapshot)
        except Exception:  # a defect in one check must not hide the others' findings
            logger.exception("detection %s failed", name)
            continue
        for result in results:
            key = (result.check, str(result.subject), result.finding)
            if key not in seen:
                seen.add(key)
                found.append(result)
    # sorted() is stable: within a severity, the order of the checks and their findings.
    return sorted(found, key=lambda d: d.severity)

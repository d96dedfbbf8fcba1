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
from collections.abc import Collection, Mapping
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
from tarsy.evidence.detections.check import NamedCheck
from tarsy.evidence.snapshot import Detection, Snapshot

logger = logging.getLogger(__name__)


# Within a severity, findings keep this order: the checks that explain a failure
# (what changed, what is missing) before those that only show it.
_ORDERED: tuple[NamedCheck, ...] = (
    recovery.recovered,
    config.config_drift,
    network.unresolvable_host,
    network.network_policy_blocks,
    rollouts.rollout_regression,
    routing.webhook_unavailable,
    routing.ingress_problems,
    routing.gateway_problems,
    workloads.replica_set_failed_create,
    workloads.cronjob_problems,
    workloads.hpa_problems,
    workloads.statefulset_not_ready,
    metrics.out_of_line,
    metrics.level_shift,
    pods.image_pull,
    pods.container_config,
    pods.container_creating,
    pods.oom_killed,
    metrics.resource_saturation,
    network.service_port_mismatch,
    network.service_no_endpoints,
    quota.quota_exhausted,
    scheduling.unschedulable,
    storage.pvc_pending,
    storage.volume_lost,
    certificates.certificate,
    nodes.node_pressure,
    nodes.node_saturation,
    pods.crash_loop,
    logs.log_signals,
    pods.probe_failure,
    pods.evicted,
    pods.job_failed,
    rollouts.progress_deadline,
    rollouts.deployment_unavailable,
    workloads.daemonset_unavailable,
    workloads.pdb_blocks,
    config.config_map_empty,
    policies.network_policy_scope,
    events.warning_events,
    changes.recent_change,
)
CHECKS: Mapping[str, NamedCheck] = MappingProxyType({c.name: c for c in _ORDERED})


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

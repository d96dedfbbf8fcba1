"""NetworkPolicy scope checks: a policy that selects no pod, or one that admits everything.

Design constraint: context (severity 3), never a cause: whether traffic is
denied is :func:`tarsy.evidence.detections.network.network_policy_blocks`'s
question. "Selects no pod" is said only over a namespace's pod *list* (rows
with their labels), since pods fetched one by one say nothing of the others.
"""

from __future__ import annotations

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    detection,
    dicts,
    items,
    selector_description,
    selects,
    sources,
)
from tarsy.evidence.snapshot import Detection, KubeObject, Snapshot
from tarsy.models import Severity


def _listed_labels(snapshot: Snapshot, namespace: str) -> list[dict[str, str]] | None:
    """The labels of the pods a list showed in ``namespace``; None when none was listed."""
    rows = [
        row
        for row in snapshot.rows
        if row.kind == "Pod" and row.namespace == namespace and "LABELS" in row.columns
    ]
    return [row.labels for row in rows] if rows else None


def _admits_all(policy: KubeObject, key: str, peer_key: str) -> bool:
    """Whether a direction has a rule with no peers and no ports: it admits every peer."""
    return any(
        not items(rule.get(peer_key)) and not items(rule.get("ports"))
        for rule in dicts(policy.spec.get(key))
    )


def _types(policy: KubeObject) -> set[str]:
    declared = {str(t) for t in items(policy.spec.get("policyTypes"))}
    if declared:
        return declared
    # The API's default: Ingress always, Egress when egress rules are written.
    return {"Ingress", *(["Egress"] if "egress" in policy.spec else [])}


@check("network_policy_scope")
def network_policy_scope(snapshot: Snapshot) -> list[Detection]:
    """NetworkPolicies selecting no listed pod, or with a rule that admits every peer."""
    found: list[Detection] = []
    for policy in snapshot.of_kind("NetworkPolicy"):
        name = f"NetworkPolicy {policy.namespace}/{policy.name}"
        selector = as_dict(policy.spec.get("podSelector"))
        listed = _listed_labels(snapshot, policy.namespace)
        if listed is not None and not any(selects(selector, have) for have in listed):
            finding = (
                f"{name} selects no pod listed in {policy.namespace} (podSelector "
                f"{selector_description(selector)}): it restricts nothing."
            )
            found.append(detection(policy.ref, finding, sources(policy), Severity.CONTEXT))
        types = _types(policy)
        open_ways = [
            way
            for way, key, peer in (("ingress", "ingress", "from"), ("egress", "egress", "to"))
            if way.capitalize() in types and _admits_all(policy, key, peer)
        ]
        if open_ways:
            finding = (
                f"{name} admits all {' and '.join(open_ways)} traffic of the pods it selects "
                f"({selector_description(selector)}): a rule with no peers and no ports."
            )
            found.append(detection(policy.ref, finding, sources(policy), Severity.CONTEXT))
    return found

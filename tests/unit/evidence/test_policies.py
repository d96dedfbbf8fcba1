from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import policies
from tarsy.evidence.snapshot import KubeObject, ListedRow

from .cluster import obj, snapshot


def _policy(**spec: Any) -> KubeObject:
    return obj("NetworkPolicy", "p1", spec=spec)


def _row(name: str, labels: str) -> ListedRow:
    return ListedRow(kind="Pod", namespace="orders", name=name, source="list-pods",
                     columns={"LABELS": labels})  # fmt: skip


def test_a_policy_selecting_no_listed_pod_restricts_nothing() -> None:
    policy = _policy(podSelector={"matchLabels": {"app": "gone"}}, policyTypes=["Ingress"])
    [found] = policies.network_policy_scope(snapshot(policy, _row("web-1", "app=web")))
    assert found.severity == 3
    assert found.finding == (
        "NetworkPolicy orders/p1 selects no pod listed in orders (podSelector app=gone): "
        "it restricts nothing."
    )


def test_without_a_pod_list_the_scope_is_not_judged() -> None:
    policy = _policy(podSelector={"matchLabels": {"app": "gone"}}, policyTypes=["Ingress"])
    assert policies.network_policy_scope(snapshot(policy)) == []


def test_a_rule_with_no_peers_and_no_ports_admits_all_and_a_narrow_one_does_not() -> None:
    wide = _policy(podSelector={}, ingress=[{}], policyTypes=["Ingress"])
    [found] = policies.network_policy_scope(snapshot(wide, _row("web-1", "app=web")))
    assert "admits all ingress traffic of the pods it selects (all)" in found.finding
    narrow = _policy(
        podSelector={"matchLabels": {"app": "web"}},
        ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "api"}}}]}],
        egress=[{}],
    )
    [found] = policies.network_policy_scope(snapshot(narrow, _row("web-1", "app=web")))
    assert "admits all egress traffic" in found.finding and "ingress" not in found.finding

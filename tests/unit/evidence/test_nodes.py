from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import nodes
from tarsy.evidence.snapshot import AlertFacts, KubeObject, ListedRow, ObjectRef, Usage

from .cluster import T0, obj, pod, snapshot, usage

GI = 2**30
SHOP_ALERT = AlertFacts(name="HighLatency", labels={"namespace": "shop"}, starts_at=T0)


def _node(
    name: str = "node-a", conditions: list[dict[str, Any]] | None = None, **spec: Any
) -> KubeObject:
    ready = [{"type": "Ready", "status": "True"}]
    return obj(
        "Node",
        name,
        "",
        spec=spec,
        status={
            "allocatable": {"cpu": "3920m", "memory": "16318756Ki"},
            "conditions": conditions or ready,
        },
    )


def test_a_node_near_its_memory_names_the_figures_and_its_top_pods() -> None:
    node = _node()
    cluster = snapshot(
        node,
        pod("cache-0", node="node-a"),
        pod("search-1", node="node-a"),
        pod("elsewhere", node="node-b"),
        usage("Node", "node-a", cpu_m=1200, memory=15 * GI),
        usage("Pod", "cache-0", "orders", memory=9 * GI),
        usage("Pod", "search-1", "orders", memory=4 * GI),
        usage("Pod", "elsewhere", "orders", memory=20 * GI),
    )
    [found] = nodes.node_saturation(cluster)
    text = found.finding
    assert "Node node-a is using memory 15Gi of 15.6Gi allocatable (96%)" in text
    assert "top pods there: orders/cache-0 9Gi, orders/search-1 4Gi" in text
    assert "elsewhere" not in text and "CPU" not in text


def test_a_node_near_its_cpu_is_reported_with_the_share() -> None:
    cluster = snapshot(_node(), usage("Node", "node-a", cpu_m=3800, memory=GI))
    [found] = nodes.node_saturation(cluster)
    assert "using CPU 3800m of 3920m allocatable (97%)" in found.finding


def test_a_node_not_ready_is_a_likely_cause_with_its_condition() -> None:
    down = _node(
        conditions=[
            {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
            }
        ]
    )
    [found] = nodes.node_saturation(snapshot(down))
    assert found.severity == 1
    assert (
        "not ready: Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
        in found.finding
    )


def test_a_ready_node_with_room_is_not_reported() -> None:
    cluster = snapshot(_node(), usage("Node", "node-a", cpu_m=900, memory=6 * GI))
    assert nodes.node_saturation(cluster) == []
    assert nodes.node_pressure(cluster) == []


def test_a_node_under_memory_pressure_says_so() -> None:
    pressed = _node(
        conditions=[
            {
                "type": "MemoryPressure",
                "status": "True",
                "reason": "KubeletHasInsufficientMemory",
                "message": "kubelet has insufficient memory available",
            }
        ]
    )
    [found] = nodes.node_pressure(snapshot(pressed))
    assert (
        "Node node-a is under pressure: MemoryPressure=True (KubeletHasInsufficientMemory"
        in found.finding
    )


def test_a_busy_nodes_top_pods_include_neighbours_listed_in_other_namespaces() -> None:
    # The alert's own pod is fetched; the neighbours are only listed (pods_list on the
    # node) with their usage from a cluster-wide pods_top; an <unknown> row comes first.
    cluster = snapshot(
        _node("node-b"),
        pod("web-0", "shop", node="node-b"),
        listed_pod("batch-7x", "jobs", node="node-b"),
        listed_pod("batch-9m", "jobs", node="node-b"),
        listed_pod("far-away", "jobs", node="node-c"),
        Usage(ref=ObjectRef(kind="Node", name="node-b"), source="top-a"),
        usage("Node", "node-b", cpu_m=3871, memory=GI),
        usage("Pod", "web-0", "shop", cpu_m=380),
        usage("Pod", "batch-7x", "jobs", cpu_m=1210),
        usage("Pod", "batch-9m", "jobs", cpu_m=1080),
        usage("Pod", "far-away", "jobs", cpu_m=3000),
        usage("Pod", "web-1", "shop", cpu_m=100),
        listed_pod("web-1", "shop", node="node-b"),
        listed_pod("idle", "jobs", node="node-b"),
        usage("Pod", "idle", "jobs", cpu_m=50),
        alert=SHOP_ALERT,
    )
    [found] = nodes.node_saturation(cluster)
    assert found.finding == (
        "Node node-b is using CPU 3871m of 3920m allocatable (99%); top pods there: "
        "jobs/batch-7x 1210m, jobs/batch-9m 1080m, shop/web-0 380m; the alert's namespace's "
        "pods there: shop/web-1 100m; pods of other namespaces than shop use the most of it."
    )
    assert found.severity == 1  # a neighbour's load where the alert's pods run


def test_a_node_busy_with_the_alerts_own_pods_is_a_symptom() -> None:
    cluster = snapshot(
        _node("node-b"),
        pod("web-0", "shop", node="node-b"),
        listed_pod("batch-7x", "jobs", node="node-b"),
        usage("Node", "node-b", cpu_m=3800),
        usage("Pod", "web-0", "shop", cpu_m=3000),
        usage("Pod", "batch-7x", "jobs", cpu_m=500),
        alert=SHOP_ALERT,
    )
    [found] = nodes.node_saturation(cluster)
    assert found.severity == 2 and "other namespaces" not in found.finding


def listed_pod(name: str, namespace: str, node: str) -> ListedRow:
    return ListedRow(
        kind="Pod", name=name, namespace=namespace, source=f"list-{node}",
        columns={"NAME": name, "NAMESPACE": namespace, "NODE": node, "STATUS": "Running"},
    )  # fmt: skip

from __future__ import annotations

from tarsy.evidence.detections import changes
from tarsy.evidence.snapshot import AlertFacts, ObjectRef

from .cluster import T0, container, event, iso, obj, pod, replica_set, snapshot


def test_a_rollout_shortly_before_the_alert_is_context_with_its_time() -> None:
    new = replica_set("api-2b", "api", 4, {"containers": [container()]}, created=-12)
    first = replica_set("other-1a", "other", 1, {"containers": [container()]}, created=-5)
    old = replica_set("api-1a", "api", 3, {"containers": [container()]}, created=-600)
    [found] = changes.recent_change(snapshot(new, first, old))
    assert found.severity == 3 and found.check == "recent_change"
    assert found.finding == (
        f"Deployment orders/api rolled out revision 4 (ReplicaSet api-2b) at {iso(-12)}, "
        "12 min before the alert began."
    )


def test_a_rollout_says_what_it_changed_when_the_revision_before_it_was_gathered() -> None:
    env = [{"name": "WORKERS", "value": "4"}]
    old = replica_set("api-1a", "api", 3, {"containers": [container(env=env)]}, created=-600)
    raised = [{"name": "WORKERS", "value": "16"}]
    new = replica_set("api-2b", "api", 4, {"containers": [container(env=raised)]}, created=-12)
    [found] = changes.recent_change(snapshot(new, old))
    changed = 'it changed app env WORKERS "4" → "16".'
    assert found.finding.endswith(f"12 min before the alert began; {changed}")


def test_a_configmap_edit_is_read_from_managed_fields_and_control_plane_writes_are_not() -> None:
    edited = obj(
        "ConfigMap",
        "api-settings",
        metadata={
            "creationTimestamp": iso(-3000),
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "time": iso(-3000)},
                {"manager": "kubectl-edit", "operation": "Update", "time": iso(-7)},
            ],
        },
        data={"a": "b"},
    )
    ca = obj(
        "ConfigMap",
        "ca-bundle",
        metadata={
            "creationTimestamp": iso(-3000),
            "managedFields": [{"manager": "kube-controller-manager", "time": iso(-3)}],
        },
    )
    [found] = changes.recent_change(snapshot(edited, ca))
    assert found.finding == (
        f"ConfigMap orders/api-settings was edited by kubectl-edit at {iso(-7)}, "
        "7 min before the alert began."
    )


def test_a_scale_event_and_a_job_on_the_alerts_node_are_reported() -> None:
    deployment = ObjectRef(kind="Deployment", name="api", namespace="orders")
    scaled = event(
        deployment,
        "ScalingReplicaSet",
        "Scaled down replica set api-1a to 1",
        type="Normal",
        seen=-20,
    )
    victim = pod("api-1a-x", node="node-b")
    job_pod = pod("backup-29-q", node="node-b", created=-15)
    job_pod.body["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "backup-29"}]
    elsewhere = pod("report-1-z", node="node-c", created=-15)
    elsewhere.body["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "report-1"}]
    alert = AlertFacts(starts_at=T0, labels={"pod": "api-1a-x", "namespace": "orders"})
    found = changes.recent_change(snapshot(scaled, victim, job_pod, elsewhere, alert=alert))
    assert [f.finding for f in found] == [
        'Deployment orders/api scaled: ScalingReplicaSet "Scaled down replica set api-1a to 1" '
        f"at {iso(-20)}, 20 min before the alert began.",
        f"Job orders/backup-29 started pod backup-29-q on node node-b (where the alert's pods "
        f"run) at {iso(-15)}, 15 min before the alert began.",
    ]


def test_changes_outside_the_window_or_without_an_alert_start_are_not_reported() -> None:
    late = replica_set("api-3c", "api", 5, {"containers": [container()]}, created=30)
    early = replica_set("api-2b", "api", 4, {"containers": [container()]}, created=-120)
    assert changes.recent_change(snapshot(late, early)) == []
    recent = replica_set("api-4d", "api", 6, {"containers": [container()]}, created=-5)
    assert changes.recent_change(snapshot(recent, alert=AlertFacts())) == []


def test_context_is_capped_with_rollouts_first() -> None:
    sets = [
        replica_set(f"app{n}-2b", f"app{n}", 2, {"containers": [container()]}, created=-10 - n)
        for n in range(7)
    ]
    found = changes.recent_change(snapshot(*sets))
    assert len(found) == changes.MAX_FINDINGS
    assert all("rolled out revision 2" in f.finding for f in found)


def test_a_nodes_own_events_before_the_alert_are_context_newest_per_node() -> None:
    drained = ObjectRef(kind="Node", name="node-b")
    cluster = snapshot(
        event(drained, "NodeNotSchedulable", "Node node-b status is now: NodeNotSchedulable",
              type="Normal", seen=-9),
        event(drained, "Starting", "Starting kubelet.", type="Normal", seen=-20),
        event(drained, "NodeHasSufficientMemory", "status report", type="Normal", seen=-3),
        event(ObjectRef(kind="Node", name="node-c"), "Rebooted", "rebooted", seen=-600),
    )  # fmt: skip
    [found] = changes.recent_change(cluster)
    assert found.severity == 3 and found.subject == drained
    assert found.finding == (
        'Node node-b: NodeNotSchedulable "Node node-b status is now: NodeNotSchedulable" at '
        f"{iso(-9)}, 9 min before the alert began."
    )

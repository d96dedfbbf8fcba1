from __future__ import annotations

from typing import Any

from tarsy.evidence.detections import rollouts
from tarsy.evidence.snapshot import KubeObject

from .cluster import container, deployment, pod, replica_set, running, snapshot, terminated, waiting

_OLD_SPEC: dict[str, Any] = {
    "containers": [
        container(
            "api",
            "registry.example.com/shop/api:3.1.0",
            env=[{"name": "DB_POOL", "value": "20"}, {"name": "REGION", "value": "eu"}],
            envFrom=[{"configMapRef": {"name": "api-config"}}],
            resources={"limits": {"memory": "512Mi"}},
        )
    ]
}
_NEW_SPEC: dict[str, Any] = {
    "containers": [
        container(
            "api",
            "registry.example.com/shop/api:3.2.0",
            env=[{"name": "DB_POOL", "value": "200"}, {"name": "REGION", "value": "eu"}],
            envFrom=[{"configMapRef": {"name": "api-config-v2"}}],
            resources={"limits": {"memory": "512Mi"}},
        )
    ]
}


def _rollout(new_ready: bool) -> list[KubeObject]:
    new_status = (
        running("api", 0)
        if new_ready
        else waiting("api", "CrashLoopBackOff", restarts=6, last=terminated("Error", 1))
    )
    return [
        deployment("api", ready=1),
        replica_set("api-6f9", "api", 8, _NEW_SPEC, created=-10),
        replica_set("api-58c", "api", 7, _OLD_SPEC, created=-600),
        pod("api-6f9-n1", owner="api-6f9", statuses=[new_status]),
        pod("api-58c-o1", owner="api-58c", statuses=[running("api")]),
    ]


def test_a_new_revision_failing_where_the_previous_runs_names_what_changed() -> None:
    [found] = rollouts.rollout_regression(snapshot(*_rollout(new_ready=False)))
    assert found.severity == 1
    text = found.finding
    assert (
        "the new revision 8 (api-6f9) has 0/1 pods ready (api-6f9-n1 CrashLoopBackOff (6 restarts))"
        in text
    )
    assert "previous revision 7 (api-58c) has 1 ready" in text
    assert (
        'api image "registry.example.com/shop/api:3.1.0" → "registry.example.com/shop/api:3.2.0"'
        in text
    )
    assert 'api env DB_POOL "20" → "200"' in text
    assert "api envFrom ['configMapRef api-config'] → ['configMapRef api-config-v2']" in text
    assert "REGION" not in text and "resources" not in text


def test_a_new_revision_whose_pods_are_ready_is_not_a_regression() -> None:
    assert rollouts.rollout_regression(snapshot(*_rollout(new_ready=True))) == []


def test_template_changes_lists_resources_probes_and_commands() -> None:
    old = {
        "containers": [
            container(
                "w", command=["run"], readinessProbe={"httpGet": {"path": "/ready", "port": 80}}
            )
        ]
    }
    new = {
        "containers": [
            container(
                "w",
                command=["run", "--fast"],
                readinessProbe={"httpGet": {"path": "/readyz", "port": 80}},
                resources={"limits": {"cpu": "1"}},
            )
        ]
    }
    changes = rollouts.template_changes(old, new)
    assert any(c.startswith('w command ["run"] → ["run","--fast"]') for c in changes)
    assert any("readinessProbe" in c and "/readyz" in c for c in changes)
    assert any(c.startswith('w resources (none) → {"limits":{"cpu":"1"}}') for c in changes)


def test_a_deployment_past_its_progress_deadline_gives_its_replica_counts() -> None:
    stuck = deployment(
        "api",
        replicas=3,
        ready=1,
        conditions=[
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "api-6f9" has timed out progressing.',
            }
        ],
    )
    [found] = rollouts.progress_deadline(snapshot(stuck))
    assert "stopped progressing: Progressing=False (ProgressDeadlineExceeded" in found.finding
    assert "3 desired, 3 updated, 1 ready, 1 available" in found.finding
    assert "progressDeadlineSeconds 600" in found.finding


def test_an_unavailable_deployment_is_reported_and_an_available_one_is_not() -> None:
    down = deployment(
        "api",
        ready=0,
        conditions=[
            {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            }
        ],
    )
    up = deployment(
        "web",
        conditions=[
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    )
    [found] = rollouts.deployment_unavailable(snapshot(down, up))
    assert "orders/api is unavailable: Available=False (MinimumReplicasUnavailable" in found.finding
    assert "2 desired, 2 updated, 0 ready, 0 available" in found.finding
    assert rollouts.progress_deadline(snapshot(up)) == []


def test_a_new_revision_still_creating_its_pods_is_not_yet_a_regression() -> None:
    objects = _rollout(new_ready=True)
    objects[3] = pod("api-6f9-n1", owner="api-6f9", statuses=[waiting("api", "ContainerCreating")])
    assert rollouts.rollout_regression(snapshot(*objects)) == []


def test_without_its_pods_a_new_revision_is_judged_by_its_counts_once_settled() -> None:
    settled = [
        deployment("api", ready=1),
        replica_set("api-6f9", "api", 8, _NEW_SPEC, replicas=1, ready=0, created=-30),
        replica_set("api-58c", "api", 7, _OLD_SPEC, replicas=1, ready=1, created=-600),
    ]
    [found] = rollouts.rollout_regression(snapshot(*settled))
    assert "revision 8 (api-6f9) has 0/1 pods ready while the previous revision 7" in found.finding
    settled[1] = replica_set("api-6f9", "api", 8, _NEW_SPEC, replicas=1, ready=0, created=-2)
    assert rollouts.rollout_regression(snapshot(*settled)) == []

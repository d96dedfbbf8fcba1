"""Following references: what the next round of collectors looks at."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tarsy.evidence.catalog import CollectorCall, CollectorWhen
from tarsy.evidence.snapshot import (
    AlertFacts,
    KubeObject,
    ListedRow,
    ObjectRef,
    PodLog,
    Snapshot,
    Usage,
)
from tarsy.evidence.targets import age_seconds, targets_of


def pod(name: str, namespace: str = "shop", **spec: Any) -> KubeObject:
    body = {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7f"}],
        },
        "spec": {"nodeName": "node-a", **spec},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "web", "ready": False, "restartCount": 3,
                 "lastState": {"terminated": {"exitCode": 1}}},
            ],
        },
    }  # fmt: skip
    return KubeObject(kind="Pod", body=body, source="g-0")


ALERT = AlertFacts(name="PodCrashing", labels={"namespace": "shop", "pod": "web-7f-x", "team": "a"})


def test_the_pod_the_alert_names_is_a_target_with_the_alert_labels() -> None:
    [target] = targets_of("alert.pod", ALERT, Snapshot())
    assert target["name"] == "web-7f-x" and target["namespace"] == "shop"
    assert target["label.team"] == "a"


def test_a_pods_configmaps_and_secrets_are_followed_once() -> None:
    container = {
        "name": "web",
        "envFrom": [{"configMapRef": {"name": "web-env"}}],
        "env": [{"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "web-db", "key": "pw"}}}],
    }
    volumes = [{"name": "cfg", "configMap": {"name": "web-files"}}]
    snapshot = Snapshot(objects=[pod("web-7f-x", containers=[container], volumes=volumes)])
    names = [t["name"] for t in targets_of("pods.configmaps", ALERT, snapshot)]
    assert names == ["web-env", "web-files"]
    assert [t["name"] for t in targets_of("pods.secrets", ALERT, snapshot)] == ["web-db"]
    fetched = KubeObject(
        kind="ConfigMap", body={"metadata": {"name": "web-env", "namespace": "shop"}}, source="g-1"
    )
    snapshot.objects.append(fetched)
    assert [t["name"] for t in targets_of("pods.configmaps", ALERT, snapshot)] == ["web-files"]


def test_the_owner_chain_and_the_node_are_followed() -> None:
    snapshot = Snapshot(objects=[pod("web-7f-x", containers=[{"name": "web"}])])
    [owner] = targets_of("owners", ALERT, snapshot)
    assert (owner["kind"], owner["name"], owner["api_version"]) == (
        "ReplicaSet",
        "web-7f",
        "apps/v1",
    )
    assert [t["name"] for t in targets_of("pods.nodes", ALERT, snapshot)] == ["node-a"]


def node(name: str) -> KubeObject:
    body = {"kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}  # fmt: skip
    return KubeObject(kind="Node", body=body, source=f"g-{name}")


def test_only_a_node_near_its_capacity_is_followed_to_its_neighbours() -> None:
    snapshot = Snapshot(
        objects=[node("busy"), node("calm"), node("unmeasured")],
        usage=[
            Usage(ref=ObjectRef(kind="Node", name="busy"), source="t-1"),  # <unknown> row
            Usage(ref=ObjectRef(kind="Node", name="busy"), cpu_millicores=3700, source="t-2"),
            Usage(ref=ObjectRef(kind="Node", name="calm"), cpu_millicores=900,
                  memory_bytes=2 * 2**30, source="t-3"),
        ],
    )  # fmt: skip
    assert [t["name"] for t in targets_of("nodes.saturated", ALERT, snapshot)] == ["busy"]
    full = Usage(ref=ObjectRef(kind="Node", name="calm"), memory_bytes=15 * 2**30, source="t-4")
    snapshot.usage.insert(0, full)
    assert [t["name"] for t in targets_of("nodes.saturated", ALERT, snapshot)] == ["busy", "calm"]


def test_a_restarted_container_is_a_target_for_its_previous_log() -> None:
    snapshot = Snapshot(objects=[pod("web-7f-x", containers=[{"name": "web"}])])
    [target] = targets_of("pods.restarted", ALERT, snapshot)
    assert target["container"] == "web"


def test_listed_objects_come_failing_first_then_youngest() -> None:
    def row(name: str, ready: str, age: str) -> ListedRow:
        return ListedRow(
            kind="ReplicaSet", name=name, namespace="shop", columns={"READY": ready, "AGE": age},
            source="g-2",
        )  # fmt: skip

    snapshot = Snapshot(
        rows=[row("old", "3/3", "40d"), row("new", "3/3", "2m"), row("bad", "0/1", "1h")]
    )
    names = [t["name"] for t in targets_of("listed:ReplicaSet", ALERT, snapshot)]
    assert names == ["bad", "new", "old"]


def test_a_service_named_in_a_log_is_followed_in_its_own_namespace() -> None:
    log = PodLog(
        namespace="shop", pod="web-7f-x", text="dial tcp: lookup stock.inventory.svc.cluster.local",
        source="g-3",
    )  # fmt: skip
    snapshot = Snapshot(logs=[log])
    [service] = targets_of("services.named", ALERT, snapshot)
    assert (service["name"], service["namespace"]) == ("stock", "inventory")
    assert [t["namespace"] for t in targets_of("namespaces.related", ALERT, snapshot)] == [
        "inventory"
    ]


def test_unknown_sources_are_refused() -> None:
    with pytest.raises(KeyError):
        targets_of("pods.everything", ALERT, Snapshot())


def test_a_call_is_rendered_from_the_target_and_skipped_when_a_variable_is_missing() -> None:
    call = CollectorCall(tool="pods_log", arguments={"name": "{name}", "container": "{container}"})
    assert call.render({"name": "a", "container": "b"}) == {"name": "a", "container": "b"}
    assert call.render({"name": "a"}) is None
    scoped = CollectorCall(tool="resources_get", arguments={"namespace": "{namespace}", "tail": 5})
    assert scoped.render({"namespace": ""}) == {"tail": 5}


def test_conditions_on_the_alert_must_all_hold() -> None:
    when = CollectorWhen(alert_names=["Pod*"], has_any_label=["pod"], mentions=["CRASH"])
    assert when.holds(ALERT)
    assert not when.holds(ALERT.model_copy(update={"name": "NodeDown"}))
    assert not CollectorWhen(labels={"team": "b*"}).holds(ALERT)


def test_table_ages_read_in_seconds() -> None:
    assert age_seconds("9m57s") == 597
    assert age_seconds("2d") == 172800
    assert age_seconds("<unknown>") == float("inf")


def _replica_set(name: str, created: str) -> KubeObject:
    body = {
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created},
    }
    return KubeObject(kind="ReplicaSet", body=body, source=f"get-{name}")


def test_the_pods_of_code_released_shortly_before_the_alert_are_targets_for_their_log() -> None:
    started = AlertFacts(
        labels={"namespace": "shop"}, starts_at=datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    )
    ready = {"READY": "1/1", "STATUS": "Running", "RESTARTS": "0"}

    def row(name: str) -> ListedRow:
        return ListedRow(kind="Pod", name=name, namespace="shop", columns=ready, source="g-1")

    snapshot = Snapshot(
        objects=[
            _replica_set("web-7f", "2026-03-02T13:52:00Z"),  # 8 minutes before: released
            _replica_set("web-5c", "2026-02-20T09:00:00Z"),  # the revision before it
            pod("web-7f-x"),  # fetched, its owner reference names web-7f
        ],
        rows=[row("web-7f-abcde"), row("web-5c-fghij"), row("web-7f-abcde-extra")],
        logs=[PodLog(namespace="shop", pod="web-7f-x", text="ok", source="g-2")],
    )
    names = [t["name"] for t in targets_of("pods.released", started, snapshot)]
    # The fetched pod's log was read already; the older revision's pod is not new code.
    assert names == ["web-7f-abcde"]
    # Without a start there is no "shortly before": nothing is followed.
    assert targets_of("pods.released", AlertFacts(), snapshot) == []

from __future__ import annotations

import json
from typing import Any

from tarsy.evidence.detections import config
from tarsy.evidence.snapshot import KubeObject

from .cluster import container, iso, obj, pod, replica_set, snapshot

_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _config_map(
    data: dict[str, str], applied: dict[str, str] | None = None, **metadata: Any
) -> KubeObject:
    annotations = {_APPLIED: json.dumps({"kind": "ConfigMap", "data": applied})} if applied else {}
    return obj(
        "ConfigMap", "pricing-config", data=data, metadata={"annotations": annotations, **metadata}
    )


def _reader(**spec: Any) -> KubeObject:
    reading = container("app", envFrom=[{"configMapRef": {"name": "pricing-config"}}], **spec)
    return pod("pricing-6d5-q", containers=[reading], owner="pricing-6d5")


def test_a_configmap_edited_away_from_its_applied_configuration_names_each_changed_key() -> None:
    edited = _config_map(
        {"CURRENCY": "EUR", "TAX_RATE": "abc", "NEW": "1"},
        applied={"CURRENCY": "EUR", "TAX_RATE": "0.21", "OLD": "x"},
    )
    [found] = config.config_drift(snapshot(_reader(), edited))
    assert found.severity == 1
    text = found.finding
    assert "ConfigMap orders/pricing-config, read by pod pricing-6d5-q" in text
    assert 'TAX_RATE: "0.21" → "abc"' in text
    assert 'NEW: (absent) → "1"' in text and 'OLD: "x" → (absent)' in text
    assert "CURRENCY" not in text


def test_a_configmap_written_after_the_replicaset_was_created_says_who_and_when() -> None:
    managed = [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "time": iso(-90),
            "fieldsV1": {"f:data": {}},
        },
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "time": iso(-10),
            "fieldsV1": {"f:data": {"f:TAX_RATE": {}}},
        },
    ]
    changed = _config_map({"TAX_RATE": "0.21"}, managedFields=managed)
    rs = replica_set("pricing-6d5", "pricing", 3, {}, created=-60)
    [found] = config.config_drift(snapshot(_reader(), changed, rs))
    assert found.severity == 2
    assert f"changed after ReplicaSet pricing-6d5 was created at {iso(-60)}" in found.finding
    assert f"written by kubectl-edit (Update) at {iso(-10)}" in found.finding
    assert "kubectl-client-side-apply" not in found.finding
    assert rs.source in found.evidence


def test_a_configmap_read_through_a_volume_or_a_key_reference_is_checked_too() -> None:
    volume_reader = pod("pricing-6d5-q", containers=[container("app")], owner="pricing-6d5")
    volume_reader.spec["volumes"] = [{"name": "cfg", "configMap": {"name": "pricing-config"}}]
    assert list(config.config_map_names(volume_reader)) == ["pricing-config"]
    key_reader = pod(
        "p",
        containers=[
            container(
                "app",
                env=[
                    {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "k"}}}
                ],
            )
        ],
    )
    assert list(config.config_map_names(key_reader)) == ["other"]


def test_a_configmap_that_matches_what_was_applied_and_predates_the_rollout_is_not_reported() -> (
    None
):
    managed = [
        {"manager": "kubectl", "operation": "Apply", "time": iso(-90), "fieldsV1": {"f:data": {}}}
    ]
    steady = _config_map({"TAX_RATE": "0.21"}, applied={"TAX_RATE": "0.21"}, managedFields=managed)
    rs = replica_set("pricing-6d5", "pricing", 3, {}, created=-60)
    assert config.config_drift(snapshot(_reader(), steady, rs)) == []


def test_a_configmap_no_pod_reads_is_not_reported() -> None:
    edited = _config_map({"A": "2"}, applied={"A": "1"})
    assert config.config_drift(snapshot(pod("other-1"), edited)) == []


def test_the_cluster_ca_configmap_every_pod_mounts_is_not_reported() -> None:
    reader = pod("pricing-6d5-q", owner="pricing-6d5")
    reader.spec["volumes"] = [
        {"name": "token", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}}
    ]
    managed = [{"manager": "kube-controller-manager", "operation": "Update", "time": iso(-1)}]
    rotated = obj(
        "ConfigMap", "kube-root-ca.crt", data={"ca.crt": "..."}, metadata={"managedFields": managed}
    )
    rs = replica_set("pricing-6d5", "pricing", 3, {}, created=-60)
    assert config.config_drift(snapshot(reader, rotated, rs)) == []


def test_a_configmap_applied_with_its_deployment_seconds_later_is_not_a_change() -> None:
    managed = [
        {"manager": "kubectl", "operation": "Apply", "time": iso(-59.9), "fieldsV1": {"f:data": {}}}
    ]
    applied = _config_map({"TAX_RATE": "0.21"}, managedFields=managed)
    rs = replica_set("pricing-6d5", "pricing", 3, {}, created=-60)
    assert config.config_drift(snapshot(_reader(), applied, rs)) == []

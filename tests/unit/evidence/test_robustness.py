from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tarsy.evidence.detections import CHECKS
from tarsy.evidence.snapshot import AlertFacts, KubeEvent, KubeObject, ObjectRef, PodLog, Snapshot
from tarsy.evidence.targets import SOURCES, targets_of

from .cluster import container, event, log, obj, pod, terminated, usage, waiting

_KINDS = [
    "Pod", "ReplicaSet", "Deployment", "Service", "Endpoints", "EndpointSlice", "ConfigMap",
    "NetworkPolicy", "Namespace", "Node", "ResourceQuota", "Certificate", "CertificateRequest",
    "Order", "Challenge", "ClusterIssuer", "PersistentVolumeClaim", "Job", "StatefulSet",
    "DaemonSet", "CronJob", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Ingress",
    "HTTPRoute", "Gateway", "ValidatingWebhookConfiguration", "PersistentVolume", "Secret",
]  # fmt: skip
_KEYS = st.sampled_from(
    [
        "metadata", "spec", "status", "name", "namespace", "labels", "annotations", "containers",
        "containerStatuses", "state", "lastState", "waiting", "terminated", "reason", "exitCode",
        "restartCount", "conditions", "type", "ports", "port", "targetPort", "podSelector",
        "ingress", "egress", "from", "to", "namespaceSelector", "matchLabels", "selector",
        "ownerReferences", "kind", "data", "hard", "used", "allocatable", "memory", "cpu",
        "livenessProbe", "httpGet", "timeoutSeconds", "notAfter", "subsets", "addresses",
        "endPort", "ipBlock", "cidr", "managedFields", "time", "resources", "limits", "image",
        "webhooks", "clientConfig", "service", "rules", "backendRefs", "parents", "parentRefs",
        "scaleTargetRef", "metrics", "schedule", "suspend", "disruptionsAllowed", "expectedPods",
        "tls", "secretName", "volumeClaimTemplates", "serviceName", "maxReplicas", "http",
        "paths", "backend", "replicas", "requests", "template", "phase", "claimRef",
    ]
)  # fmt: skip
_LEAVES = st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=25,
)


@st.composite
def _objects(draw: st.DrawFn) -> KubeObject:
    kind = draw(st.sampled_from(_KINDS))
    body: dict[str, Any] = draw(st.dictionaries(_KEYS, _VALUES, max_size=5))
    return KubeObject(kind=kind, body=body, source="x")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_objects(), max_size=6), st.text(max_size=80))
def test_no_check_raises_on_objects_of_unexpected_shape(
    objects: list[KubeObject], text: str
) -> None:
    ref = ObjectRef(kind="Pod", name="", namespace="")
    cluster = Snapshot(
        objects=objects,
        events=[KubeEvent(object=ref, reason="Unhealthy", message=text, source="e")],
        logs=[PodLog(namespace="", pod="", text=text, source="l")],
    )
    for check in CHECKS.values():
        check(cluster)


def _rich_cluster() -> list[KubeObject]:
    from .test_certificates import _cert, _owned
    from .test_network import _FROM_WEB, _namespace, _peers, _policy, _service
    from .test_rollouts import _rollout

    caller, served, service = _peers()
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "timeoutSeconds": 1}
    crashing = pod(
        "crash-1",
        containers=[container("app", livenessProbe=probe, resources={"limits": {"memory": "1Gi"}})],
        statuses=[
            waiting("app", "CrashLoopBackOff", restarts=4, last=terminated("OOMKilled", 137))
        ],
    )
    return [
        *_rollout(new_ready=False),
        caller,
        served,
        service,
        _service("orders-api"),
        _policy("inventory", {"matchLabels": {"app": "inventory"}}, _FROM_WEB),
        _namespace("orders", team="orders"),
        _cert("False"),
        _owned("CertificateRequest", "storefront-tls-1", "Certificate", "storefront-tls"),
        crashing,
        obj("ResourceQuota", "q", status={"hard": {"pods": "2"}, "used": {"pods": "2"}}),
        obj("Node", "node-a", "", status={"allocatable": {"cpu": "2", "memory": "1Gi"}}),
        obj("Endpoints", "orders-api", subsets=[{"notReadyAddresses": [{"ip": "10.0.0.1"}]}]),
    ]


def _leaves(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))] + [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))] + [path]
    return [path]


def _replace(body: Any, path: tuple[object, ...], junk: object) -> None:
    if not path:
        return
    *head, last = path
    for step in head:
        body = body[step]
    body[last] = junk


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_check_raises_when_any_field_of_a_real_looking_cluster_is_junk(
    data: st.DataObject,
) -> None:
    objects = [o.model_copy(deep=True) for o in _rich_cluster()]
    for _ in range(data.draw(st.integers(1, 6))):
        target = data.draw(st.sampled_from(objects))
        path = data.draw(st.sampled_from(_leaves(target.body)))
        _replace(target.body, path, data.draw(_VALUES))
    crashing = ObjectRef(kind="Pod", name="crash-1", namespace="orders")
    cluster = Snapshot(
        objects=objects,
        usage=[usage("Node", "node-a", cpu_m=1900, memory=2**30)],
        events=[
            event(crashing, "Unhealthy", "Liveness probe failed: Get :8080/healthz took 3.5s"),
            event(crashing, "FailedMount", 'configmap "x" not found'),
            event(crashing, "Evicted", "The node was low on resource: memory."),
        ],
        logs=[log("crash-1", "lookup inventry: no such host\npanic: boom")],
    )
    for check in CHECKS.values():
        check(cluster)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_objects(), max_size=6), st.text(max_size=80))
def test_no_target_source_raises_on_objects_of_unexpected_shape(
    objects: list[KubeObject], text: str
) -> None:
    ref = ObjectRef(kind="Pod", name="", namespace="")
    cluster = Snapshot(
        objects=objects,
        events=[KubeEvent(object=ref, reason="FailedCreate", message=text, source="e")],
        logs=[PodLog(namespace="", pod="", text=text, source="l")],
    )
    alert = AlertFacts(labels={"namespace": "orders", "pod": "p"})
    for name in SOURCES:
        targets_of(name, alert, cluster)
    targets_of("listed.suspect:HorizontalPodAutoscaler,CronJob,Job,Ingress", alert, cluster)


def test_no_target_source_raises_on_fields_of_the_wrong_type() -> None:
    odd = {
        "metadata": {"name": "a", "ownerReferences": [{"kind": 1, "name": [2]}], "labels": [1]},
        "spec": {
            "selector": [1],
            "volumes": [{"configMap": "x", "projected": [1]}, "y"],
            "containers": ["abc", {"envFrom": "x", "env": [1]}],
            "nodeName": ["x"],
        },
        "status": {"containerStatuses": [{"name": "a", "lastState": "x", "state": "y"}]},
    }
    cluster = Snapshot(
        objects=[KubeObject(kind=kind, body=odd, source="x") for kind in _KINDS],
        logs=[PodLog(namespace="", pod="", text="a.b:1 x.y.svc", source="l")],
    )
    alert = AlertFacts(labels={"namespace": "orders"})
    for name in SOURCES:
        assert isinstance(targets_of(name, alert, cluster), list)

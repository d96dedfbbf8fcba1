"""The target sources a collector follows (``for_each``): what to look at next (pure).

Design constraint: this is the whole vocabulary the catalog may use, and it
is generic Kubernetes: references every cluster has (a pod's ConfigMaps, its
owner chain, a workload's selector, the node a pod runs on, a Service named
in a log line), never a name of any particular cluster. Each source reads
the alert and what was gathered so far and returns targets: the variables a
collector's call templates are filled from. Sources that read the snapshot
skip what was already fetched, so following references reaches a fixed
point.

Variables: ``namespace``, ``name``, ``kind``, ``api_version``, ``selector``
(a label selector), ``container``, and ``label.<name>`` for each alert label;
the metric sources (:mod:`tarsy.evidence.metric_targets`) add ``query``,
``by``, ``pods`` and the alert's window.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from tarsy.evidence import metric_targets
from tarsy.evidence.fields import as_dict, dicts
from tarsy.evidence.load import saturated
from tarsy.evidence.releases import new_replica_sets, owner_of, runs
from tarsy.evidence.snapshot import AlertFacts, KubeObject, ListedRow, ObjectRef, Snapshot

Target = dict[str, str]
TargetSource = Callable[[AlertFacts, Snapshot], list[Target]]

# The kind (and API version) of the workload an alert label names (kube-state-metrics' names).
WORKLOAD_LABELS: dict[str, tuple[str, str]] = {
    "deployment": ("Deployment", "apps/v1"),
    "statefulset": ("StatefulSet", "apps/v1"),
    "daemonset": ("DaemonSet", "apps/v1"),
    "replicaset": ("ReplicaSet", "apps/v1"),
    "job_name": ("Job", "batch/v1"),
    "cronjob": ("CronJob", "batch/v1"),
}
API_VERSIONS: dict[str, str] = {
    "Pod": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "Endpoints": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "PersistentVolumeClaim": "v1",
    "ResourceQuota": "v1",
    "LimitRange": "v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Ingress": "networking.k8s.io/v1",
    "IngressClass": "networking.k8s.io/v1",
    "StorageClass": "storage.k8s.io/v1",
    "PersistentVolume": "v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "PodDisruptionBudget": "policy/v1",
    "Gateway": "gateway.networking.k8s.io/v1",
    "HTTPRoute": "gateway.networking.k8s.io/v1",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    **dict(WORKLOAD_LABELS.values()),
}
_HEALTHY_STATUSES = {"Running", "Completed", "Succeeded"}
# <service>.<namespace>.svc[.cluster.local]: how one workload names another's Service.
_SERVICE_HOST = re.compile(
    r"\b([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\.([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\.svc\b"
)
# <service>.<namespace> standing alone (not part of a longer dotted name).
_SHORT_SERVICE_HOST = re.compile(
    r"(?<![\w.-])([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\.([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)"
    r"(?![\w-]|\.[a-z0-9])"
)


def _fetched(snapshot: Snapshot) -> set[ObjectRef]:
    return {o.ref for o in snapshot.objects} | set(snapshot.absent)


def _with_labels(alert: AlertFacts, target: Target) -> Target:
    return {**{f"label.{k}": v for k, v in alert.labels.items()}, **target}


def _object_target(kind: str, name: str, namespace: str) -> Target:
    return {
        "kind": kind,
        "api_version": API_VERSIONS.get(kind, "v1"),
        "name": name,
        "namespace": namespace,
    }


# ─── what the alert names ─────────────────────────────────────────────────────


def once(_alert: AlertFacts, _snapshot: Snapshot) -> list[Target]:
    """One target with no variables but the alert's labels: the collector's calls run once."""
    return [{}]


def alert_namespace(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The namespace the alert names."""
    namespace = alert.labels.get("namespace", "")
    return [{"namespace": namespace}] if namespace else []


def alert_pod(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The pod the alert names (with its container when named)."""
    pod, namespace = alert.labels.get("pod", ""), alert.labels.get("namespace", "")
    if not (pod and namespace):
        return []
    target = _object_target("Pod", pod, namespace)
    if alert.labels.get("container"):
        target["container"] = alert.labels["container"]
    return [target]


def alert_workload(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob the alert names."""
    namespace = alert.labels.get("namespace", "")
    return [
        _object_target(kind, alert.labels[label], namespace)
        for label, (kind, _version) in WORKLOAD_LABELS.items()
        if alert.labels.get(label) and namespace
    ]


def alert_service(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The Service the alert names (``service`` or ``service_name`` label)."""
    name = alert.labels.get("service") or alert.labels.get("service_name") or ""
    namespace = alert.labels.get("namespace", "")
    return [_object_target("Service", name, namespace)] if name and namespace else []


def alert_node(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The node the alert names."""
    node = alert.labels.get("node", "")
    return [_object_target("Node", node, "")] if node else []


# ─── what was gathered ────────────────────────────────────────────────────────


def _row_unhealthy(row: ListedRow) -> bool:
    status = row.columns.get("STATUS", "")
    ready = row.columns.get("READY", "")
    restarts = row.columns.get("RESTARTS", "0").split(" ", 1)[0]
    have, _, want = ready.partition("/")
    not_ready = bool(want) and have != want and status != "Completed"
    restarted = restarts.isdigit() and int(restarts) > 0
    return status not in _HEALTHY_STATUSES or not_ready or restarted


def _pod_rows(snapshot: Snapshot) -> Iterator[ListedRow]:
    fetched = _fetched(snapshot)
    seen: set[ObjectRef] = set()
    for row in snapshot.rows:
        if row.kind == "Pod" and row.ref not in fetched and row.ref not in seen:
            seen.add(row.ref)
            yield row


def unhealthy_listed_pods(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Listed pods that are not running and ready, or restarted, not yet fetched."""
    return [
        _object_target("Pod", row.name, row.namespace)
        for row in _pod_rows(snapshot)
        if _row_unhealthy(row)
    ]


def listed_pods(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Listed pods not yet fetched, the unhealthy first (a workload's or Service's pods)."""
    rows = sorted(_pod_rows(snapshot), key=lambda row: not _row_unhealthy(row))
    return [_object_target("Pod", row.name, row.namespace) for row in rows]


def _containers(pod: KubeObject) -> list[dict[str, Any]]:
    return [c for c in pod.spec.get("containers") or [] if isinstance(c, dict)]


def _statuses(pod: KubeObject) -> list[dict[str, Any]]:
    return [c for c in pod.status.get("containerStatuses") or [] if isinstance(c, dict)]


def pod_containers(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Each container of each fetched pod that is not healthy (for its current log)."""
    targets: list[Target] = []
    for pod in snapshot.of_kind("Pod"):
        unhealthy = {
            str(s.get("name"))
            for s in _statuses(pod)
            if not s.get("ready") or s.get("restartCount")
        }
        phase = pod.status.get("phase")
        for container in _containers(pod):
            name = str(container.get("name", ""))
            if name in unhealthy and phase != "Pending":
                targets.append(
                    {**_object_target("Pod", pod.name, pod.namespace), "container": name}
                )
    return targets


def restarted_containers(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Each container of a fetched pod that ran before (for its previous run's log)."""
    return [
        {**_object_target("Pod", pod.name, pod.namespace), "container": str(s.get("name"))}
        for pod in snapshot.of_kind("Pod")
        for s in _statuses(pod)
        if as_dict(s.get("lastState")).get("terminated") and s.get("name")
    ]


def released_pods(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Pods of a ReplicaSet created shortly before the alert, whose log was not read yet.

    A release regression leaves its pods ready, so no other source reads their
    logs; these are where its errors are (:mod:`tarsy.evidence.releases`).
    """
    releases = new_replica_sets(snapshot, alert)
    if not releases:
        return []
    pods = [(p.namespace, p.name, owner_of(p)) for p in snapshot.of_kind("Pod")]
    pods += [(row.namespace, row.name, None) for row in _pod_rows(snapshot)]
    targets: list[Target] = []
    for replica_set in releases:
        for namespace, name, owner in pods:
            logged = snapshot.logs_of(namespace, name)
            target = _object_target("Pod", name, namespace)
            if not logged and runs(replica_set, namespace, name, owner) and target not in targets:
                targets.append(target)
    return targets


def out_of_line_pods_to_read(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Pods a breakdown of the alert's expression singles out, whose log was not read yet.

    One pod serving the errors the rest do not (a canary, a bad node's replica) is
    healthy to Kubernetes, so no other source reads its log.
    """
    # Imported here: the checks load only when a step gathers, and this source is read
    # only then; a step that does not gather keeps its cold start (test_entry_points).
    from tarsy.evidence.detections.metrics import out_of_line_pods

    targets: list[Target] = []
    for ref in out_of_line_pods(snapshot):
        target = _object_target("Pod", ref.name, ref.namespace)
        if (
            ref.namespace
            and not snapshot.logs_of(ref.namespace, ref.name)
            and target not in targets
        ):
            targets.append(target)
    return targets


def _volume_refs(pod: KubeObject, key: str, field: str) -> Iterator[str]:
    for volume in pod.spec.get("volumes") or []:
        if isinstance(volume, dict) and isinstance(volume.get(key), dict):
            name = volume[key].get(field)
            if name:
                yield str(name)
        projected = as_dict(volume.get("projected")) if isinstance(volume, dict) else {}
        for source in dicts(projected.get("sources")):
            if isinstance(source, dict) and isinstance(source.get(key), dict):
                name = source[key].get("name")
                if name:
                    yield str(name)


def _env_refs(pod: KubeObject, ref_key: str, key_ref: str) -> Iterator[str]:
    for container in [*_containers(pod), *(pod.spec.get("initContainers") or [])]:
        if not isinstance(container, dict):
            continue
        for source in container.get("envFrom") or []:
            if isinstance(source, dict) and isinstance(source.get(ref_key), dict):
                yield str(source[ref_key].get("name", ""))
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") if isinstance(env, dict) else None
            if isinstance(value_from, dict) and isinstance(value_from.get(key_ref), dict):
                yield str(value_from[key_ref].get("name", ""))


def _references(
    snapshot: Snapshot, kind: str, names: Callable[[KubeObject], Iterable[str]]
) -> list[Target]:
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for pod in snapshot.of_kind("Pod"):
        for name in names(pod):
            ref = ObjectRef(kind=kind, name=name, namespace=pod.namespace)
            if name and ref not in fetched:
                targets.setdefault(ref, _object_target(kind, name, pod.namespace))
    return list(targets.values())


def pod_configmaps(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The ConfigMaps fetched pods read (envFrom, env, volumes), not yet fetched."""
    return _references(
        snapshot,
        "ConfigMap",
        lambda pod: [
            *_env_refs(pod, "configMapRef", "configMapKeyRef"),
            *_volume_refs(pod, "configMap", "name"),
        ],
    )


def pod_secrets(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The Secrets fetched pods read, not yet fetched (the brief shows their key names only)."""
    return _references(
        snapshot,
        "Secret",
        lambda pod: [
            *_env_refs(pod, "secretRef", "secretKeyRef"),
            *_volume_refs(pod, "secret", "secretName"),
        ],
    )


def pod_claims(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The PersistentVolumeClaims fetched pods mount, not yet fetched."""
    return _references(
        snapshot,
        "PersistentVolumeClaim",
        lambda pod: _volume_refs(pod, "persistentVolumeClaim", "claimName"),
    )


def pod_nodes(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The nodes fetched pods run on, not yet fetched."""
    fetched = _fetched(snapshot)
    names = {str(p.spec.get("nodeName")) for p in snapshot.of_kind("Pod") if p.spec.get("nodeName")}
    return [
        _object_target("Node", name, "")
        for name in sorted(names)
        if ObjectRef(kind="Node", name=name) not in fetched
    ]


def saturated_nodes(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The fetched nodes near their capacity (:func:`tarsy.evidence.load.saturated`).

    What competes on a busy node may live in any namespace: a collector lists
    the node's pods and their usage cluster-wide from here.
    """
    return [
        _object_target("Node", node.name, "")
        for node in snapshot.of_kind("Node")
        if saturated(snapshot, node)
    ]


def owners(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The owners of fetched objects (pod → ReplicaSet → Deployment, Job → CronJob, ...)."""
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for obj in snapshot.objects:
        for owner in obj.metadata.get("ownerReferences") or []:
            if not isinstance(owner, dict) or not owner.get("kind") or not owner.get("name"):
                continue
            ref = ObjectRef(
                kind=str(owner["kind"]), name=str(owner["name"]), namespace=obj.namespace
            )
            if ref not in fetched:
                target = _object_target(ref.kind, ref.name, ref.namespace)
                target["api_version"] = str(owner.get("apiVersion") or target["api_version"])
                targets.setdefault(ref, target)
    return list(targets.values())


def _selector(match_labels: object) -> str:
    if not isinstance(match_labels, Mapping) or not match_labels:
        return ""
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def workload_selectors(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Fetched Deployments, StatefulSets, DaemonSets and Jobs, with their pod selector."""
    targets: list[Target] = []
    for obj in snapshot.objects:
        if obj.kind not in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            continue
        selector = _selector(as_dict(obj.spec.get("selector")).get("matchLabels"))
        if selector:
            target = _object_target(obj.kind, obj.name, obj.namespace)
            targets.append({**target, "selector": selector})
    return targets


def service_selectors(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Fetched Services with a selector, as the label selector of their pods."""
    return [
        {**_object_target("Service", obj.name, obj.namespace), "selector": selector}
        for obj in snapshot.of_kind("Service")
        if (selector := _selector(obj.spec.get("selector")))
    ]


_AGE = re.compile(r"(\d+)([smhdy])")
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31536000}


def age_seconds(text: str) -> float:
    """A table's AGE cell in seconds (``9m57s``, ``8d``, ``2y3d``); unknown ages sort last."""
    parts = _AGE.findall(text or "")
    if not parts:
        return float("inf")
    return float(sum(int(n) * _AGE_SECONDS[unit] for n, unit in parts))


def _row_order(row: ListedRow) -> tuple[bool, float]:
    """Rows not ready first (``READY`` False, or x/y short), then the youngest."""
    ready = row.columns.get("READY", "")
    have, _, want = ready.partition("/")
    failing = ready == "False" or (bool(want) and have != want)
    return (not failing, age_seconds(row.columns.get("AGE", "")))


def listed_objects(kinds: str) -> TargetSource:
    """A source: listed objects of ``kinds`` (comma-separated), not yet fetched.

    The rows not ready come first, then the youngest: a workload's newest
    revisions, the certificate that fails.
    """
    wanted = {kind.strip() for kind in kinds.split(",") if kind.strip()}

    def source(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
        fetched = _fetched(snapshot)
        targets: dict[ObjectRef, Target] = {}
        rows = sorted((r for r in snapshot.rows if r.kind in wanted), key=_row_order)
        for row in rows:
            if row.ref in fetched or not row.name:
                continue
            target = _object_target(row.kind, row.name, row.namespace)
            target["api_version"] = row.api_version or target["api_version"]
            targets.setdefault(row.ref, target)
        return list(targets.values())

    return source


def _texts(snapshot: Snapshot) -> Iterator[tuple[str, str]]:
    """``(namespace, text)`` of every log and every ConfigMap value gathered."""
    for log in snapshot.logs:
        yield log.namespace, log.text
    for config_map in snapshot.of_kind("ConfigMap"):
        data = config_map.body.get("data") or {}
        if isinstance(data, dict):
            for value in data.values():
                yield config_map.namespace, str(value)


def known_namespaces(snapshot: Snapshot) -> set[str]:
    """Namespaces the snapshot shows exist: listed or fetched Namespaces, and objects' own."""
    names = {row.name for row in snapshot.rows if row.kind == "Namespace"}
    names |= {o.name for o in snapshot.objects if o.kind == "Namespace"}
    names |= {o.namespace for o in snapshot.objects} | {r.namespace for r in snapshot.rows}
    return names - {""}


def service_hosts(text: str, namespaces: set[str]) -> list[tuple[str, str]]:
    """The (Service, namespace) pairs ``text`` names, in order of first mention.

    ``<service>.<namespace>.svc[.cluster.local]`` always; the short form
    ``<service>.<namespace>`` (what a pod's DNS search path completes) only
    when ``<namespace>`` is one the cluster is known to have, since any
    two-label host name has that shape.
    """
    found = dict.fromkeys(_SERVICE_HOST.findall(text))
    for service, namespace in _SHORT_SERVICE_HOST.findall(text):
        if namespace in namespaces:
            found.setdefault((service, namespace))
    return list(found)


def _named_pairs(snapshot: Snapshot) -> Iterator[tuple[str, str]]:
    namespaces = known_namespaces(snapshot)
    for _namespace, text in _texts(snapshot):
        yield from service_hosts(text, namespaces)


def named_services(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Services named as ``<service>.<namespace>[.svc]`` in logs or ConfigMaps, not yet fetched."""
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for service, namespace in _named_pairs(snapshot):
        ref = ObjectRef(kind="Service", name=service, namespace=namespace)
        if ref not in fetched:
            targets.setdefault(ref, _object_target("Service", service, namespace))
    return list(targets.values())


def related_namespaces(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Namespaces other than the alert's that gathered objects point at (Services named)."""
    own = alert.labels.get("namespace", "")
    names = {namespace for _service, namespace in _named_pairs(snapshot)}
    return [{"namespace": name} for name in sorted(names - {own, ""})]


def dependency_services(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Fetched Services outside the alert's namespace (dependencies), with their pod selector."""
    own = alert.labels.get("namespace", "")
    return [t for t in service_selectors(alert, snapshot) if t["namespace"] != own]


def dependency_pods(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Listed pods outside the alert's namespace, not yet fetched, the unhealthy first."""
    own = alert.labels.get("namespace", "")
    return [t for t in listed_pods(alert, snapshot) if t["namespace"] != own]


def namespaces(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The Namespace objects of the alert's and related namespaces (their labels matter)."""
    fetched = _fetched(snapshot)
    names = {
        t["namespace"]
        for t in [*alert_namespace(alert, snapshot), *related_namespaces(alert, snapshot)]
    }
    return [
        _object_target("Namespace", name, "")
        for name in sorted(names)
        if ObjectRef(kind="Namespace", name=name) not in fetched
    ]


def certificate_issuers(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The issuers of fetched cert-manager Certificates, not yet fetched."""
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for cert in snapshot.of_kind("Certificate"):
        issuer = cert.spec.get("issuerRef") or {}
        if not isinstance(issuer, dict) or not issuer.get("name"):
            continue
        kind = str(issuer.get("kind") or "Issuer")
        namespace = "" if kind == "ClusterIssuer" else cert.namespace
        ref = ObjectRef(kind=kind, name=str(issuer["name"]), namespace=namespace)
        if ref not in fetched:
            targets.setdefault(
                ref,
                {"kind": kind, "api_version": "cert-manager.io/v1", "name": ref.name,
                 "namespace": namespace},
            )  # fmt: skip
    return list(targets.values())


def certificate_namespaces(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """Namespaces where certificates may live: the alert's, and those of fetched Certificates."""
    names = {t["namespace"] for t in alert_namespace(alert, snapshot)}
    names |= {c.namespace for c in snapshot.of_kind("Certificate")}
    return [{"namespace": name} for name in sorted(names) if name]


# ─── what controllers and routes refer to, and where a dependency lives ──────


def _ref_target(kind: str, name: str, namespace: str) -> tuple[ObjectRef, Target]:
    return ObjectRef(kind=kind, name=name, namespace=namespace), _object_target(
        kind, name, namespace
    )


def _routing_refs(obj: KubeObject) -> Iterator[tuple[str, str, str]]:
    """(kind, name, namespace) of what an Ingress, HTTPRoute or webhook configuration names."""
    # Imported here: the routing readers live with their checks, which a step loads only
    # when it gathers (importing this module must not load every check).
    from tarsy.evidence.detections import routing

    if obj.kind == "Ingress":
        for service, _port in routing.ingress_backends(obj):
            yield "Service", service, obj.namespace
        for tls in dicts(obj.spec.get("tls")):
            if tls.get("secretName"):
                yield "Secret", str(tls["secretName"]), obj.namespace
        if routing.ingress_class(obj):
            yield "IngressClass", routing.ingress_class(obj), ""
    elif obj.kind in ("HTTPRoute", "GRPCRoute"):
        for rule in dicts(obj.spec.get("rules")):
            for backend in dicts(rule.get("backendRefs")):
                if backend.get("name") and backend.get("kind", "Service") == "Service":
                    yield (
                        "Service",
                        str(backend["name"]),
                        str(backend.get("namespace") or obj.namespace),
                    )
        for parent in dicts(obj.spec.get("parentRefs")):
            if parent.get("name") and parent.get("kind", "Gateway") == "Gateway":
                yield "Gateway", str(parent["name"]), str(parent.get("namespace") or obj.namespace)
    elif obj.kind in routing.WEBHOOK_KINDS:
        for _hook, namespace, service in routing.webhook_services(obj):
            yield "Service", service, namespace


def _workload_refs(obj: KubeObject) -> Iterator[tuple[str, str, str]]:
    """(kind, name, namespace) of what a StatefulSet, claim or autoscaler names."""
    if obj.kind == "StatefulSet":
        if obj.spec.get("serviceName"):
            yield "Service", str(obj.spec["serviceName"]), obj.namespace
        for template in dicts(obj.spec.get("volumeClaimTemplates")):
            klass = as_dict(template.get("spec")).get("storageClassName")
            if klass:
                yield "StorageClass", str(klass), ""
    elif obj.kind == "PersistentVolumeClaim":
        if obj.spec.get("storageClassName"):
            yield "StorageClass", str(obj.spec["storageClassName"]), ""
        if obj.spec.get("volumeName"):
            yield "PersistentVolume", str(obj.spec["volumeName"]), ""
    elif obj.kind == "HorizontalPodAutoscaler":
        target = as_dict(obj.spec.get("scaleTargetRef"))
        if target.get("kind") and target.get("name"):
            yield str(target["kind"]), str(target["name"]), obj.namespace


def referenced(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """What fetched Ingresses, routes, webhooks, StatefulSets, claims and HPAs name, not fetched.

    Backend and webhook Services, TLS Secrets, IngressClasses, parent
    Gateways, governing Services, StorageClasses, scale targets: a lookup
    that answers NotFound is how a check learns one is missing.
    """
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for obj in snapshot.objects:
        for kind, name, namespace in [*_routing_refs(obj), *_workload_refs(obj)]:
            ref, target = _ref_target(kind, name, namespace)
            if ref not in fetched:
                targets.setdefault(ref, target)
    return list(targets.values())


def referenced_endpoints(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The Endpoints of Services that Ingresses, routes and webhooks route to, not fetched."""
    fetched = _fetched(snapshot)
    targets: dict[ObjectRef, Target] = {}
    for obj in snapshot.objects:
        for kind, name, namespace in _routing_refs(obj):
            ref, target = _ref_target("Endpoints", name, namespace)
            if kind == "Service" and ref not in fetched:
                targets.setdefault(ref, target)
    return list(targets.values())


_WEBHOOK_WORDS = re.compile(r"webhook", re.IGNORECASE)


def webhooks_failing(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """One target when an event or a status message gathered mentions an admission webhook."""
    messages = [e.message for e in snapshot.events]
    messages += [
        str(c.get("message") or "")
        for o in snapshot.objects
        for c in dicts(o.status.get("conditions"))
    ]
    return [{}] if any(_WEBHOOK_WORDS.search(m) for m in messages) else []


# This many distinct workloads failing the same way point at the cluster, not at one of them.
WIDESPREAD = 3
_CLUSTER_NAMESPACE = "kube-system"


def _workload_of(namespace: str, name: str) -> str:
    # A pod's name less its generated suffixes stands for its workload: the one key that a
    # fetched pod, its listed row and its events all share.
    return f"{namespace}/{name.rsplit('-', 2)[0]}"


def _failure_modes(snapshot: Snapshot) -> dict[str, set[str]]:
    """Failure reason → the workloads showing it (pod waiting reasons, listed statuses, events)."""
    modes: dict[str, set[str]] = {}
    for pod in snapshot.of_kind("Pod"):
        for status in _statuses(pod):
            reason = as_dict(as_dict(status.get("state")).get("waiting")).get("reason")
            if reason:
                modes.setdefault(str(reason), set()).add(_workload_of(pod.namespace, pod.name))
    for row in snapshot.rows:
        shown = row.columns.get("STATUS", "")
        if row.kind == "Pod" and shown and shown not in _HEALTHY_STATUSES:
            modes.setdefault(shown, set()).add(_workload_of(row.namespace, row.name))
    for event in snapshot.events:
        if event.type == "Warning" and event.object.kind == "Pod":
            namespace = event.namespace or event.object.namespace
            modes.setdefault(event.reason, set()).add(_workload_of(namespace, event.object.name))
    return modes


def cluster_components(_: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The cluster's own namespace, when :data:`WIDESPREAD` workloads fail the same way."""
    widespread = any(len(found) >= WIDESPREAD for found in _failure_modes(snapshot).values())
    return [{"namespace": _CLUSTER_NAMESPACE}] if widespread else []


def _short(ready: str) -> bool:
    """Whether an ``x/y`` cell shows fewer than wanted (an unreadable cell counts as short)."""
    have, _, want = ready.partition("/")
    return not (have.isdigit() and want.isdigit()) or int(have) < int(want)


# What a listed row shows when the object may be failing, by kind: (column, test).
_SUSPECT: dict[str, Callable[[Mapping[str, str]], bool]] = {
    "HorizontalPodAutoscaler": lambda c: (
        "<unknown>" in c.get("TARGETS", "<unknown>")
        or c.get("REPLICAS", "") == c.get("MAXPODS", "?")
    ),
    "PodDisruptionBudget": lambda c: c.get("ALLOWED DISRUPTIONS", "0") == "0",
    "CronJob": lambda c: c.get("SUSPEND", "True") == "True" or c.get("LAST SCHEDULE") == "<none>",
    "StatefulSet": lambda c: _short(c.get("READY", "")),
    "Job": lambda c: (
        c.get("STATUS", "") == "Failed" or ("STATUS" not in c and _short(c.get("COMPLETIONS", "")))
    ),
}


def listed_suspects(kinds: str) -> TargetSource:
    """A source: listed objects of ``kinds`` whose row looks failing, not yet fetched.

    Kinds with no row test (an Ingress's row cannot show a missing backend)
    are all taken; a row without the tested column is taken too.
    """
    every = listed_objects(kinds)

    def source(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
        rows = {row.ref: row for row in snapshot.rows}
        kept: list[Target] = []
        for target in every(alert, snapshot):
            ref = ObjectRef(kind=target["kind"], name=target["name"], namespace=target["namespace"])
            test = _SUSPECT.get(ref.kind)
            row = rows.get(ref)
            if test is None or row is None or test(row.columns):
                kept.append(target)
        return kept

    return source


SOURCES: dict[str, TargetSource] = {
    "alert": once,
    "alert.namespace": alert_namespace,
    "alert.pod": alert_pod,
    "alert.workload": alert_workload,
    "alert.service": alert_service,
    "alert.node": alert_node,
    "pods.unhealthy": unhealthy_listed_pods,
    "pods.listed": listed_pods,
    "pods.containers": pod_containers,
    "pods.restarted": restarted_containers,
    "pods.released": released_pods,
    "pods.out_of_line": out_of_line_pods_to_read,
    "pods.configmaps": pod_configmaps,
    "pods.secrets": pod_secrets,
    "pods.claims": pod_claims,
    "pods.nodes": pod_nodes,
    "nodes.saturated": saturated_nodes,
    "owners": owners,
    "workloads": workload_selectors,
    "services.selectors": service_selectors,
    "services.named": named_services,
    "namespaces.related": related_namespaces,
    "services.dependencies": dependency_services,
    "pods.dependencies": dependency_pods,
    "references": referenced,
    "references.endpoints": referenced_endpoints,
    "webhooks.failing": webhooks_failing,
    "cluster.components": cluster_components,
    "namespaces.objects": namespaces,
    "certificates.issuers": certificate_issuers,
    "certificates.namespaces": certificate_namespaces,
    "alert.expression": metric_targets.alert_expression,
    "alert.pods": metric_targets.alert_pods,
}


PARAMETERIZED: dict[str, Callable[[str], TargetSource]] = {
    "listed": listed_objects,
    "listed.suspect": listed_suspects,
    "alert.expression.by": metric_targets.alert_breakdown,
}


def source_named(name: str) -> TargetSource | None:
    """The source ``name``; a parameterized one takes its parameter after the colon.

    ``listed:Kind,Kind`` and ``listed.suspect:Kind,Kind`` take kinds,
    ``alert.expression.by:label,label`` labels.
    """
    base, _, parameter = name.partition(":")
    if parameter and base in PARAMETERIZED:
        return PARAMETERIZED[base](parameter)
    return SOURCES.get(name)


def targets_of(source: str, alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
    """The targets of source ``source``, each with the alert's labels as ``label.*``."""
    found = source_named(source)
    if found is None:
        raise KeyError(source)
    return [_with_labels(alert, t) for t in found(alert, snapshot)]

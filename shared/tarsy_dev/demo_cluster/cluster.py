"""The simulated cluster: scenario state as Kubernetes manifests, answered the way kubectl would.

Everything here is pure and deterministic (uids and digests are derived from names),
so the same scenario always produces the same tool outputs.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tarsy_dev.demo_cluster.models import (
    CLUSTER_SCOPED_KINDS,
    ClusterState,
    Container,
    Event,
    Manifest,
    Namespace,
    Node,
    Pod,
)

_UID_NAMESPACE = uuid.UUID("5f0c3a52-7d1e-4b8a-9c61-2e4f8d0b7a93")

# Resource types every cluster serves, whether or not a scenario has objects of them.
_BUILTIN_TYPES: tuple[tuple[str, str], ...] = (
    ("v1", "Pod"),
    ("v1", "Node"),
    ("v1", "Namespace"),
    ("v1", "Event"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Endpoints"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("policy/v1", "PodDisruptionBudget"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)

_WAITING_MESSAGES = {
    "ErrImagePull": "trying and failing to pull image",
    "ImagePullBackOff": "trying and failing to pull image",
    "ContainerCreating": "ContainerCreating",
    "CreateContainerConfigError": "CreateContainerConfigError",
}


class KubeError(Exception):
    """A request the cluster refuses, with the API server's wording, HTTP code and reason."""

    def __init__(self, message: str, *, code: int = 400, reason: str = "BadRequest") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


# ─── formatting helpers ───────────────────────────────────────────────────────


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (naive values are taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def timestamp(value: datetime) -> str:
    """RFC 3339 as Kubernetes writes it: ``2026-11-23T07:58:12Z``."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


# A timestamp as scenarios and manifests write them (RFC 3339, seconds, Z or an offset).
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _shifted(value: Any, by: timedelta) -> Any:
    if isinstance(value, datetime):
        return value + by
    if isinstance(value, str) and _RFC3339.match(value):
        return timestamp(datetime.fromisoformat(value.replace("Z", "+00:00")) + by)
    if isinstance(value, dict):
        return {key: _shifted(item, by) for key, item in value.items()}
    if isinstance(value, list):
        return [_shifted(item, by) for item in value]
    return value


def on_the_clock(state: ClusterState, now: datetime) -> ClusterState:
    """The scenario moved in time so that its clock reads ``now`` (pure).

    Design constraint: kubectl computes some ages itself from the timestamps it
    reads (``describe``, events) against the real clock, while the server's
    tables count from the cluster's; a cluster served to a person must agree
    with both. Every timestamp of the state, in its models and in its raw
    manifests alike, moves by the same amount, so every age stays what the
    scenario wrote.
    """
    by = utc(now) - utc(state.now)
    return ClusterState.model_validate(_shifted(state.model_dump(by_alias=True), by))


def human_duration(delta: timedelta) -> str:
    """Format an age the way kubectl does (apimachinery ``duration.HumanDuration``)."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


_CPU = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>m|)$")
_MEMORY = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|k|K|M|G|T|)$")
_MEMORY_UNITS = {
    "": 1,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}


def cpu_millicores(quantity: str) -> float:
    """Parse a CPU quantity (``250m``, ``2``, ``1.5``) into millicores."""
    match = _CPU.match(str(quantity).strip())
    if match is None:
        raise ValueError(f"not a CPU quantity: {quantity!r}")
    number = float(match["n"])
    return number if match["unit"] == "m" else number * 1000


def memory_bytes(quantity: str) -> float:
    """Parse a memory quantity (``512Mi``, ``16Gi``, ``1G``, ``1048576``) into bytes."""
    match = _MEMORY.match(str(quantity).strip())
    if match is None:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    return float(match["n"]) * _MEMORY_UNITS[match["unit"]]


def plain(value: Any) -> Any:
    """A copy of ``value`` with datetimes as Kubernetes timestamps (as the API serves them)."""
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def plural(kind: str) -> str:
    """The resource name of a kind: ``Deployment`` -> ``deployments``."""
    lower = kind.lower()
    if lower == "endpoints":
        return lower
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, "/".join(parts)))


def _hex(*parts: str, length: int = 16) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _resource_version(*parts: str) -> str:
    return str(40_000_000 + int(_hex(*parts, length=8), 16) % 9_000_000)


# ─── manifests from the compact models ────────────────────────────────────────


def _image_id(image: str) -> str:
    repository = image.rsplit("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return f"{repository}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, str):
        try:
            return utc(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _state_of(container: Container, started: datetime) -> dict[str, Any]:
    return container.state or {"running": {"startedAt": timestamp(started)}}


def _never_started(container: Container, state: dict[str, Any]) -> bool:
    waiting = state.get("waiting") or {}
    return (
        container.restart_count == 0
        and not container.last_state
        and "waiting" in state
        and (waiting.get("reason") in _WAITING_MESSAGES)
    )


def qos_class(pod: Pod) -> str:
    """Guaranteed, Burstable or BestEffort, by the containers' requests and limits."""
    resources = [c.resources for c in pod.containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits = r.get("limits") or {}
        requests = {**limits, **(r.get("requests") or {})}
        if "cpu" not in limits or "memory" not in limits:
            return "Burstable"
        if any(str(requests[k]) != str(limits[k]) for k in ("cpu", "memory")):
            return "Burstable"
    return "Guaranteed"


def pod_manifest(pod: Pod, node: Node | None) -> Manifest:
    """The full Pod object, as the API server would return it."""
    started = utc(pod.started or pod.created + timedelta(seconds=1))
    access_volume = f"kube-api-access-{_hex(pod.namespace, pod.name, length=5)}"
    specs: list[dict[str, Any]] = []
    statuses: list[dict[str, Any]] = []
    for c in pod.containers:
        spec: dict[str, Any] = {
            "name": c.name,
            "image": c.image,
            "imagePullPolicy": "IfNotPresent",
            "resources": c.resources,
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [
                *c.volume_mounts,
                {
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": access_volume,
                    "readOnly": True,
                },
            ],
        }
        optional = {
            "command": c.command,
            "args": c.args,
            "ports": c.ports,
            "env": c.env,
            "envFrom": c.env_from,
            "livenessProbe": c.liveness_probe,
            "readinessProbe": c.readiness_probe,
        }
        spec.update({k: v for k, v in optional.items() if v})
        specs.append(spec)
        state = _state_of(c, started)
        status: dict[str, Any] = {
            "name": c.name,
            "image": c.image,
            "imageID": "",
            "lastState": c.last_state,
            "ready": c.ready if c.ready is not None else "running" in state,
            "restartCount": c.restart_count,
            "started": "running" in state,
            "state": state,
        }
        if not _never_started(c, state):
            status["imageID"] = c.image_id or _image_id(c.image)
            status["containerID"] = "containerd://" + _hex(pod.name, c.name, "container", length=64)
        statuses.append(status)

    metadata: dict[str, Any] = {
        "creationTimestamp": timestamp(pod.created),
        "labels": pod.labels,
        "name": pod.name,
        "namespace": pod.namespace,
        "resourceVersion": _resource_version("Pod", pod.namespace, pod.name),
        "uid": _uid("Pod", pod.namespace, pod.name),
    }
    if pod.annotations:
        metadata["annotations"] = pod.annotations
    if pod.owner is not None:
        if pod.owner.kind in ("ReplicaSet", "Job", "Challenge"):
            metadata["generateName"] = pod.name.rsplit("-", 1)[0] + "-"
        metadata["ownerReferences"] = [
            {
                "apiVersion": pod.owner.api_version,
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": pod.owner.kind,
                "name": pod.owner.name,
                "uid": _uid(pod.owner.kind, pod.namespace, pod.owner.name),
            }
        ]

    spec_body: dict[str, Any] = {
        "containers": specs,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": pod.restart_policy,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": pod.service_account,
        "serviceAccountName": pod.service_account,
        "terminationGracePeriodSeconds": 30,
        "tolerations": pod.tolerations
        or [
            {
                "effect": "NoExecute",
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
        "volumes": [
            *pod.volumes,
            {
                "name": access_volume,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                "name": "kube-root-ca.crt",
                            }
                        },
                    ],
                },
            },
        ],
    }
    if pod.node is not None:
        spec_body["nodeName"] = pod.node
    if pod.node_selector:
        spec_body["nodeSelector"] = pod.node_selector
    if pod.priority_class_name:
        spec_body["priorityClassName"] = pod.priority_class_name

    not_ready = [s["name"] for s in statuses if not s["ready"]]
    scheduled = pod.node is not None
    conditions = pod.conditions or _pod_conditions(pod, started, scheduled, not_ready)
    status_body: dict[str, Any] = {
        "conditions": conditions,
        "phase": pod.phase,
        "qosClass": qos_class(pod),
    }
    if scheduled:
        status_body["containerStatuses"] = statuses
        status_body["startTime"] = timestamp(started)
        if node is not None:
            status_body["hostIP"] = node.internal_ip
            status_body["hostIPs"] = [{"ip": node.internal_ip}]
        if pod.pod_ip:
            status_body["podIP"] = pod.pod_ip
            status_body["podIPs"] = [{"ip": pod.pod_ip}]
    if pod.message:
        status_body["message"] = pod.message
    if pod.reason:
        status_body["reason"] = pod.reason
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec_body,
        "status": status_body,
    }


def _pod_conditions(
    pod: Pod, started: datetime, scheduled: bool, not_ready: list[str]
) -> list[dict[str, Any]]:
    if not scheduled:
        return [
            {
                "lastProbeTime": None,
                "lastTransitionTime": timestamp(pod.created),
                "message": pod.message or "0/3 nodes are available.",
                "reason": "Unschedulable",
                "status": "False",
                "type": "PodScheduled",
            }
        ]
    last_change = started
    for c in pod.containers:
        for state in (c.state or {}, c.last_state):
            for detail in state.values():
                for key in ("startedAt", "finishedAt"):
                    moment = _as_datetime(detail.get(key)) if isinstance(detail, dict) else None
                    if moment is not None:
                        last_change = max(last_change, moment)
    ready = "False" if not_ready else "True"
    conditions: list[dict[str, Any]] = [
        {"type": "PodReadyToStartContainers", "status": "True", "time": started},
        {"type": "Initialized", "status": "True", "time": pod.created},
        {"type": "Ready", "status": ready, "time": last_change},
        {"type": "ContainersReady", "status": ready, "time": last_change},
        {"type": "PodScheduled", "status": "True", "time": pod.created},
    ]
    out = []
    for condition in conditions:
        entry: dict[str, Any] = {
            "lastProbeTime": None,
            "lastTransitionTime": timestamp(condition["time"]),
            "status": condition["status"],
            "type": condition["type"],
        }
        if condition["status"] == "False":
            entry["reason"] = "ContainersNotReady"
            entry["message"] = f"containers with unready status: [{' '.join(not_ready)}]"
        out.append(entry)
    return out


def node_manifest(node: Node, now: datetime) -> Manifest:
    """The full Node object, as last heard from at ``now``."""
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        **{f"node-role.kubernetes.io/{role}": "" for role in node.roles},
        **node.labels,
    }
    seen = timestamp(now - timedelta(seconds=37))
    conditions = []
    for kind, ok_reason, ok_message in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ):
        pressured = kind in node.pressure
        conditions.append(
            {
                "lastHeartbeatTime": seen,
                "lastTransitionTime": timestamp(node.created),
                "message": f"kubelet has {kind[0].lower() + kind[1:]}" if pressured else ok_message,
                "reason": f"KubeletHas{kind}" if pressured else ok_reason,
                "status": "True" if pressured else "False",
                "type": kind,
            }
        )
    conditions.append(
        {
            "lastHeartbeatTime": seen,
            "lastTransitionTime": timestamp(node.created),
            "message": "kubelet is posting ready status"
            if node.ready
            else "Kubelet stopped posting node status.",
            "reason": "KubeletReady" if node.ready else "NodeStatusUnknown",
            "status": "True" if node.ready else "Unknown",
            "type": "Ready",
        }
    )
    spec: dict[str, Any] = {"providerID": f"gce://acme-prod/europe-west1-b/{node.name}"}
    if node.pod_cidr:
        spec["podCIDR"] = node.pod_cidr
        spec["podCIDRs"] = [node.pod_cidr]
    if node.taints:
        spec["taints"] = node.taints
    if node.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "creationTimestamp": timestamp(node.created),
            "labels": labels,
            "name": node.name,
            "resourceVersion": _resource_version("Node", node.name),
            "uid": _uid("Node", node.name),
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"address": node.internal_ip, "type": "InternalIP"},
                {"address": node.name, "type": "Hostname"},
            ],
            "allocatable": node.allocatable,
            "capacity": node.capacity,
            "conditions": conditions,
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": node.container_runtime_version,
                "kernelVersion": node.kernel_version,
                "kubeProxyVersion": node.kubelet_version,
                "kubeletVersion": node.kubelet_version,
                "operatingSystem": "linux",
                "osImage": node.os_image,
            },
        },
    }


def namespace_manifest(namespace: Namespace) -> Manifest:
    """The full Namespace object."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "creationTimestamp": timestamp(namespace.created),
            "labels": {"kubernetes.io/metadata.name": namespace.name, **namespace.labels},
            "name": namespace.name,
            "resourceVersion": _resource_version("Namespace", namespace.name),
            "uid": _uid("Namespace", namespace.name),
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


_CONTAINER_EVENTS = frozenset(
    {"BackOff", "Pulling", "Pulled", "Failed", "Created", "Started", "Killing", "Unhealthy"}
)
_EVENT_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Ingress": "networking.k8s.io/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
}


# ─── the cluster ──────────────────────────────────────────────────────────────


class Cluster:
    """Answers kubectl-style queries about a :class:`ClusterState`."""

    def __init__(self, state: ClusterState, clock: Callable[[], datetime] | None = None) -> None:
        self.state = state
        self.now = utc(state.now)
        # Ages count from the cluster's clock: fixed at the scenario's moment, or a live
        # clock for a cluster served to a person (see on_the_clock).
        self._clock = clock or (lambda: self.now)
        nodes = {node.name: node for node in state.nodes}
        self._pods = {(pod.namespace, pod.name): pod for pod in state.pods}
        objects: list[Manifest] = [namespace_manifest(ns) for ns in state.namespaces]
        objects += [node_manifest(node, self.now) for node in state.nodes]
        objects += [plain(pod_manifest(pod, nodes.get(pod.node or ""))) for pod in state.pods]
        objects += [self._with_metadata(plain(obj)) for obj in state.objects]
        index = {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for o in objects
        }
        objects += [self._event_manifest(event, index) for event in state.events]
        self._objects = objects
        self._types: dict[str, set[str]] = {}
        for api_version, kind in [
            *_BUILTIN_TYPES,
            *((o["apiVersion"], o["kind"]) for o in objects),
        ]:
            self._types.setdefault(kind, set()).add(api_version)
        self._node_usage = {node.name: node.usage for node in state.nodes}
        self._nodes = nodes

    def _with_metadata(self, obj: Manifest) -> Manifest:
        metadata = obj["metadata"]
        parts = (obj["kind"], metadata.get("namespace", ""), metadata["name"])
        metadata.setdefault("creationTimestamp", timestamp(self.now - timedelta(days=30)))
        metadata.setdefault("resourceVersion", _resource_version(*parts))
        metadata.setdefault("uid", _uid(*parts))
        return obj

    def _event_manifest(
        self, event: Event, index: dict[tuple[str, str, str], Manifest]
    ) -> Manifest:
        kind, _, name = event.object.partition("/")
        namespaced = kind not in CLUSTER_SCOPED_KINDS
        target = index.get((kind, event.namespace if namespaced else "", name))
        involved: dict[str, Any] = {
            "apiVersion": target["apiVersion"] if target else _EVENT_API_VERSIONS.get(kind, "v1"),
            "kind": kind,
            "name": name,
            "uid": target["metadata"]["uid"] if target else _uid(kind, event.namespace, name),
        }
        if namespaced:
            involved["namespace"] = event.namespace
        if kind == "Pod" and target is not None and event.reason in _CONTAINER_EVENTS:
            container = target["spec"]["containers"][0]["name"]
            involved["fieldPath"] = f"spec.containers{{{container}}}"
        last = utc(event.last_seen)
        first = utc(event.first_seen or event.last_seen)
        event_name = f"{name}.{_hex(event.namespace, event.object, event.reason, event.message)}"
        source: dict[str, Any] = {"component": event.source}
        if event.host:
            source["host"] = event.host
        return {
            "apiVersion": "v1",
            "count": event.count,
            "firstTimestamp": timestamp(first),
            "involvedObject": involved,
            "kind": "Event",
            "lastTimestamp": timestamp(last),
            "message": event.message,
            "metadata": {
                "creationTimestamp": timestamp(first),
                "name": event_name,
                "namespace": event.namespace,
                "resourceVersion": _resource_version("Event", event.namespace, event_name),
                "uid": _uid("Event", event.namespace, event_name),
            },
            "reason": event.reason,
            "reportingComponent": event.source,
            "reportingInstance": event.host or "",
            "source": source,
            "type": event.type,
        }

    # ── what the API serves ──

    def age(self, value: str | datetime | None) -> str:
        """How long before the cluster's clock ``value`` was, as kubectl prints ages."""
        if value is None:
            return "<unknown>"
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
        return human_duration(utc(self._clock()) - utc(moment))

    @property
    def types(self) -> dict[str, set[str]]:
        """Every kind served, with the apiVersions it is served in."""
        return self._types

    def has_namespace(self, namespace: str) -> bool:
        """Whether the namespace exists."""
        return any(ns.name == namespace for ns in self.state.namespaces)

    def objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[Manifest]:
        """The objects of a type (in ``namespace`` only, when given), by namespace and name."""
        items = [
            o
            for o in self._objects
            if o["kind"] == kind
            and o["apiVersion"] == api_version
            and (not namespace or o["metadata"].get("namespace") == namespace)
        ]
        return sorted(
            items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
        )

    def pod_log(self, namespace: str, name: str, container: str | None, previous: bool) -> str:
        """A container's log, as the kubelet serves it through ``pods/log``.

        Raises:
            KubeError: No such pod or container, or no log to show (kubelet's wording).
        """
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise KubeError(f'pods "{name}" not found', code=404, reason="NotFound")
        names = [c.name for c in pod.containers]
        if not container:
            if len(names) > 1:
                raise KubeError(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(names)}]"
                )
            container = names[0]
        chosen = next((c for c in pod.containers if c.name == container), None)
        if chosen is None:
            raise KubeError(f"container {container} is not valid for pod {name}")
        if previous:
            if chosen.previous_logs is None:
                raise KubeError(
                    f'previous terminated container "{container}" in pod "{name}" not found'
                )
            return chosen.previous_logs
        state = chosen.state or {}
        if pod.node is None:
            raise KubeError(f'pod "{name}" is not scheduled; it has no logs')
        if "waiting" in state and not chosen.logs:
            reason = str(state["waiting"].get("reason", ""))
            detail = _WAITING_MESSAGES.get(reason, reason)
            raise KubeError(
                f'container "{container}" in pod "{name}" is waiting to start: {detail}'
            )
        return chosen.logs

    def pod_usage(self, namespace: str | None = None) -> list[tuple[Pod, list[Container]]]:
        """Pods with recorded usage (as the Metrics Server has them), with their containers."""
        found = []
        for pod in sorted(self.state.pods, key=lambda p: (p.namespace, p.name)):
            if namespace and pod.namespace != namespace:
                continue
            measured = [c for c in pod.containers if c.usage is not None]
            if measured:
                found.append((pod, measured))
        return found

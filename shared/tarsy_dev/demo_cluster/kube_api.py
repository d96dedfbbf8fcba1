"""The demo cluster served over the Kubernetes REST API, for real clients on loopback.

Real clients are the judges: Debian's ``kubectl`` and kubernetes-mcp-server must
work against it unchanged, so it speaks what they need and no more
(``../shared/reference/kubernetes-api.md``): discovery (``/version``, ``/api``,
``/apis`` and each group version), ``get`` and ``list`` of every served kind
(label and field selectors), the ``meta.k8s.io/v1`` ``Table`` form both clients
list with, ``pods/log`` (``previous``, ``tailLines``), ``metrics.k8s.io``
(pod and node usage) and the ``SelfSubjectAccessReview`` kubernetes-mcp-server
posts before listing across namespaces. Replies are JSON, also to clients that
ask for protobuf first. It is read-only: nothing can change the scenario but a
switch to another one. Secrets are served without their data.

``tarsy-demo-cluster --scenario NAME`` serves one scenario on loopback and
writes a kubeconfig for it; ``--switchable`` adds ``GET``/``POST /scenario``
(outside the Kubernetes paths) so an evaluation can move one server from
scenario to scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tarsy_dev.demo_cluster.cluster import (
    Cluster,
    KubeError,
    cpu_millicores,
    memory_bytes,
    on_the_clock,
    plural,
    timestamp,
)
from tarsy_dev.demo_cluster.faults import ApiRequest, FaultPlan
from tarsy_dev.demo_cluster.loader import DEFAULT_SCENARIO, load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import CLUSTER_SCOPED_KINDS, Manifest, Scenario
from tarsy_dev.demo_cluster.tables import TableRenderer, served_object

METRICS_GROUP_VERSION = "metrics.k8s.io/v1beta1"
AUTHORIZATION_GROUP_VERSION = "authorization.k8s.io/v1"
DEFAULT_KUBECONFIG = Path(".local/demo-cluster/kubeconfig")

# kubectl's short names and categories (``kubectl get all``) of the kinds that have them.
_SHORT_NAMES: dict[str, list[str]] = {
    "Pod": ["po"],
    "Node": ["no"],
    "Namespace": ["ns"],
    "Event": ["ev"],
    "Service": ["svc"],
    "ConfigMap": ["cm"],
    "ServiceAccount": ["sa"],
    "Endpoints": ["ep"],
    "PersistentVolumeClaim": ["pvc"],
    "PersistentVolume": ["pv"],
    "ResourceQuota": ["quota"],
    "Deployment": ["deploy"],
    "ReplicaSet": ["rs"],
    "StatefulSet": ["sts"],
    "DaemonSet": ["ds"],
    "CronJob": ["cj"],
    "Ingress": ["ing"],
    "NetworkPolicy": ["netpol"],
    "PodDisruptionBudget": ["pdb"],
    "HorizontalPodAutoscaler": ["hpa"],
    "StorageClass": ["sc"],
    "PriorityClass": ["pc"],
    "Certificate": ["cert", "certs"],
    "CertificateRequest": ["cr", "crs"],
    "ExternalSecret": ["es"],
}
_IN_ALL = frozenset(
    {
        "Pod",
        "Service",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "HorizontalPodAutoscaler",
    }
)


@dataclass(frozen=True)
class ResourceType:
    """A kind as discovery advertises it."""

    api_version: str
    kind: str

    @property
    def name(self) -> str:
        """The resource (plural) name."""
        return plural(self.kind)

    @property
    def namespaced(self) -> bool:
        """Whether objects of the kind live in namespaces."""
        return self.kind not in CLUSTER_SCOPED_KINDS

    def resource(self) -> dict[str, Any]:
        """The ``APIResource`` entry."""
        entry: dict[str, Any] = {
            "name": self.name,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["get", "list"],
        }
        if self.kind in _SHORT_NAMES:
            entry["shortNames"] = _SHORT_NAMES[self.kind]
        if self.kind in _IN_ALL:
            entry["categories"] = ["all"]
        return entry


def _status(code: int, reason: str, message: str, **details: str) -> JSONResponse:
    """A ``Status`` reply, as the API server sends for every error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return JSONResponse(body, status_code=code)


def _not_found(resource: ResourceType, name: str) -> JSONResponse:
    group = resource.api_version.rpartition("/")[0]
    qualified = f"{resource.name}.{group}" if group else resource.name
    return _status(
        404, "NotFound", f'{qualified} "{name}" not found', name=name, kind=resource.name
    )


def _unknown_path() -> JSONResponse:
    return _status(404, "NotFound", "the server could not find the requested resource")


def _value_at(obj: Manifest, path: str) -> str | None:
    value: Any = obj
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, str) else None if value is None else str(value)


def _requirements(selector: str) -> list[tuple[str, str, str | None]]:
    """Parse ``a=b,c!=d,e,!f`` into (key, operator, value) triples."""
    found: list[tuple[str, str, str | None]] = []
    for raw in selector.split(","):
        term = raw.strip()
        if not term:
            continue
        for operator in ("!=", "==", "="):
            key, sep, value = term.partition(operator)
            if sep:
                found.append((key.strip(), "!=" if operator == "!=" else "=", value.strip()))
                break
        else:
            if term.startswith("!"):
                found.append((term[1:].strip(), "!exists", None))
            else:
                found.append((term, "exists", None))
    return found


def _selected(obj: Manifest, labels: str, fields: str) -> bool:
    object_labels = obj["metadata"].get("labels") or {}
    for key, operator, value in _requirements(labels):
        present = key in object_labels
        if operator == "exists" and not present:
            return False
        if operator == "!exists" and present:
            return False
        if operator == "=" and object_labels.get(key) != value:
            return False
        if operator == "!=" and object_labels.get(key) == value:
            return False
    for key, operator, value in _requirements(fields):
        actual = _value_at(obj, key) or ""
        if operator == "=" and actual != value:
            return False
        if operator == "!=" and actual == value:
            return False
    return True


def _wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


class ServedScenario:
    """The scenario served now, its cluster, its Table renderer and its fault counts.

    A switchable server (``--switchable``) moves to another scenario between
    investigations; switching, like loading, starts the fault counts afresh.
    """

    def __init__(self, scenario: Scenario, *, live_clock: bool = False) -> None:
        self._live_clock = live_clock
        self._state = self._state_for(scenario)

    def _state_for(self, scenario: Scenario) -> tuple[Scenario, Cluster, TableRenderer, FaultPlan]:
        if self._live_clock:
            # A person's kubectl counts some ages from the real clock: the scenario's
            # moment becomes now, and the tables' ages keep counting from the real clock.
            state = on_the_clock(scenario.cluster, datetime.now(UTC))
            cluster = Cluster(state, clock=lambda: datetime.now(UTC))
        else:
            cluster = Cluster(scenario.cluster)
        return scenario, cluster, TableRenderer(cluster), FaultPlan(scenario.faults)

    @property
    def scenario(self) -> Scenario:
        """The scenario served now."""
        return self._state[0]

    def snapshot(self) -> tuple[Scenario, Cluster, TableRenderer, FaultPlan]:
        """One consistent view of what is served, whatever a switch does meanwhile."""
        return self._state

    def serve(self, scenario: Scenario) -> None:
        """Serve ``scenario`` from now on, its fault counts from zero."""
        self._state = self._state_for(scenario)

    def switch(self, name: str) -> Scenario:
        """Serve another bundled scenario (raises ``ValueError`` for an unknown one)."""
        scenario = load_scenario(name)
        self.serve(scenario)
        return scenario


def _types(cluster: Cluster) -> dict[str, list[ResourceType]]:
    """Every served type by group version (plus the metrics API)."""
    by_version: dict[str, list[ResourceType]] = {}
    for kind, versions in sorted(cluster.types.items()):
        for api_version in sorted(versions):
            by_version.setdefault(api_version, []).append(ResourceType(api_version, kind))
    return by_version


def _version_info(cluster: Cluster) -> dict[str, str]:
    kubelet = cluster.state.nodes[0].kubelet_version  # e.g. v1.30.5-gke.1014001
    major, minor = kubelet.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": kubelet,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": timestamp(cluster.now),
        "goVersion": "go1.22.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


class KubeApi:
    """The HTTP handlers, over a :class:`ServedScenario`."""

    def __init__(self, served: ServedScenario) -> None:
        self.served = served

    # ── discovery ──

    async def version(self, request: Request) -> Response:
        """``GET /version``: the version kubectl picks its binary by."""
        return JSONResponse(_version_info(self.served.snapshot()[1]))

    async def core_versions(self, request: Request) -> Response:
        """``GET /api``: the core API's versions."""
        return JSONResponse(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": request.url.netloc}
                ],
            }
        )

    def _groups(self) -> list[dict[str, Any]]:
        versions = [v for v in _types(self.served.snapshot()[1]) if "/" in v]
        versions += [METRICS_GROUP_VERSION, AUTHORIZATION_GROUP_VERSION]
        groups: dict[str, list[str]] = {}
        for group_version in versions:
            group, _, version = group_version.partition("/")
            groups.setdefault(group, []).append(version)
        return [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in found],
                "preferredVersion": {"groupVersion": f"{group}/{found[0]}", "version": found[0]},
            }
            for group, found in sorted(groups.items())
        ]

    async def groups(self, request: Request) -> Response:
        """``GET /apis``: the API groups, the metrics and authorization APIs among them."""
        return JSONResponse({"kind": "APIGroupList", "apiVersion": "v1", "groups": self._groups()})

    def _resource_list(self, group_version: str) -> dict[str, Any] | None:
        if group_version == METRICS_GROUP_VERSION:
            resources = [
                {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
                 "verbs": ["get", "list"]},
                {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
                 "verbs": ["get", "list"]},
            ]  # fmt: skip
        elif group_version == AUTHORIZATION_GROUP_VERSION:
            resources = [
                {"name": "selfsubjectaccessreviews", "singularName": "", "namespaced": False,
                 "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
            ]  # fmt: skip
        else:
            types = _types(self.served.snapshot()[1]).get(group_version)
            if types is None:
                return None
            resources = [t.resource() for t in types]
            if group_version == "v1":
                resources += [
                    {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                     "verbs": ["get"]},
                    {"name": "nodes/proxy", "singularName": "", "namespaced": False,
                     "kind": "NodeProxyOptions", "verbs": ["get"]},
                ]  # fmt: skip
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": resources}  # fmt: skip

    # ── resources ──

    async def core(self, request: Request) -> Response:
        """Everything under ``/api``: the core group's discovery and resources."""
        segments = [s for s in request.path_params["path"].split("/") if s]
        if not segments:
            return await self.core_versions(request)
        if segments[0] != "v1":
            return _unknown_path()
        return await self._dispatch(request, "v1", segments[1:])

    async def grouped(self, request: Request) -> Response:
        """Everything under ``/apis/GROUP``: a group's discovery and resources."""
        segments = [s for s in request.path_params["path"].split("/") if s]
        if not segments:
            return await self.groups(request)
        group = next((g for g in self._groups() if g["name"] == segments[0]), None)
        if group is None:
            return _unknown_path()
        if len(segments) == 1:
            return JSONResponse({"kind": "APIGroup", "apiVersion": "v1", **group})
        return await self._dispatch(request, f"{segments[0]}/{segments[1]}", segments[2:])

    async def _dispatch(self, request: Request, group_version: str, rest: list[str]) -> Response:
        if not rest:
            listed = self._resource_list(group_version)
            return JSONResponse(listed) if listed is not None else _unknown_path()
        if group_version == AUTHORIZATION_GROUP_VERSION:
            return await self._access_review(request, rest)
        if request.method != "GET":
            return _status(405, "MethodNotAllowed", "the demo cluster is read-only")
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        subresource = "/".join(rest[2:]) or None
        if request.query_params.get("watch") in ("true", "1"):
            return _status(405, "MethodNotAllowed", "the demo cluster serves no watches")
        _, cluster, renderer, faults = self.served.snapshot()
        verb = "list" if name is None else "get"
        api_request = ApiRequest(
            verb=verb,
            resource=f"{resource}/{subresource}" if subresource else resource,
            namespace=namespace,
            name=name,
        )
        fault = faults.next_failure(api_request)
        if fault is not None:
            if fault.kind == "timeout":
                await asyncio.sleep(fault.seconds)
                return _status(504, "Timeout", fault.message)
            return _status(500, "InternalError", fault.message)
        if group_version == METRICS_GROUP_VERSION:
            return self._metrics(cluster, resource, namespace, name)
        found = next(
            (t for t in _types(cluster).get(group_version, []) if t.name == resource), None
        )
        if found is None or (namespace is not None and not found.namespaced):
            return _unknown_path()
        if subresource is not None:
            if found.kind == "Pod" and subresource == "log" and namespace and name:
                return self._log(request, cluster, namespace, name)
            if found.kind == "Node" and subresource == "proxy/stats/summary" and name:
                return self._stats_summary(cluster, name)
            if found.kind == "Node" and subresource.startswith("proxy/logs") and name:
                # The scenarios record no node logs: a kubelet without them answers so too.
                return _status(404, "NotFound", f'the demo cluster keeps no logs of node "{name}"')
            return _unknown_path()
        if name is None:
            return self._list(request, cluster, renderer, found, namespace)
        return self._get(request, cluster, renderer, found, namespace, name)

    def _list(
        self,
        request: Request,
        cluster: Cluster,
        renderer: TableRenderer,
        resource: ResourceType,
        namespace: str | None,
    ) -> Response:
        items = [
            o
            for o in cluster.objects(resource.api_version, resource.kind, namespace)
            if _selected(
                o,
                request.query_params.get("labelSelector", ""),
                request.query_params.get("fieldSelector", ""),
            )
        ]
        if resource.kind == "Event":
            items.sort(key=lambda e: (str(e.get("lastTimestamp", "")), e["metadata"]["name"]))
        if _wants_table(request):
            include = request.query_params.get("includeObject", "Metadata")
            return JSONResponse(renderer.table(resource.kind, items, include))
        return JSONResponse(
            {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": {"resourceVersion": "1"},
                "items": [served_object(o) for o in items],
            }
        )

    def _get(
        self,
        request: Request,
        cluster: Cluster,
        renderer: TableRenderer,
        resource: ResourceType,
        namespace: str | None,
        name: str,
    ) -> Response:
        if resource.namespaced and namespace is None:
            return _unknown_path()
        obj = next(
            (
                o
                for o in cluster.objects(resource.api_version, resource.kind, namespace)
                if o["metadata"]["name"] == name
            ),
            None,
        )
        if obj is None:
            return _not_found(resource, name)
        if _wants_table(request):
            include = request.query_params.get("includeObject", "Metadata")
            return JSONResponse(renderer.table(resource.kind, [obj], include))
        return JSONResponse(served_object(obj))

    def _log(self, request: Request, cluster: Cluster, namespace: str, name: str) -> Response:
        params = request.query_params
        try:
            text = cluster.pod_log(
                namespace,
                name,
                params.get("container") or None,
                params.get("previous") in ("true", "1"),
            )
        except KubeError as e:
            return _status(e.code, e.reason, str(e), name=name, kind="pods")
        tail = params.get("tailLines")
        if tail is not None and tail.lstrip("-").isdigit() and int(tail) >= 0:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[len(lines) - int(tail) :]) if int(tail) else ""
        return PlainTextResponse(text)

    def _metrics(
        self, cluster: Cluster, resource: str, namespace: str | None, name: str | None
    ) -> Response:
        window = {"timestamp": timestamp(cluster.now), "window": "30s"}
        items: list[dict[str, Any]]
        if resource == "nodes" and namespace is None:
            items = [
                {
                    "kind": "NodeMetrics",
                    "apiVersion": METRICS_GROUP_VERSION,
                    "metadata": {"name": node.name, "creationTimestamp": timestamp(cluster.now),
                                 "labels": {"kubernetes.io/hostname": node.name}},
                    **window,
                    "usage": _quantities(node.usage.cpu, node.usage.memory),
                }
                for node in sorted(cluster.state.nodes, key=lambda n: n.name)
                if name in (None, node.name)
            ]  # fmt: skip
            kind = "NodeMetrics"
        elif resource == "pods":
            items = [
                {
                    "kind": "PodMetrics",
                    "apiVersion": METRICS_GROUP_VERSION,
                    "metadata": {"name": pod.name, "namespace": pod.namespace,
                                 "creationTimestamp": timestamp(cluster.now),
                                 "labels": pod.labels},
                    **window,
                    "containers": [
                        {"name": c.name, **{"usage": _quantities(c.usage.cpu, c.usage.memory)}}
                        for c in containers
                        if c.usage is not None
                    ],
                }
                for pod, containers in cluster.pod_usage(namespace)
                if name in (None, pod.name)
            ]  # fmt: skip
            kind = "PodMetrics"
        else:
            return _unknown_path()
        if name is not None:
            if not items:
                return _status(404, "NotFound", f'{resource}.metrics.k8s.io "{name}" not found',
                               name=name, kind=resource)  # fmt: skip
            return JSONResponse(items[0])
        return JSONResponse(
            {
                "kind": f"{kind}List",
                "apiVersion": METRICS_GROUP_VERSION,
                "metadata": {},
                "items": items,
            }
        )

    def _stats_summary(self, cluster: Cluster, name: str) -> Response:
        """The kubelet's ``/stats/summary`` of a node, from the usage the scenario records."""
        node = next((n for n in cluster.state.nodes if n.name == name), None)
        if node is None:
            return _status(404, "NotFound", f'nodes "{name}" not found', name=name, kind="nodes")
        now = timestamp(cluster.now)

        def usage(cpu: str, memory: str) -> dict[str, Any]:
            return {
                "cpu": {"time": now, "usageNanoCores": round(cpu_millicores(cpu) * 1_000_000)},
                "memory": {"time": now, "workingSetBytes": round(memory_bytes(memory))},
            }

        uids = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["uid"]
            for o in cluster.objects("v1", "Pod")
        }
        pods = []
        for pod, containers in cluster.pod_usage():
            if pod.node != name:
                continue
            measured = [(c.name, c.usage) for c in containers if c.usage is not None]
            cpu = sum(cpu_millicores(u.cpu) for _, u in measured)
            memory = sum(memory_bytes(u.memory) for _, u in measured)
            pods.append(
                {
                    "podRef": {
                        "name": pod.name,
                        "namespace": pod.namespace,
                        "uid": uids[(pod.namespace, pod.name)],
                    },
                    "containers": [{"name": n, **usage(u.cpu, u.memory)} for n, u in measured],
                    **usage(f"{cpu}m", f"{memory}"),
                }
            )
        allocatable = memory_bytes(node.allocatable["memory"])
        summary = usage(node.usage.cpu, node.usage.memory)
        summary["memory"]["availableBytes"] = max(
            0, round(allocatable - memory_bytes(node.usage.memory))
        )
        return JSONResponse(
            {"node": {"nodeName": node.name, "startTime": timestamp(node.created), **summary},
             "pods": pods}
        )  # fmt: skip

    async def _access_review(self, request: Request, rest: list[str]) -> Response:
        """Allow every access review: the demo cluster is read-only anyway.

        kubernetes-mcp-server asks before listing across namespaces and silently
        lists one namespace if the answer is anything but "allowed". Its body is
        protobuf, and the answer does not depend on it, so it is not read.
        """
        if rest != ["selfsubjectaccessreviews"] or request.method != "POST":
            return _unknown_path()
        await request.body()
        return JSONResponse(
            {
                "kind": "SelfSubjectAccessReview",
                "apiVersion": AUTHORIZATION_GROUP_VERSION,
                "metadata": {},
                "spec": {},
                "status": {"allowed": True, "reason": "the demo cluster is read-only"},
            },
            status_code=201,
        )

    # ── the evaluation's switch ──

    async def scenario(self, request: Request) -> Response:
        """``GET /scenario`` (which one is served), ``POST`` to serve another."""
        if request.method == "POST":
            try:
                body = await request.json()
                name = body.get("scenario") if isinstance(body, dict) else None
                if not isinstance(name, str):
                    raise ValueError('the body must be {"scenario": NAME}')
                self.served.switch(name)
            except (ValueError, json.JSONDecodeError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
        return JSONResponse({"scenario": self.served.scenario.name})


def _quantities(cpu: str, memory: str) -> dict[str, str]:
    """Usage as the Metrics Server reports it: nanocores and kibibytes."""
    return {
        "cpu": f"{round(cpu_millicores(cpu) * 1_000_000)}n",
        "memory": f"{round(memory_bytes(memory) / 1024)}Ki",
    }


def build_app(scenario: Scenario | ServedScenario, *, switchable: bool = False) -> Starlette:
    """The Kubernetes API of a scenario's cluster, as an ASGI app.

    Args:
        scenario: The scenario to serve (or a :class:`ServedScenario` to share).
        switchable: Also serve ``GET /scenario`` (which one) and ``POST /scenario``
            with ``{"scenario": NAME}`` (serve another one), for evaluations.

    Returns:
        The app; serve it with uvicorn.
    """
    served = scenario if isinstance(scenario, ServedScenario) else ServedScenario(scenario)
    api = KubeApi(served)
    routes = [
        Route("/version", api.version, methods=["GET"]),
        Route("/api", api.core_versions, methods=["GET"]),
        Route("/apis", api.groups, methods=["GET"]),
        Route("/api/{path:path}", api.core, methods=["GET", "POST"]),
        Route("/apis/{path:path}", api.grouped, methods=["GET", "POST"]),
    ]
    if switchable:
        routes.append(Route("/scenario", api.scenario, methods=["GET", "POST"]))
    return Starlette(routes=routes)


def kubeconfig(server_url: str, cluster_name: str) -> dict[str, Any]:
    """A kubeconfig for the served cluster (plain HTTP on loopback: no credentials)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server_url}}],
        "users": [{"name": "demo-viewer", "user": {}}],
        "contexts": [
            {
                "name": cluster_name,
                "context": {"cluster": cluster_name, "user": "demo-viewer", "namespace": "default"},
            }
        ],
        "current-context": cluster_name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server_url: str, cluster_name: str) -> Path:
    """Write :func:`kubeconfig` to ``path`` (mode 600, as kubectl keeps them); return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(server_url, cluster_name), sort_keys=False))
    path.chmod(0o600)
    return path


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that writes the kubeconfig and says where it is, once bound."""

    def __init__(self, config: uvicorn.Config, on_bound: Callable[[str], None]) -> None:
        super().__init__(config)
        self._on_bound = on_bound

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        port = self.config.port
        for listener in self.servers:
            for sock in listener.sockets:
                port = sock.getsockname()[1]
        host = self.config.host
        self._on_bound(f"http://{f'[{host}]' if ':' in host else host}:{port}")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a scenario's cluster over the Kubernetes API (``tarsy-demo-cluster``)."""
    parser = argparse.ArgumentParser(
        prog="tarsy-demo-cluster",
        description="Serve a simulated Kubernetes cluster, with a scripted incident, over the "
        "Kubernetes API on loopback, and write a kubeconfig for kubectl and "
        "kubernetes-mcp-server.",
    )
    parser.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        choices=scenario_names(),
        help=f"the incident to simulate (default: {DEFAULT_SCENARIO})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=DEFAULT_KUBECONFIG,
        help=f"where to write the kubeconfig (default: {DEFAULT_KUBECONFIG})",
    )
    parser.add_argument(
        "--switchable",
        action="store_true",
        help='POST /scenario {"scenario": NAME} serves another scenario (evaluations); '
        "GET /scenario says which is served",
    )
    parser.add_argument(
        "--live-clock",
        action="store_true",
        help="move the scenario to now and count ages on the real clock, as kubectl does "
        "for describe and events (a cluster a person looks at)",
    )
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    app = build_app(
        ServedScenario(scenario, live_clock=args.live_clock), switchable=args.switchable
    )
    path: Path = args.kubeconfig.resolve()

    def bound(url: str) -> None:
        write_kubeconfig(path, url, scenario.cluster.name)
        print(
            f"demo cluster (scenario {scenario.name}) serving the Kubernetes API on {url}\n"
            f"kubeconfig: {path}\n"
            f"try: kubectl --kubeconfig {path} get pods -A",
            flush=True,
        )

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    try:
        asyncio.run(_AnnouncingServer(config, bound).serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

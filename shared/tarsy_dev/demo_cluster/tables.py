"""The ``meta.k8s.io/v1`` Table form of objects, with the columns the API server prints.

Real clients list with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and print whatever columns the server sends: without them ``kubectl get`` shows
only names and ages, and kubernetes-mcp-server's list tools answer an empty
text. The columns here follow the API server's own printers (priority 1: shown
only with ``-o wide``, which kubernetes-mcp-server always uses); ages count from
the cluster's clock, as the server computes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tarsy_dev.demo_cluster.cluster import Cluster, human_duration, utc
from tarsy_dev.demo_cluster.models import Manifest

Cell = str | int


@dataclass(frozen=True)
class Column:
    """One column: its header, the cell it shows for an object, and whether only wide shows it."""

    name: str
    cell: Callable[[Manifest], Cell]
    wide: bool = False
    type: str = "string"

    def definition(self) -> dict[str, Any]:
        """The column's ``TableColumnDefinition``."""
        return {
            "name": self.name,
            "type": self.type,
            "format": "name" if self.name == "Name" else "",
            "description": "",
            "priority": 1 if self.wide else 0,
        }


def served_object(obj: Manifest) -> Manifest:
    """What the API answers for an object: Secrets without their data (metadata only)."""
    if obj.get("kind") != "Secret":
        return obj
    return {k: v for k, v in obj.items() if k not in ("data", "stringData")}


def _status(o: Manifest) -> dict[str, Any]:
    status = o.get("status")
    return status if isinstance(status, dict) else {}


def _spec(o: Manifest) -> dict[str, Any]:
    spec = o.get("spec")
    return spec if isinstance(spec, dict) else {}


def _name(o: Manifest) -> str:
    return str(o["metadata"]["name"])


def _template_containers(o: Manifest) -> list[dict[str, Any]]:
    template = _spec(o).get("template") or {}
    return list((template.get("spec") or {}).get("containers") or [])


def _containers(o: Manifest) -> str:
    return ",".join(str(c.get("name", "")) for c in _template_containers(o))


def _images(o: Manifest) -> str:
    return ",".join(str(c.get("image", "")) for c in _template_containers(o))


def _selector(o: Manifest) -> str:
    selector = _spec(o).get("selector") or {}
    labels = selector.get("matchLabels", selector) if isinstance(selector, dict) else {}
    text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if isinstance(v, str))
    return text or "<none>"


def _ready_condition(o: Manifest) -> str:
    for condition in _status(o).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status", "Unknown"))
    return "Unknown"


def _count(o: Manifest, key: str) -> int:
    value = _status(o).get(key, 0)
    return int(value) if isinstance(value, int) else 0


def _counter(key: str) -> Callable[[Manifest], Cell]:
    return lambda o: _count(o, key)


class TableRenderer:
    """Renders objects of the cluster as the API server's Table form."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _age(self, o: Manifest) -> str:
        return self.cluster.age(o["metadata"].get("creationTimestamp"))

    def columns(self, kind: str) -> list[Column]:
        """The columns of ``kind`` (Name and Age for kinds without printers of their own)."""
        age = Column("Age", self._age)
        by_kind: dict[str, list[Column]] = {
            "Pod": [
                Column("Name", _name),
                Column("Ready", self._pod_ready),
                Column("Status", self._pod_status),
                Column("Restarts", self._pod_restarts),
                age,
                Column("IP", lambda o: str(_status(o).get("podIP", "<none>")), wide=True),
                Column("Node", lambda o: str(_spec(o).get("nodeName", "<none>")), wide=True),
                Column("Nominated Node", lambda o: "<none>", wide=True),
                Column("Readiness Gates", lambda o: "<none>", wide=True),
            ],
            "Event": [
                Column("Last Seen", self._event_last_seen),
                Column("Type", lambda o: str(o.get("type", ""))),
                Column("Reason", lambda o: str(o.get("reason", ""))),
                Column("Object", self._event_object),
                Column("Subobject", lambda o: str(o["involvedObject"].get("fieldPath", "")), True),
                Column("Source", self._event_source, wide=True),
                Column("Message", lambda o: str(o.get("message", ""))),
                Column("First Seen", lambda o: self.cluster.age(o.get("firstTimestamp")), True),
                Column("Count", lambda o: int(o.get("count", 1)), wide=True, type="integer"),
                Column("Name", _name, wide=True),
            ],
            "Node": [
                Column("Name", _name),
                Column("Status", self._node_status),
                Column("Roles", self._node_roles),
                age,
                Column("Version", lambda o: str(_status(o)["nodeInfo"]["kubeletVersion"])),
                Column("Internal-IP", lambda o: self._node_address(o, "InternalIP"), wide=True),
                Column("External-IP", lambda o: self._node_address(o, "ExternalIP"), wide=True),
                Column("OS-Image", lambda o: str(_status(o)["nodeInfo"]["osImage"]), wide=True),
                Column(
                    "Kernel-Version",
                    lambda o: str(_status(o)["nodeInfo"]["kernelVersion"]),
                    wide=True,
                ),
                Column(
                    "Container-Runtime",
                    lambda o: str(_status(o)["nodeInfo"]["containerRuntimeVersion"]),
                    wide=True,
                ),
            ],
            "Namespace": [
                Column("Name", _name),
                Column("Status", lambda o: str(_status(o).get("phase", "Active"))),
                age,
            ],
            "Deployment": [
                Column("Name", _name),
                Column(
                    "Ready",
                    lambda o: f"{_count(o, 'readyReplicas')}/{_spec(o).get('replicas', 1)}",
                ),
                Column("Up-to-date", lambda o: _count(o, "updatedReplicas"), type="integer"),
                Column("Available", lambda o: _count(o, "availableReplicas"), type="integer"),
                age,
                Column("Containers", _containers, wide=True),
                Column("Images", _images, wide=True),
                Column("Selector", _selector, wide=True),
            ],
            "ReplicaSet": [
                Column("Name", _name),
                Column("Desired", lambda o: int(_spec(o).get("replicas", 1)), type="integer"),
                Column("Current", lambda o: _count(o, "replicas"), type="integer"),
                Column("Ready", lambda o: _count(o, "readyReplicas"), type="integer"),
                age,
                Column("Containers", _containers, wide=True),
                Column("Images", _images, wide=True),
                Column("Selector", _selector, wide=True),
            ],
            "StatefulSet": [
                Column("Name", _name),
                Column(
                    "Ready",
                    lambda o: f"{_count(o, 'readyReplicas')}/{_spec(o).get('replicas', 1)}",
                ),
                age,
                Column("Containers", _containers, wide=True),
                Column("Images", _images, wide=True),
            ],
            "DaemonSet": [
                Column("Name", _name),
                *(
                    Column(header, _counter(key), type="integer")
                    for header, key in (
                        ("Desired", "desiredNumberScheduled"),
                        ("Current", "currentNumberScheduled"),
                        ("Ready", "numberReady"),
                        ("Up-to-date", "updatedNumberScheduled"),
                        ("Available", "numberAvailable"),
                    )
                ),
                Column("Node Selector", self._node_selector),
                age,
                Column("Containers", _containers, wide=True),
                Column("Images", _images, wide=True),
                Column("Selector", _selector, wide=True),
            ],
            "Job": [
                Column("Name", _name),
                Column("Status", self._job_status),
                Column(
                    "Completions",
                    lambda o: f"{_count(o, 'succeeded')}/{_spec(o).get('completions', 1)}",
                ),
                Column("Duration", self._job_duration),
                age,
                Column("Containers", _containers, wide=True),
                Column("Images", _images, wide=True),
            ],
            "CronJob": [
                Column("Name", _name),
                Column("Schedule", lambda o: str(_spec(o).get("schedule", ""))),
                Column("Timezone", lambda o: str(_spec(o).get("timeZone", "<none>"))),
                Column("Suspend", lambda o: str(bool(_spec(o).get("suspend", False)))),
                Column("Active", lambda o: len(_status(o).get("active") or []), type="integer"),
                Column(
                    "Last Schedule", lambda o: self.cluster.age(_status(o).get("lastScheduleTime"))
                ),
                age,
            ],
            "Service": [
                Column("Name", _name),
                Column("Type", lambda o: str(_spec(o).get("type", "ClusterIP"))),
                Column("Cluster-IP", lambda o: str(_spec(o).get("clusterIP", "None"))),
                Column("External-IP", self._service_external_ip),
                Column("Port(s)", self._service_ports),
                age,
                Column("Selector", _selector, wide=True),
            ],
            "ConfigMap": [
                Column("Name", _name),
                Column("Data", lambda o: len(o.get("data") or {}), type="integer"),
                age,
            ],
            "Secret": [
                Column("Name", _name),
                Column("Type", lambda o: str(o.get("type", "Opaque"))),
                Column("Data", lambda o: len(o.get("data") or {}), type="integer"),
                age,
            ],
            "Ingress": [
                Column("Name", _name),
                Column("Class", lambda o: str(_spec(o).get("ingressClassName", "<none>"))),
                Column("Hosts", self._ingress_hosts),
                Column("Address", self._load_balancer_ips),
                Column("Ports", lambda o: "80, 443" if _spec(o).get("tls") else "80"),
                age,
            ],
            "IngressClass": [
                Column("Name", _name),
                Column("Controller", lambda o: str(_spec(o).get("controller", ""))),
                Column("Parameters", lambda o: "<none>"),
                age,
            ],
            "Certificate": [
                Column("Name", _name),
                Column("Ready", _ready_condition),
                Column("Secret", lambda o: str(_spec(o).get("secretName", ""))),
                age,
            ],
            "CertificateRequest": [
                Column("Name", _name),
                Column("Ready", _ready_condition),
                Column("Issuer", lambda o: str((_spec(o).get("issuerRef") or {}).get("name", ""))),
                age,
            ],
            "ClusterIssuer": [Column("Name", _name), Column("Ready", _ready_condition), age],
            "Issuer": [Column("Name", _name), Column("Ready", _ready_condition), age],
            "Order": [
                Column("Name", _name),
                Column("State", lambda o: str(_status(o).get("state", ""))),
                age,
            ],
            "Challenge": [
                Column("Name", _name),
                Column("State", lambda o: str(_status(o).get("state", ""))),
                Column("Domain", lambda o: str(_spec(o).get("dnsName", ""))),
                age,
            ],
        }
        return by_kind.get(kind, [Column("Name", _name), age])

    def table(
        self, kind: str, items: Sequence[Manifest], include_object: str = "Metadata"
    ) -> dict[str, Any]:
        """The ``Table`` of ``items``, each row with its object as ``includeObject`` asks."""
        columns = self.columns(kind)
        rows = []
        for item in items:
            row: dict[str, Any] = {"cells": [column.cell(item) for column in columns]}
            if include_object == "Object":
                row["object"] = served_object(item)
            elif include_object != "None":
                row["object"] = {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": item["metadata"],
                }
            rows.append(row)
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "1"},
            "columnDefinitions": [column.definition() for column in columns],
            "rows": rows,
        }

    # ── cells that need more than a lookup ──

    def _pod_ready(self, o: Manifest) -> str:
        statuses = _status(o).get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        return f"{ready}/{len(_spec(o).get('containers') or [])}"

    def _pod_status(self, o: Manifest) -> str:
        status = _status(o)
        reason = str(status.get("reason") or status.get("phase", "Unknown"))
        for container in status.get("containerStatuses") or []:
            state = container.get("state") or {}
            if "waiting" in state and state["waiting"].get("reason"):
                return str(state["waiting"]["reason"])
            if "terminated" in state:
                terminated = state["terminated"]
                return str(terminated.get("reason") or f"ExitCode:{terminated.get('exitCode', 0)}")
        return reason

    def _pod_restarts(self, o: Manifest) -> str:
        statuses = _status(o).get("containerStatuses") or []
        restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
        finished = [
            c["lastState"]["terminated"]["finishedAt"]
            for c in statuses
            if "finishedAt" in ((c.get("lastState") or {}).get("terminated") or {})
        ]
        if finished and restarts:
            return f"{restarts} ({self.cluster.age(max(finished))} ago)"
        return str(restarts)

    def _event_last_seen(self, o: Manifest) -> str:
        return self.cluster.age(o.get("lastTimestamp"))

    def _event_object(self, o: Manifest) -> str:
        involved = o["involvedObject"]
        return f"{str(involved['kind']).lower()}/{involved['name']}"

    def _event_source(self, o: Manifest) -> str:
        source = o.get("source") or {}
        parts = [str(source.get("component", ""))]
        if source.get("host"):
            parts.append(str(source["host"]))
        return ", ".join(p for p in parts if p)

    def _node_status(self, o: Manifest) -> str:
        status = "Ready" if _ready_condition(o) == "True" else "NotReady"
        return status + (",SchedulingDisabled" if _spec(o).get("unschedulable") else "")

    def _node_roles(self, o: Manifest) -> str:
        labels = o["metadata"].get("labels") or {}
        roles = sorted(
            key.rpartition("/")[2] for key in labels if key.startswith("node-role.kubernetes.io/")
        )
        return ",".join(roles) or "<none>"

    def _node_address(self, o: Manifest, kind: str) -> str:
        for address in _status(o).get("addresses") or []:
            if address.get("type") == kind:
                return str(address.get("address", ""))
        return "<none>"

    def _node_selector(self, o: Manifest) -> str:
        template = _spec(o).get("template") or {}
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"

    def _job_status(self, o: Manifest) -> str:
        conditions = {c["type"]: c["status"] for c in _status(o).get("conditions") or []}
        if conditions.get("Complete") == "True":
            return "Complete"
        if conditions.get("Failed") == "True":
            return "Failed"
        return "Running"

    def _job_duration(self, o: Manifest) -> str:
        start = _status(o).get("startTime")
        if not start:
            return ""
        end = _status(o).get("completionTime")
        stop = datetime.fromisoformat(end) if end else self.cluster.now
        return human_duration(utc(stop) - utc(datetime.fromisoformat(start)))

    def _service_external_ip(self, o: Manifest) -> str:
        ips = self._load_balancer_ips(o)
        if ips:
            return ips
        return "<pending>" if _spec(o).get("type") == "LoadBalancer" else "<none>"

    def _load_balancer_ips(self, o: Manifest) -> str:
        ingress = (_status(o).get("loadBalancer") or {}).get("ingress") or []
        return ",".join(str(i.get("ip") or i.get("hostname") or "") for i in ingress)

    def _service_ports(self, o: Manifest) -> str:
        ports = [
            f"{p['port']}"
            + (f":{p['nodePort']}" if p.get("nodePort") else "")
            + f"/{p.get('protocol', 'TCP')}"
            for p in _spec(o).get("ports") or []
        ]
        return ",".join(ports) or "<none>"

    def _ingress_hosts(self, o: Manifest) -> str:
        rules = _spec(o).get("rules") or []
        return ",".join(str(r.get("host", "*")) for r in rules) or "*"

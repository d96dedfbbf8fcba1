"""The scenario format: an alert, the cluster state behind it, and how to investigate it.

Scenario files (``scenarios/<name>.yaml``) describe pods, nodes and events compactly;
:mod:`tarsy_dev.demo_cluster.cluster` turns them into Kubernetes manifests. Any other
object (Deployments, ConfigMaps, Secrets, custom resources...) is given as the manifest
itself under ``objects``. Field names are camelCase in the files, as in Kubernetes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from tarsy.models import AlertSubmission
from tarsy_dev.demo_cluster.facts import Finding, Fix, Forbidden
from tarsy_dev.demo_cluster.faults import Fault
from tarsy_dev.demo_cluster.metrics import ScenarioMetrics

Manifest = dict[str, Any]

# The tools kubernetes-mcp-server 0.0.66 lists with --read-only --toolsets core (the
# local stack's flags): what playbooks, tool needs and the scripted models may call.
TOOL_NAMES: tuple[str, ...] = (
    "events_list",
    "namespaces_list",
    "nodes_log",
    "nodes_stats_summary",
    "nodes_top",
    "pods_get",
    "pods_list",
    "pods_list_in_namespace",
    "pods_log",
    "pods_top",
    "projects_list",
    "resources_get",
    "resources_list",
)

# The tools prometheus-mcp-server 1.6.2 lists (the local stack's "prometheus" server, on
# the scenario's metrics history): what playbooks of scenarios with metrics may call.
PROMETHEUS_TOOL_NAMES: tuple[str, ...] = (
    "execute_query",
    "execute_range_query",
    "get_metric_metadata",
    "get_targets",
    "health_check",
    "list_metrics",
)

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Node",
        "Namespace",
        "PersistentVolume",
        "StorageClass",
        "IngressClass",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterIssuer",
        "CustomResourceDefinition",
    }
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class Usage(_Model):
    """Resource usage as ``kubectl top`` reports it (quantities: ``250m``, ``1.5``, ``300Mi``)."""

    cpu: str
    memory: str


class Container(_Model):
    """A container: its spec, its status, what it logged and what it uses."""

    name: str
    image: str
    image_id: str | None = Field(default=None, alias="imageID")
    command: list[str] | None = None
    args: list[str] | None = None
    ports: list[dict[str, Any]] = Field(default_factory=list)
    env: list[dict[str, Any]] = Field(default_factory=list)
    env_from: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, Any] = Field(default_factory=dict)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    liveness_probe: dict[str, Any] | None = None
    readiness_probe: dict[str, Any] | None = None
    state: dict[str, Any] | None = Field(
        default=None,
        description="A Kubernetes ContainerState; default: running since the pod started.",
    )
    last_state: dict[str, Any] = Field(default_factory=dict)
    ready: bool | None = Field(default=None, description="Default: whether it is running.")
    restart_count: int = 0
    logs: str = ""
    previous_logs: str | None = None
    usage: Usage | None = None

    @field_validator("state", "last_state")
    @classmethod
    def _one_state(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value and (
            len(value) != 1 or next(iter(value)) not in ("running", "waiting", "terminated")
        ):
            raise ValueError("a container state has exactly one of running, waiting, terminated")
        return value


class OwnerRef(_Model):
    """The controller of a pod."""

    kind: str
    name: str
    api_version: str = "apps/v1"


class Pod(_Model):
    """A pod, compactly: containers carry both spec and status."""

    name: str
    namespace: str
    node: str | None = None
    created: datetime
    started: datetime | None = Field(default=None, description="Default: created + 1s.")
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] = "Running"
    pod_ip: str | None = Field(default=None, alias="podIP")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner: OwnerRef | None = None
    service_account: str = "default"
    priority_class_name: str | None = None
    restart_policy: str = "Always"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    containers: list[Container] = Field(min_length=1)
    conditions: list[dict[str, Any]] | None = Field(default=None, description="Default: derived.")
    message: str | None = None
    reason: str | None = None


class Node(_Model):
    """A node, compactly."""

    name: str
    created: datetime
    labels: dict[str, str] = Field(default_factory=dict)
    roles: list[str] = Field(default_factory=list)
    internal_ip: str = Field(alias="internalIP")
    pod_cidr: str | None = Field(default=None, alias="podCIDR")
    capacity: dict[str, str]
    allocatable: dict[str, str]
    ready: bool = True
    pressure: list[Literal["MemoryPressure", "DiskPressure", "PIDPressure"]] = Field(
        default_factory=list
    )
    unschedulable: bool = False
    taints: list[dict[str, Any]] = Field(default_factory=list)
    kubelet_version: str = "v1.30.5-gke.1014001"
    os_image: str = "Container-Optimized OS from Google"
    kernel_version: str = "6.1.100+"
    container_runtime_version: str = "containerd://1.7.22"
    usage: Usage

    @field_validator("capacity", "allocatable")
    @classmethod
    def _has_cpu_and_memory(cls, value: dict[str, str]) -> dict[str, str]:
        if "cpu" not in value or "memory" not in value:
            raise ValueError("needs cpu and memory")
        return value


class Namespace(_Model):
    """A namespace."""

    name: str
    created: datetime
    labels: dict[str, str] = Field(default_factory=dict)


class Event(_Model):
    """A core/v1 Event; ``object`` is ``Kind/name`` in the event's namespace."""

    namespace: str
    type: Literal["Normal", "Warning"] = "Normal"
    reason: str
    object: str = Field(pattern=r"^[A-Za-z]+/[a-z0-9][a-z0-9.\-]*$")
    message: str
    count: int = Field(default=1, ge=1)
    first_seen: datetime | None = Field(default=None, description="Default: last_seen.")
    last_seen: datetime
    source: str = "kubelet"
    host: str | None = None


class ClusterState(_Model):
    """Everything the demo cluster serves."""

    name: str
    now: datetime = Field(description="The cluster's clock: ages and 'last seen' count from it.")
    namespaces: list[Namespace]
    nodes: list[Node] = Field(min_length=1)
    pods: list[Pod] = Field(default_factory=list)
    objects: list[Manifest] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)

    @field_validator("objects")
    @classmethod
    def _manifests(cls, objects: list[Manifest]) -> list[Manifest]:
        for obj in objects:
            metadata = obj.get("metadata")
            if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
                raise ValueError(f"an object needs apiVersion and kind: {obj!r:.200}")
            if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
                raise ValueError(f"an object needs metadata.name: {obj!r:.200}")
            namespaced = obj["kind"] not in CLUSTER_SCOPED_KINDS
            if namespaced != isinstance(metadata.get("namespace"), str):
                raise ValueError(
                    f"{obj['kind']}/{metadata['name']}: metadata.namespace is "
                    + ("required" if namespaced else "not allowed")
                )
        return objects

    @model_validator(mode="after")
    def _consistent(self) -> ClusterState:
        namespaces = {ns.name for ns in self.namespaces}
        nodes = {node.name for node in self.nodes}
        keys: set[tuple[str, str, str]] = set()
        for pod in self.pods:
            if pod.namespace not in namespaces:
                raise ValueError(f"pod {pod.name}: no namespace {pod.namespace!r}")
            if pod.node is not None and pod.node not in nodes:
                raise ValueError(f"pod {pod.name}: no node {pod.node!r}")
            if ("Pod", pod.namespace, pod.name) in keys:
                raise ValueError(f"pod {pod.namespace}/{pod.name} is defined twice")
            keys.add(("Pod", pod.namespace, pod.name))
        for obj in self.objects:
            namespace = obj["metadata"].get("namespace", "")
            if namespace and namespace not in namespaces:
                raise ValueError(
                    f"{obj['kind']}/{obj['metadata']['name']}: no namespace {namespace!r}"
                )
            key = (obj["kind"], namespace, obj["metadata"]["name"])
            if key in keys:
                raise ValueError(f"{key[0]} {key[1]}/{key[2]} is defined twice")
            keys.add(key)
        for event in self.events:
            if event.namespace not in namespaces:
                raise ValueError(f"event {event.reason}: no namespace {event.namespace!r}")
        return self


class ToolCallPattern(_Model):
    """A kind of tool call: the tool, and argument values it must have (a subset)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"tool": value} if isinstance(value, str) else value

    @field_validator("tool")
    @classmethod
    def _known_tool(cls, value: str) -> str:
        return _known_tool(value)

    def matches(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether a call of ``tool`` with ``arguments`` is of this kind (strings: any case)."""
        if tool != self.tool:
            return False
        for key, wanted in self.arguments.items():
            given = arguments.get(key)
            if isinstance(wanted, str) and isinstance(given, str):
                if given.strip().lower() != wanted.strip().lower():
                    return False
            elif given != wanted:
                return False
        return True


class ToolNeed(_Model):
    """Evidence a good investigation must fetch: one successful call of any of these kinds."""

    need: str = Field(min_length=1, description="What the call shows, in words (for the report).")
    any_of: list[ToolCallPattern] = Field(min_length=1)


class Expected(_Model):
    """What a correct investigation concludes, and how it gets there (for the evaluation suite)."""

    summary: str = Field(min_length=1)
    findings: list[Finding] = Field(
        min_length=1, description="Entities and causes a correct analysis states."
    )
    forbidden: list[Forbidden] = Field(
        min_length=1,
        description="Wrong conclusions; the first is the one the scripted sloppy model draws.",
    )
    tools: list[ToolNeed] = Field(
        min_length=1, description="The evidence a good investigation must fetch."
    )
    fix: list[Fix] = Field(
        default_factory=list,
        description="The remedy a reviewer accepts; with two causes, one part per cause, all "
        "needed. Scored apart from pass or fail. A single mapping is one part.",
    )

    @field_validator("fix", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


class PlaybookStep(_Model):
    """One tool call an investigator makes, and what its output shows."""

    thought: str = ""
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    expect: list[str] = Field(
        default_factory=list, description="Substrings of the tool's output this step relies on."
    )
    fails: bool = Field(
        default=False, description="This call meets one of the scenario's faults (an error)."
    )

    @field_validator("tool")
    @classmethod
    def _known_tool(cls, value: str) -> str:
        return _known_tool(value)


class Playbook(_Model):
    """An investigation, scripted: the tool calls in order, then the final analysis."""

    steps: list[PlaybookStep] = Field(min_length=1)
    analysis: str = Field(min_length=1)


Difficulty = Literal["easy", "medium", "hard"]


class Scenario(_Model):
    """One incident: the alert, the cluster behind it, the expected facts, a playbook."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    title: str
    description: str
    difficulty: Difficulty = "easy"
    tags: list[str] = Field(
        default_factory=list, description="The diagnostic challenge (red-herring, events-only...)."
    )
    alert: AlertSubmission
    cluster: ClusterState
    faults: list[Fault] = Field(
        default_factory=list, description="API requests that fail, to test how investigations cope."
    )
    metrics: ScenarioMetrics | None = Field(
        default=None,
        description="The metrics history a Prometheus holds (tarsy_dev.demo_cluster.metrics).",
    )
    expected: Expected
    playbook: Playbook

    def is_relevant_call(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether a call fetches evidence about this incident.

        Relevant: a call that meets one of the expected tool needs, or one the playbook
        makes (with the same arguments; a playbook call without a namespace lists all
        namespaces, which a namespaced call does not).
        """
        if any(p.matches(tool, arguments) for need in self.expected.tools for p in need.any_of):
            return True
        given = {k: v for k, v in arguments.items() if v is not None}
        return any(
            step.tool == tool
            and ToolCallPattern(tool=tool, arguments=step.arguments).matches(tool, given)
            and set(given) <= set(step.arguments)
            for step in self.playbook.steps
        )

    @model_validator(mode="after")
    def _analysis_is_right(self) -> Scenario:
        analysis = self.playbook.analysis
        missing = [f.fact for f in self.expected.findings if f.found_in(analysis) is None]
        if missing:
            raise ValueError(f"the playbook analysis misses expected findings {missing}")
        wrong = [f.claim for f in self.expected.forbidden if f.found_in(analysis) is not None]
        if wrong:
            raise ValueError(f"the playbook analysis draws forbidden conclusions {wrong}")
        unmatched = [f.claim for f in self.expected.forbidden if f.found_in(f.claim) is None]
        if unmatched:
            raise ValueError(f"forbidden claims that their own patterns miss: {unmatched}")
        unproposed = [f.accept for f in self.expected.fix if f.found_in(f.accept) is None]
        if unproposed:
            raise ValueError(f"fixes whose own patterns miss them: {unproposed}")
        uses_metrics = any(step.tool in PROMETHEUS_TOOL_NAMES for step in self.playbook.steps)
        if uses_metrics and self.metrics is None:
            raise ValueError("the playbook queries Prometheus, but the scenario has no metrics")
        for need in self.expected.tools:
            if not any(
                pattern.matches(step.tool, step.arguments) and not step.fails
                for step in self.playbook.steps
                for pattern in need.any_of
            ):
                raise ValueError(f"no playbook step fetches {need.need!r}")
        return self


def _known_tool(value: str) -> str:
    if value not in TOOL_NAMES and value not in PROMETHEUS_TOOL_NAMES:
        known = ", ".join((*TOOL_NAMES, *PROMETHEUS_TOOL_NAMES))
        raise ValueError(f"unknown tool {value!r}; tools: {known}")
    return value

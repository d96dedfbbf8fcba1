"""What the gather phase saw of the cluster, parsed: the input of every detection.

Design constraint: detections are pure functions of a :class:`Snapshot`, so
they are tested on clusters built inside the tests, never on a live server.
The collectors (:mod:`tarsy.evidence.gather`) fill a snapshot from tool
results; nothing here knows which tool produced what beyond the ``source``
each item carries, the id of the gathered call it rests on (a detection
points at its evidence with it).

Kubernetes objects are kept as the API serves them (``dict`` bodies in the
API's own shape, ``metadata``/``spec``/``status``), so a fixture is written
exactly as ``kubectl get -o yaml`` would print it. Events, logs and usage
figures, which the tools print in their own formats, are normalized into
small models.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.models import Severity


class ObjectRef(DeferredModel):
    """A Kubernetes object by kind, namespace (empty for cluster-scoped) and name."""

    model_config = ConfigDict(frozen=True)

    kind: str
    name: str
    namespace: str = ""

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class KubeObject(DeferredModel):
    """One object as the API served it, and the gathered call it came from."""

    kind: str
    body: dict[str, Any]
    source: str = Field(description="the id of the gathered call that returned it")

    @property
    def metadata(self) -> dict[str, Any]:
        """The object's ``metadata`` (empty when absent)."""
        value = self.body.get("metadata")
        return value if isinstance(value, dict) else {}

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` ("" for cluster-scoped objects)."""
        return str(self.metadata.get("namespace", "") or "")

    @property
    def ref(self) -> ObjectRef:
        """This object's reference."""
        return ObjectRef(kind=self.kind, name=self.name, namespace=self.namespace)

    @property
    def spec(self) -> dict[str, Any]:
        """The object's ``spec`` (empty when absent)."""
        value = self.body.get("spec")
        return value if isinstance(value, dict) else {}

    @property
    def status(self) -> dict[str, Any]:
        """The object's ``status`` (empty when absent)."""
        value = self.body.get("status")
        return value if isinstance(value, dict) else {}


class KubeEvent(DeferredModel):
    """One Kubernetes event, as ``events_list`` prints it, normalized."""

    namespace: str = ""
    object: ObjectRef
    type: str = "Normal"
    reason: str = ""
    message: str = ""
    count: int = 1
    last_seen: datetime | None = None
    source: str


class PodLog(DeferredModel):
    """The tail of one container's log (``previous``: its last terminated run)."""

    namespace: str
    pod: str
    container: str = ""
    previous: bool = False
    text: str
    source: str


class Usage(DeferredModel):
    """A pod's or node's current CPU and memory, from the metrics API (``*_top``)."""

    ref: ObjectRef
    cpu_millicores: float | None = None
    memory_bytes: float | None = None
    source: str


class ListedRow(DeferredModel):
    """One row of a list tool's table (``resources_list``, ``pods_list_in_namespace``).

    ``columns`` maps the table's header (``READY``, ``STATUS``, ``RESTARTS``,
    ``LABELS``, ...) to the cell's text. A row says an object exists before
    its full body is fetched.
    """

    kind: str
    api_version: str = ""
    namespace: str = ""
    name: str
    columns: dict[str, str] = Field(default_factory=dict)
    source: str

    @property
    def ref(self) -> ObjectRef:
        """The listed object's reference."""
        return ObjectRef(kind=self.kind, name=self.name, namespace=self.namespace)

    @property
    def labels(self) -> dict[str, str]:
        """The ``LABELS`` column as a mapping (empty when not shown)."""
        text = self.columns.get("LABELS", "")
        pairs = (item.partition("=") for item in text.split(",") if "=" in item)
        return {key: value for key, _, value in pairs}


class AlertFacts(DeferredModel):
    """What the alert itself says: its name, labels, annotations, when it started, its rule.

    ``expression`` is the PromQL of the rule that fired, when the alert carries
    it (an ``expr`` field, or the ``g0.expr`` of Prometheus' generator URL).
    """

    name: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime | None = None
    expression: str = ""


class MetricSeries(DeferredModel):
    """One series of a metric query's answer, and what the query measures.

    ``measures`` is the collector call's word for the query (``alert``,
    ``alert_by``, ``memory_working_set``, ... : :data:`tarsy.evidence.catalog.MEASURES`),
    so a detection reads what a series means without reading its PromQL;
    ``points`` are (unix seconds, value), oldest first.
    """

    measures: str
    query: str
    labels: dict[str, str] = Field(default_factory=dict)
    points: list[tuple[float, float]] = Field(default_factory=list)
    source: str

    @property
    def last(self) -> float | None:
        """The newest value, if any."""
        return self.points[-1][1] if self.points else None

    def label_text(self) -> str:
        """The series' labels as ``a=x, b=y`` (its metric name when it has no other)."""
        shown = {k: v for k, v in self.labels.items() if k != "__name__"}
        return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or self.labels.get(
            "__name__", "{}"
        )


class Snapshot(DeferredModel):
    """Everything gathered for one alert: objects by kind, events, logs, usage, metric series.

    ``rows`` are objects seen in list tables (possibly not fetched in full);
    ``absent`` the objects looked up by name that do not exist; ``errors``
    maps a gathered call's id to the error it returned, so a detection can
    tell "not there" from "could not look".
    """

    alert: AlertFacts = Field(default_factory=AlertFacts)
    objects: list[KubeObject] = Field(default_factory=list)
    events: list[KubeEvent] = Field(default_factory=list)
    logs: list[PodLog] = Field(default_factory=list)
    usage: list[Usage] = Field(default_factory=list)
    rows: list[ListedRow] = Field(default_factory=list)
    series: list[MetricSeries] = Field(default_factory=list)
    # Objects looked up by name that the API server said do not exist (NotFound).
    absent: list[ObjectRef] = Field(default_factory=list)
    errors: dict[str, str] = Field(default_factory=dict)

    def of_kind(self, kind: str) -> Iterator[KubeObject]:
        """The objects of ``kind`` (e.g. ``Pod``), in the order gathered."""
        return (o for o in self.objects if o.kind == kind)

    def get(self, kind: str, name: str, namespace: str = "") -> KubeObject | None:
        """The object of ``kind`` named ``name`` (in ``namespace`` when namespaced)."""
        for obj in self.objects:
            if obj.kind == kind and obj.name == name and obj.namespace == namespace:
                return obj
        return None

    def events_of(self, ref: ObjectRef) -> list[KubeEvent]:
        """The events about ``ref``, newest first."""
        found = [e for e in self.events if e.object.kind == ref.kind and e.object.name == ref.name]
        if ref.namespace:
            found = [e for e in found if (e.namespace or e.object.namespace) == ref.namespace]
        return sorted(found, key=_seen, reverse=True)

    def series_of(self, measures: str) -> list[MetricSeries]:
        """The metric series whose query measures ``measures``, in the order gathered."""
        return [s for s in self.series if s.measures == measures]

    def logs_of(self, namespace: str, pod: str) -> list[PodLog]:
        """The gathered logs of pod ``namespace/pod`` (previous runs first)."""
        found = [log for log in self.logs if log.namespace == namespace and log.pod == pod]
        return sorted(found, key=lambda log: not log.previous)


def _seen(event: KubeEvent) -> float:
    return event.last_seen.timestamp() if event.last_seen is not None else 0.0


class Detection(DeferredModel):
    """One finding of plain code over the snapshot: one sentence, with its evidence.

    ``check`` names the detection that found it (``crash_loop``, ``oom_killed``,
    ...); ``subject`` is the object it is about; ``finding`` is the sentence a
    person (and the model) reads, naming the objects and figures it rests on;
    ``evidence`` holds the ids of the gathered calls whose results show it.
    """

    model_config = ConfigDict(frozen=True)

    check: str = Field(default="", description="set by the check's registration")
    subject: ObjectRef
    finding: str
    evidence: list[str] = Field(default_factory=list)
    severity: Severity = Severity.SYMPTOM

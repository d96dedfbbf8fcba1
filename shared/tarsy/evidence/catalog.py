"""Collectors as data: when one applies, what it follows, and which tool calls it makes.

Design constraint: a user adds, replaces or switches off a collector in
configuration, without code. A collector is therefore a record, not a
function: a condition on the alert (``when``), a *target source* it follows
(``for_each``, one of the names in :mod:`tarsy.evidence.targets`: what the
alert names, or what an earlier collector returned), and calls whose
arguments are templates filled from each target (``{namespace}``,
``{name}``, ``{label.severity}``, ...). The code knows only the generic
vocabulary of targets; which evidence to gather is the catalog's.

The ``collectors`` section of the configuration holds the catalog (named
entries: a user's entry replaces the built-in one of the same name;
``enabled: false`` switches one off); the ``evidence`` section holds the
budgets; an agent or chain says ``evidence: off`` to investigate without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tarsy._pydantic import DeferredModel

if TYPE_CHECKING:
    from tarsy.evidence.snapshot import AlertFacts

_TEMPLATE = re.compile(r"\{([a-zA-Z_][\w.]*)\}")

# What a metric query measures: the words a collector call may give its query, and
# the only thing the metric detections read of it (never its PromQL). ``alert`` is
# the alert's own expression, ``alert_by`` the same kept by one label; the others
# are per pod, the shapes kube-state-metrics and cAdvisor name (``request_rate``: the
# requests a second a pod serves, by the client libraries' ``http_requests_total``).
Measure = Literal[
    "alert",
    "alert_by",
    "cpu_usage",
    "cpu_limit",
    "cpu_throttled_ratio",
    "memory_working_set",
    "memory_limit",
    "restarts",
    "request_rate",
]


# What a call's result is, so the snapshot reads it whatever the server and tool are
# called: a Kubernetes object (YAML or JSON), a table of objects (a header row, one row
# an object; KIND, NAME, NAMESPACE, NODE... columns), events, a container's log, a
# metrics-API table (CPU(cores), MEMORY(bytes) per POD or node), or a Prometheus result.
Shape = Literal["object", "table", "events", "log", "top", "promql"]

# kubernetes-mcp-server's tools and what they print: a collector calling one of them
# need not say its shape. Any other tool's call says it (``shape:``).
KNOWN_SHAPES: Mapping[str, Shape] = {
    "pods_get": "object",
    "resources_get": "object",
    "resources_list": "table",
    "pods_list": "table",
    "pods_list_in_namespace": "table",
    "events_list": "events",
    "pods_log": "log",
    "pods_top": "top",
    "nodes_top": "top",
}


def shape_of_tool(tool: str) -> Shape:
    """The shape a known tool prints; a table for any other (shown as text, rows read)."""
    return KNOWN_SHAPES.get(tool, "table")


class _Strict(DeferredModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectorWhen(_Strict):
    """The alert a collector applies to; every condition given must hold (none: always).

    ``alert_names``: shell-style patterns of the alert's name; ``labels``: label
    → pattern; ``has_any_label``: at least one of these labels is set;
    ``mentions``: at least one of these words appears (case-insensitive) in
    the alert's name, labels or annotations.
    """

    alert_names: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    has_any_label: list[str] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)

    def holds(self, alert: AlertFacts) -> bool:
        """Whether ``alert`` meets every condition given."""
        if self.alert_names and not any(fnmatchcase(alert.name, p) for p in self.alert_names):
            return False
        for label, pattern in self.labels.items():
            value = alert.labels.get(label)
            if value is None or not fnmatchcase(value, pattern):
                return False
        if self.has_any_label and not any(label in alert.labels for label in self.has_any_label):
            return False
        if self.mentions:
            text = " ".join(
                [alert.name, *alert.labels.values(), *alert.annotations.values()]
            ).lower()
            if not any(word.lower() in text for word in self.mentions):
                return False
        return True


class CollectorCall(_Strict):
    """One tool call per target: ``tool`` on the collector's server, templated ``arguments``.

    A string argument may hold ``{variable}`` templates, filled from the
    target; a call whose template names a variable the target lacks is not
    made for that target (e.g. ``{container}`` for a pod without one), and an
    argument that renders empty is left out (a cluster-scoped object's
    ``{namespace}``).
    """

    tool: str = Field(min_length=1, pattern=r"^[\w\-.]+$")
    arguments: dict[str, Any] = Field(default_factory=dict)
    measures: Measure | None = Field(
        default=None, description="what a metric query measures (read by the metric detections)"
    )
    # Never left at "table" by itself: the validator below fills in a known tool's shape
    # or refuses the call (the default only tells type checkers the field is optional).
    shape: Shape = Field(
        default="table",
        description="what the result is: a known tool's by default, promql with measures",
    )

    @model_validator(mode="before")
    @classmethod
    def _declared(cls, data: Any) -> Any:
        """Every call says what its result is, or calls a tool whose shape is known."""
        if not isinstance(data, Mapping) or data.get("shape") is not None:
            return data
        tool = str(data.get("tool") or "")
        known = "promql" if data.get("measures") is not None else KNOWN_SHAPES.get(tool)
        if known is None:
            raise ValueError(
                f"collector call {tool!r}: say what its result is with shape: "
                "object | table | events | log | top | promql"
            )
        return {**data, "shape": known}

    @model_validator(mode="after")
    def _measured(self) -> CollectorCall:
        if self.shape == "promql" and self.measures is None:
            raise ValueError(f"collector call {self.tool!r}: a promql result needs measures:")
        return self

    def render(self, variables: Mapping[str, str]) -> dict[str, Any] | None:
        """The arguments for one target; None when a template's variable is missing."""
        rendered: dict[str, Any] = {}
        for key, value in self.arguments.items():
            if not isinstance(value, str):
                rendered[key] = value
                continue
            names = _TEMPLATE.findall(value)
            if any(name not in variables for name in names):
                return None
            text = _TEMPLATE.sub(lambda m: variables[m.group(1)], value)
            if names and not text:
                continue  # e.g. the namespace of a cluster-scoped object: no argument at all
            rendered[key] = text
        return rendered


class Collector(_Strict):
    """One entry of the catalog: for each target of ``for_each``, make ``calls``."""

    description: str = ""
    enabled: bool = True
    server: str = Field(default="kubernetes", min_length=1)
    when: CollectorWhen = Field(default_factory=CollectorWhen)
    for_each: str = Field(min_length=1, description="a target source (tarsy.evidence.targets)")
    max_targets: int = Field(default=5, ge=1, le=50)
    calls: list[CollectorCall] = Field(min_length=1)


class EvidenceSettings(_Strict):
    """The gather phase's budgets (the ``evidence`` section; merged by key like defaults)."""

    budget_seconds: float = Field(default=20.0, gt=0, description="the whole gather phase")
    max_calls: int = Field(default=40, ge=1, le=200)
    max_rounds: int = Field(default=6, ge=1, le=10, description="rounds of following references")
    brief_tokens: int = Field(
        default=6000, ge=200, description="the opening's evidence brief, at most"
    )
    # Share of the model's context window the brief may take when the window is smaller.
    brief_window_share: float = Field(default=0.35, gt=0, le=0.8)
    disabled_detections: list[str] = Field(default_factory=list)


class EvidenceSelection(_Strict):
    """An agent's or chain's choice: which collectors (all that apply when unset), which not."""

    collectors: list[str] | None = None
    disable: list[str] = Field(default_factory=list)


EvidenceChoice = Literal["on", "off"] | EvidenceSelection


def selection_of(choice: EvidenceChoice | None) -> EvidenceSelection | None:
    """The selection a choice stands for: None when evidence is off."""
    if choice is None or choice == "on":
        return EvidenceSelection()
    if choice == "off":
        return None
    return choice


def applicable(
    catalog: Mapping[str, Collector], selection: EvidenceSelection, alert: AlertFacts
) -> dict[str, Collector]:
    """The enabled collectors that ``selection`` keeps and whose condition ``alert`` meets."""
    chosen = selection.collectors
    return {
        name: collector
        for name, collector in catalog.items()
        if collector.enabled
        and (chosen is None or name in chosen)
        and name not in selection.disable
        and collector.when.holds(alert)
    }

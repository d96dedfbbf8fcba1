"""The target sources of metric collectors: the alert's own query, its breakdowns, its pods (pure).

Design constraint: like :mod:`tarsy.evidence.targets`, only generic vocabulary.
A metric collector's call templates are PromQL filled from these variables:

- ``query``: the alert rule's expression without its final comparison
  (``alert.expression``), or that expression kept by one label
  (``alert.expression.by:pod,version``: one target per label, with ``by``);
- ``namespace`` and ``pods``: the alert's namespace and a regular expression
  of the pods it is about (``alert.pods``): the pod it names, else the pods
  of the workload or Service it names (``<name>-.*``, the names a controller
  gives its pods);
- ``start``, ``end``, ``step``, ``time``: the alert's window
  (:func:`tarsy.evidence.promql.window`), on every target.

An alert without a start time has no window, so these sources give nothing
for it (the gather step gives every alert a start: its own, else the time
tarsy received it).
"""

from __future__ import annotations

from collections.abc import Callable

from tarsy.evidence import promql
from tarsy.evidence.snapshot import AlertFacts, Snapshot

Target = dict[str, str]

_POD_OWNER_LABELS = ("deployment", "statefulset", "daemonset", "replicaset", "job_name")
_SERVICE_LABELS = ("service", "service_name")


def _name_pattern(name: str) -> str:
    """A Kubernetes name as an RE2 pattern inside a PromQL string: only ``.`` needs care."""
    return name.replace(".", "[.]")


def alert_expression(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The alert's expression without its comparison, over the alert's window."""
    if not alert.expression or alert.starts_at is None:
        return []
    query, _operator, _threshold = promql.split_comparison(alert.expression)
    return [{"query": query, **promql.window(alert.starts_at)}]


def alert_breakdown(labels: str) -> Callable[[AlertFacts, Snapshot], list[Target]]:
    """``alert.expression.by:a,b``: the alert's expression kept by each label, one per label.

    A label the expression already keeps (it has no aggregation, or groups by
    it) gives no target: the alert's own series show it.
    """
    names = [name.strip() for name in labels.split(",") if name.strip()]

    def breakdown(alert: AlertFacts, snapshot: Snapshot) -> list[Target]:
        targets: list[Target] = []
        for base in alert_expression(alert, snapshot):
            for label in names:
                grouped = promql.grouped_by(base["query"], label)
                if grouped != base["query"]:
                    targets.append({**base, "query": grouped, "by": label})
        return targets

    return breakdown


def alert_pods(alert: AlertFacts, _: Snapshot) -> list[Target]:
    """The namespace and a pattern of the pods the alert is about, over the alert's window."""
    namespace = alert.labels.get("namespace", "")
    if not namespace or alert.starts_at is None:
        return []
    if alert.labels.get("pod"):
        pods = _name_pattern(alert.labels["pod"])
    else:
        named = (alert.labels.get(k, "") for k in (*_POD_OWNER_LABELS, *_SERVICE_LABELS))
        owner = next((name for name in named if name), "")
        if not owner:
            return []
        pods = f"{_name_pattern(owner)}-.*"
    return [{"namespace": namespace, "pods": pods, **promql.window(alert.starts_at)}]

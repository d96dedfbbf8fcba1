"""Tool results into snapshot items: YAML objects, list tables, events, logs, usage (pure).

Design constraint: the tools print for people, not programs.
kubernetes-mcp-server returns objects as YAML (``pods_get``,
``resources_get``), lists as the API server's tables (``resources_list``,
``pods_list*``: columns aligned under a header, cells that may hold spaces
such as ``7 (68s ago)``), events as a YAML list under a comment line, logs
as raw text and ``*_top`` as kubectl-top tables; a metric query's answer is
Prometheus' JSON (:mod:`tarsy.evidence.promql`). Each parser reads one of
those shapes and never raises: what it cannot read is left out, and the
raw text still reaches the model in the brief.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, assert_never

import yaml

from tarsy.evidence import promql
from tarsy.evidence.catalog import Shape
from tarsy.evidence.snapshot import (
    KubeEvent,
    KubeObject,
    ListedRow,
    MetricSeries,
    ObjectRef,
    PodLog,
    Snapshot,
    Usage,
)

_NOT_FOUND = re.compile(r'(\S+) "([^"]+)" not found')
_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}


def load_yaml(text: str) -> Any:
    """The YAML document in ``text``, or None when it is not YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def table_rows(text: str) -> list[dict[str, str]]:
    """The rows of a column-aligned table, keyed by header; cells are sliced by position.

    A header's column starts where its name starts; a cell runs to the next
    column's start, so cells with spaces stay whole. Lines after a rule of
    underscores (kubectl top's totals) are not rows.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    rows: list[dict[str, str]] = []
    for line in lines[1:]:
        if set(line.strip()) <= {"_", " "}:
            break
        cells = [line[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def quantity(text: str) -> float | None:
    """A Kubernetes quantity as a number (``750m`` → 0.75, ``320Mi`` → 335544320)."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*(m|Ki|Mi|Gi|Ti|k|M|G)?\s*", text or "")
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2)
    if unit == "m":
        return number / 1000
    return number * _UNITS[unit] if unit else number


def _event_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        return None
    text = value.replace(" UTC", "").strip()
    for form in ("%Y-%m-%d %H:%M:%S %z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(text.replace("Z", "+0000"), form)
        except ValueError:
            continue
    return None


def events(text: str, source: str) -> list[KubeEvent]:
    """The events of an ``events_list`` result (a YAML list, keys as the tool prints them)."""
    items = load_yaml(text)
    if not isinstance(items, list):
        return []
    found: list[KubeEvent] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        involved = item.get("InvolvedObject") or item.get("involvedObject") or {}
        if not isinstance(involved, Mapping):
            involved = {}
        namespace = str(item.get("Namespace") or item.get("namespace") or "")
        ref = ObjectRef(
            kind=str(involved.get("Kind") or involved.get("kind") or ""),
            name=str(involved.get("Name") or involved.get("name") or ""),
            namespace=namespace,
        )
        count = item.get("Count") or item.get("count") or 1
        found.append(
            KubeEvent(
                namespace=namespace,
                object=ref,
                type=str(item.get("Type") or item.get("type") or "Normal"),
                reason=str(item.get("Reason") or item.get("reason") or ""),
                message=str(item.get("Message") or item.get("message") or ""),
                count=count if isinstance(count, int) else 1,
                last_seen=_event_time(item.get("Timestamp") or item.get("lastTimestamp")),
                source=source,
            )
        )
    return found


def _usage(rows: list[dict[str, str]], source: str, namespace_default: str) -> list[Usage]:
    found: list[Usage] = []
    for row in rows:
        cpu = quantity(row.get("CPU(cores)", ""))
        memory = quantity(row.get("MEMORY(bytes)", ""))
        if cpu is None and memory is None:
            # ``nodes_top`` for one node still lists the others, as ``<unknown>``: no figure.
            continue
        if "POD" in row:
            ref = ObjectRef(
                kind="Pod", name=row["POD"], namespace=row.get("NAMESPACE") or namespace_default
            )
        else:
            ref = ObjectRef(kind="Node", name=row.get("NAME", ""))
        found.append(
            Usage(
                ref=ref,
                cpu_millicores=cpu * 1000 if cpu is not None else None,
                memory_bytes=memory,
                source=source,
            )
        )
    return found


def _merge_pod_usage(usage: list[Usage]) -> list[Usage]:
    """A pod's table prints one row per container: one figure per pod, summed."""
    merged: dict[ObjectRef, Usage] = {}
    for item in usage:
        if item.ref.kind != "Pod" or item.ref not in merged:
            merged.setdefault(item.ref, item)
            continue
        held = merged[item.ref]
        merged[item.ref] = held.model_copy(
            update={
                "cpu_millicores": (held.cpu_millicores or 0) + (item.cpu_millicores or 0),
                "memory_bytes": (held.memory_bytes or 0) + (item.memory_bytes or 0),
            }
        )
    return list(merged.values())


def metric_series(text: str, query: str, measures: str, source: str) -> list[MetricSeries]:
    """The series of a Prometheus vector or matrix answer; none when ``text`` is not one."""
    result = promql.parse_result(text)
    if result is None:
        return []
    return [
        MetricSeries(
            measures=measures, query=query, labels=sample.metric, points=points, source=source
        )
        for sample in result.result
        if (points := sample.points())
    ]


def add_result(
    snapshot: Snapshot,
    shape: Shape,
    arguments: Mapping[str, Any],
    text: str,
    source: str,
    *,
    is_error: bool,
    measures: str = "",
) -> None:
    """Read one tool result into ``snapshot`` (in place), by the ``shape`` its call declared.

    The shape, not the tool's name, says how to read it (:data:`tarsy.evidence.catalog.Shape`),
    so a collector for any MCP server reaches the detections. The conventional
    arguments name what a result is about where it does not say itself: ``kind``
    (a table or object without one lists pods), ``namespace``, ``name``,
    ``container`` and ``previous`` of a log.
    """
    if is_error:
        snapshot.errors[source] = text
        missing = _NOT_FOUND.search(text)
        if missing and arguments.get("name"):
            kind = str(arguments.get("kind") or "Pod")
            snapshot.absent.append(
                ObjectRef(
                    kind=kind,
                    name=str(arguments["name"]),
                    namespace=str(arguments.get("namespace") or ""),
                )
            )
        return
    namespace = str(arguments.get("namespace") or "")
    match shape:
        case "promql":
            # A series means nothing to the detections without what it measures.
            if measures:
                query = str(arguments.get("query") or "")
                snapshot.series.extend(metric_series(text, query, measures, source))
        case "object":
            body = load_yaml(text)
            if isinstance(body, dict):
                kind = str(body.get("kind") or arguments.get("kind") or "Pod")
                snapshot.objects.append(KubeObject(kind=kind, body=body, source=source))
        case "table":
            snapshot.rows.extend(_rows(text, arguments, namespace, source))
        case "events":
            snapshot.events.extend(events(text, source))
        case "log":
            snapshot.logs.append(
                PodLog(
                    namespace=namespace,
                    pod=str(arguments.get("name") or ""),
                    container=str(arguments.get("container") or ""),
                    previous=bool(arguments.get("previous")),
                    text=text,
                    source=source,
                )
            )
        case "top":
            snapshot.usage.extend(_merge_pod_usage(_usage(table_rows(text), source, namespace)))
        case _:
            assert_never(shape)


def _rows(text: str, arguments: Mapping[str, Any], namespace: str, source: str) -> list[ListedRow]:
    return [
        ListedRow(
            kind=row.get("KIND") or str(arguments.get("kind") or "Pod"),
            api_version=row.get("APIVERSION", ""),
            namespace=row.get("NAMESPACE", namespace),
            name=row.get("NAME", ""),
            columns=row,
            source=source,
        )
        for row in table_rows(text)
    ]

"""Metric checks: the alert's series steps, one part is out of line, a resource is at its limit.

Design constraint: pure functions of the snapshot's metric series, which they
read by what each query measures (the collector's ``measures``), never by
its PromQL, so a team's own queries for the same measures are read alike.
Levels are judged around the alert's start (from ten minutes before it, when
the condition was already building, to the end of the window), so a finding
says what the series looked like when the alert fired, not at an arbitrary
moment.

- :func:`level_shift`: the alert's own series moved from one level to another
  (at least threefold, or across the rule's threshold), and when; a ReplicaSet
  or pod created within minutes of that time is named beside it.
- :func:`out_of_line`: in a breakdown of the alert's expression by one label
  (version, pod, instance), a minority of the values crosses the rule's
  threshold while the rest do not, or one value is far from the others.
- :func:`resource_saturation`: a pod's memory near its limit or growing toward
  it, a pod throttled for much of its CPU time, a pod using its whole CPU
  limit, a pod that restarted within the window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from statistics import fmean, median

from tarsy.evidence import promql
from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import cpu_text, created, detection, memory_text, sources
from tarsy.evidence.snapshot import Detection, MetricSeries, ObjectRef, Snapshot
from tarsy.models import Severity

SHIFT_RATIO = 3.0
OUT_OF_LINE_RATIO = 5.0
MEMORY_NEAR_LIMIT = 0.9
MEMORY_GROWTH = 0.2  # a fifth more over the window counts as growing
LEAK_HORIZON = timedelta(hours=6)
LEVEL_LOAD = 1.5  # load (requests, CPU) within this ratio, highest over lowest, is level
THROTTLED = 0.25
CPU_AT_LIMIT = 0.9
ROLLOUT_NEAR = timedelta(minutes=10)
_AROUND_START = timedelta(minutes=10)
_MIN_SIDE = 3  # points on each side of a step


def _fmt(value: float) -> str:
    if value == 0 or 0.0001 <= abs(value) < 100_000:
        return f"{value:.3g}"
    return f"{value:.2e}"


def _clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M UTC")


def _start(snapshot: Snapshot) -> float | None:
    starts = snapshot.alert.starts_at
    if starts is None:
        return None
    return (starts if starts.tzinfo else starts.replace(tzinfo=UTC)).timestamp()


def _level(series: MetricSeries, start: float | None) -> float | None:
    """The mean around the alert's start (to the window's end); the newest value without a start.

    A series that ended before then (a pod replaced earlier) has no level: it was
    not part of what fired.
    """
    if start is None:
        return series.last
    near = [v for t, v in series.points if t >= start - _AROUND_START.total_seconds()]
    return fmean(near) if near else None


def _alert_subject(snapshot: Snapshot) -> ObjectRef:
    return ObjectRef(
        kind="Alert",
        name=snapshot.alert.name or "alert",
        namespace=snapshot.alert.labels.get("namespace", ""),
    )


def _crosses(value: float, operator: str, threshold: float) -> bool:
    match operator:
        case ">":
            return value > threshold
        case ">=":
            return value >= threshold
        case "<":
            return value < threshold
        case "<=":
            return value <= threshold
        case "==":
            return value == threshold
        case "!=":
            return value != threshold
    return False


def _far_apart(high: float, low: float, ratio: float) -> bool:
    if high <= 0 and low <= 0:
        return False
    low, high = sorted((abs(low), abs(high)))
    return high >= ratio * low if low > 0 else high > 0


def step_of(points: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """The largest step in ``points``: (time of the first point after it, level before, after).

    The split that best separates two flat levels: the one that maximizes the
    difference of the means on each side, with at least three points a side.
    """
    if len(points) < 2 * _MIN_SIDE:
        return None
    best: tuple[float, float, float, float] | None = None
    for index in range(_MIN_SIDE, len(points) - _MIN_SIDE + 1):
        before = fmean(v for _, v in points[:index])
        after = fmean(v for _, v in points[index:])
        gap = abs(after - before)
        if best is None or gap > best[0]:
            best = (gap, points[index][0], before, after)
    if best is None:
        return None
    _, moment, before, after = best
    return moment, before, after


def _rollout_near(snapshot: Snapshot, moment: float) -> tuple[str, list[str]]:
    """A ReplicaSet, else a pod, created within minutes of ``moment`` in the alert's namespace."""
    namespace = snapshot.alert.labels.get("namespace", "")
    near = timedelta(seconds=ROLLOUT_NEAR.total_seconds())
    when = datetime.fromtimestamp(moment, UTC)
    for kind in ("ReplicaSet", "Pod"):
        for obj in snapshot.of_kind(kind):
            born = created(obj)
            if born is None or (namespace and obj.namespace != namespace):
                continue
            if abs(born - when) <= near:
                stamp = born.astimezone(UTC).strftime("%H:%M UTC")
                return f", when {kind} {obj.name} was created ({stamp})", sources(obj)
    return "", []


@check("level_shift")
def level_shift(snapshot: Snapshot) -> list[Detection]:
    """The alert's own series stepped from one level to another, and when."""
    _, operator, threshold = promql.split_comparison(snapshot.alert.expression)
    found: list[Detection] = []
    for series in snapshot.series_of("alert"):
        step = step_of(series.points)
        if step is None:
            continue
        moment, before, after = step
        crossed = threshold is not None and _crosses(after, operator, threshold)
        crossed = crossed and not _crosses(before, operator, threshold or 0.0)
        if not (crossed or _far_apart(after, before, SHIFT_RATIO)):
            continue
        rollout, rollout_sources = _rollout_near(snapshot, moment)
        label = series.label_text()
        what = "The alert's expression" + (f" ({label})" if label != "{}" else "")
        rule = f" (the rule fires {operator} {_fmt(threshold)})" if threshold is not None else ""
        finding = (
            f"{what} stepped from about {_fmt(before)} to {_fmt(after)} at "
            f"{_clock(moment)}{rule}{rollout}."
        )
        severity = Severity.LIKELY_CAUSE if rollout else Severity.SYMPTOM
        evidence = [series.source, *rollout_sources]
        found.append(detection(_alert_subject(snapshot), finding, evidence, severity))
    return found


def _varying_label(group: list[MetricSeries]) -> str:
    keys = sorted({k for s in group for k in s.labels if k != "__name__"})
    varying = [k for k in keys if len({s.labels.get(k, "") for s in group}) > 1]
    return varying[0] if len(varying) == 1 else ", ".join(varying)


def _part(series: MetricSeries, label: str) -> str:
    if "," in label:
        return series.label_text()
    return f"{label}={series.labels.get(label, '')}"


def _since(series: MetricSeries, operator: str, threshold: float | None) -> str:
    """When a series first crossed the threshold, else when it stepped up."""
    if threshold is not None:
        for moment, value in series.points:
            if _crosses(value, operator, threshold):
                return f" since {_clock(moment)}" if moment > series.points[0][0] else ""
    step = step_of(series.points)
    return f" since {_clock(step[0])}" if step is not None else ""


@dataclass(frozen=True)
class OutOfLine:
    """Parts of one breakdown of the alert's expression that behave unlike the rest."""

    label: str
    odd: list[tuple[MetricSeries, float]]
    rest: list[float]
    why: str


def out_of_line_parts(snapshot: Snapshot) -> list[OutOfLine]:
    """Per breakdown of the alert's expression, the parts out of line with the rest.

    With the rule's threshold, the parts past it (fewer than half of them); without
    one, the highest part when it is far above the others' median.
    """
    _, operator, threshold = promql.split_comparison(snapshot.alert.expression)
    start = _start(snapshot)
    groups: dict[str, list[MetricSeries]] = {}
    for series in snapshot.series_of("alert_by"):
        groups.setdefault(series.query, []).append(series)
    found: list[OutOfLine] = []
    for group in groups.values():
        levels = [(s, level) for s in group if (level := _level(s, start)) is not None]
        if len(levels) < 2:
            continue
        label = _varying_label([s for s, _ in levels])
        if not label:
            continue
        if threshold is not None:
            odd = [(s, v) for s, v in levels if _crosses(v, operator, threshold)]
            if not odd or len(odd) * 2 > len(levels):
                continue
            why = f"crosses the alert's threshold ({operator} {_fmt(threshold)})"
        else:
            ranked = sorted(levels, key=lambda item: item[1], reverse=True)
            top, rest = ranked[0], [v for _, v in ranked[1:]]
            if not _far_apart(top[1], median(rest), OUT_OF_LINE_RATIO):
                continue
            odd = [top]
            why = "is far above the others"
        rest_levels = [v for s, v in levels if all(s is not o for o, _ in odd)]
        found.append(OutOfLine(label=label, odd=odd, rest=rest_levels, why=why))
    return found


def out_of_line_pods(snapshot: Snapshot) -> list[ObjectRef]:
    """The pods a breakdown of the alert's expression singles out (by their ``pod`` label)."""
    return [
        _pod(snapshot, series)
        for part in out_of_line_parts(snapshot)
        for series, _ in part.odd
        if series.labels.get("pod")
    ]


@check("out_of_line")
def out_of_line(snapshot: Snapshot) -> list[Detection]:
    """In a breakdown of the alert's expression, one part behaves unlike the rest."""
    operator, threshold = promql.split_comparison(snapshot.alert.expression)[1:]
    found: list[Detection] = []
    for part in out_of_line_parts(snapshot):
        label, rest_levels = part.label, part.rest
        parts = ", ".join(
            f"{_part(s, label)} at {_fmt(v)}{_since(s, operator, threshold)}" for s, v in part.odd
        )
        others = (
            f"{_fmt(min(rest_levels))}"
            if len(set(rest_levels)) == 1
            else (f"{_fmt(min(rest_levels))} to {_fmt(max(rest_levels))}")
        )
        stay = "the other stays" if len(rest_levels) == 1 else f"the other {len(rest_levels)} stay"
        finding = f"By {label}, only {parts} {part.why}; {stay} at {others}."
        evidence = [s.source for s, _ in part.odd]
        found.append(detection(_alert_subject(snapshot), finding, evidence, Severity.LIKELY_CAUSE))
    return found


def _by_pod(series: Iterable[MetricSeries]) -> dict[str, MetricSeries]:
    return {s.labels["pod"]: s for s in series if s.labels.get("pod")}


def _pod(snapshot: Snapshot, series: MetricSeries) -> ObjectRef:
    namespace = series.labels.get("namespace") or snapshot.alert.labels.get("namespace", "")
    return ObjectRef(kind="Pod", name=series.labels.get("pod", ""), namespace=namespace)


_SATURATION = "resource_saturation"


def _climbs(series: MetricSeries) -> bool:
    """Whether ``series`` rose by :data:`MEMORY_GROWTH` or more and never fell on the way.

    Memory that load drives comes and goes with the load; a working set that
    only climbs is what a leak (or an unbounded cache) looks like.
    """
    first, last = series.points[0][1], series.points[-1][1]
    if first <= 0 or last - first < MEMORY_GROWTH * first:
        return False
    return all(b >= a for (_, a), (_, b) in zip(series.points, series.points[1:], strict=False))


def _load_level(snapshot: Snapshot, pod: str) -> str:
    """``, while its ... stayed level (...)`` when the pod's load shows no rise.

    The requests it served are the load itself; its CPU use stands in where no
    request series was gathered. A memory climb under level load is what load does
    not explain (a leak, a cache without a bound); one under rising load may be.
    """
    requests = _by_pod(snapshot.series_of("request_rate")).get(pod)
    level = _level_range(requests)
    if requests is not None and level is not None:
        low, high = level
        return f", while the requests it served stayed level ({low:.3g}-{high:.3g} a second)"
    cpu = _by_pod(snapshot.series_of("cpu_usage")).get(pod)
    level = _level_range(cpu) if requests is None else None
    if level is None:
        return ""
    low, high = level
    return f", while its CPU use stayed level ({cpu_text(low)}-{cpu_text(high)})"


def _level_range(series: MetricSeries | None) -> tuple[float, float] | None:
    """The usual low and high of a series that stays within :data:`LEVEL_LOAD`, if it does.

    The usual range (the 10th to the 90th percentile) rather than the extremes:
    a ``rate()`` over a window its samples only partly cover (a missed scrape, the
    last minutes before a query's end) dips for a point or two without the load
    changing.
    """
    if series is None or len(series.points) < 2:
        return None
    values = sorted(v for _, v in series.points)
    low = values[int(0.1 * (len(values) - 1))]
    high = values[math.ceil(0.9 * (len(values) - 1))]
    if low <= 0 or high > LEVEL_LOAD * low:
        return None
    return low, high


def _memory(snapshot: Snapshot) -> list[Detection]:
    limits = _by_pod(snapshot.series_of("memory_limit"))
    found: list[Detection] = []
    for pod, used in _by_pod(snapshot.series_of("memory_working_set")).items():
        limit = limits.get(pod)
        cap = limit.last if limit is not None else None
        now = used.last
        if now is None or not cap:
            continue
        first = used.points[0]
        evidence = sources(used.source, limit.source if limit else None)
        climbed = (
            f"; it grew without falling from {memory_text(first[1])} at {_clock(first[0])}"
            f"{_load_level(snapshot, pod)}"
            if _climbs(used)
            else ""
        )
        if now >= MEMORY_NEAR_LIMIT * cap:
            finding = (
                f"Pod {pod} uses {now / cap:.0%} of its memory limit "
                f"({memory_text(now)} of {memory_text(cap)}) at {_clock(used.points[-1][0])}"
                f"{climbed}."
            )
            found.append(detection(_pod(snapshot, used), finding, evidence, Severity.LIKELY_CAUSE))
            continue
        span = used.points[-1][0] - first[0]
        rise = now - first[1]
        if span <= 0 or not climbed:
            # Only a series that never falls is a climb toward the limit, not load coming and going.
            continue
        seconds_left = (cap - now) / (rise / span)
        if seconds_left > LEAK_HORIZON.total_seconds():
            continue
        finding = (
            f"Pod {pod}'s memory grows without falling, from {memory_text(first[1])} at "
            f"{_clock(first[0])} to {memory_text(now)} at {_clock(used.points[-1][0])}"
            f"{_load_level(snapshot, pod)}; at this rate it reaches its {memory_text(cap)} limit "
            f"in about {_duration(seconds_left)}."
        )
        found.append(detection(_pod(snapshot, used), finding, evidence, Severity.LIKELY_CAUSE))
    return found


def _duration(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _cpu(snapshot: Snapshot, start: float | None) -> list[Detection]:
    limits = _by_pod(snapshot.series_of("cpu_limit"))
    usage = _by_pod(snapshot.series_of("cpu_usage"))
    found: list[Detection] = []
    throttled_pods: set[str] = set()
    for pod, ratio_series in _by_pod(snapshot.series_of("cpu_throttled_ratio")).items():
        ratio = _level(ratio_series, start)
        if ratio is None or ratio < THROTTLED:
            continue
        throttled_pods.add(pod)
        limit, used = limits.get(pod), usage.get(pod)
        cap = f" under its {cpu_text(limit.last)} CPU limit" if limit and limit.last else ""
        using = f", using {cpu_text(_level(used, start))}" if used is not None else ""
        finding = f"Pod {pod} is CPU-throttled in {ratio:.0%} of its CPU periods{cap}{using}."
        evidence = sources(
            ratio_series.source, limit.source if limit else None, used.source if used else None
        )
        found.append(
            detection(_pod(snapshot, ratio_series), finding, evidence, Severity.LIKELY_CAUSE)
        )
    for pod, used in usage.items():
        limit = limits.get(pod)
        level = _level(used, start)
        if pod in throttled_pods or limit is None or not limit.last or level is None:
            continue
        if level >= CPU_AT_LIMIT * limit.last:
            finding = (
                f"Pod {pod} uses {level / limit.last:.0%} of its CPU limit "
                f"({cpu_text(level)} of {cpu_text(limit.last)})."
            )
            evidence = sources(used.source, limit.source)
            found.append(detection(_pod(snapshot, used), finding, evidence, Severity.SYMPTOM))
    return found


def _restarts(snapshot: Snapshot) -> list[Detection]:
    found: list[Detection] = []
    for pod, series in _by_pod(snapshot.series_of("restarts")).items():
        if len(series.points) < 2:
            continue
        (t0, first), (t1, last) = series.points[0], series.points[-1]
        if last > first:
            count = int(last - first)
            finding = (
                f"Pod {pod} restarted {count} time{'s' if count != 1 else ''} between "
                f"{_clock(t0)} and {_clock(t1)}."
            )
            found.append(
                detection(_pod(snapshot, series), finding, [series.source], Severity.SYMPTOM)
            )
    return found


@check("resource_saturation")
def resource_saturation(snapshot: Snapshot) -> list[Detection]:
    """Pods at or growing toward their memory limit, throttled or at their CPU limit, restarted."""
    start = _start(snapshot)
    return [*_memory(snapshot), *_cpu(snapshot, start), *_restarts(snapshot)]

"""A scenario's metrics history, written compactly, rendered as OpenMetrics for promtool.

Design constraint: the history must read like what a real cluster's Prometheus
holds (cAdvisor, kube-state-metrics and the service's own request metrics, one
sample per scrape interval), yet fit in a scenario file a person can review. So a
series is given by a few *knots* (offset from the window's start → value) and
filled in between them, linearly, at every scrape:

* a ``gauge`` takes the knots' values (memory working set, a limit, a CPU quota);
* a ``counter`` takes the knots as its *rate per second*, and is integrated, so
  ``rate()`` over the result gives the knots back (requests, CPU seconds,
  throttled periods); or, with ``totals``, the knots are the counter's own value
  (restarts: ``{0m: 0, 84m30s: 0, 85m: 1}``);
* a ``histogram`` takes a request rate (``rate``) and, per knot, the share of
  requests at or under each bucket bound (``shares``, cumulative, ending at 1),
  and yields ``_bucket``, ``_count`` and ``_sum`` counters, so
  ``histogram_quantile`` over them gives the latency the scenario means.

A value may carry a binary unit (``512Mi``, ``1Gi``). A knot's key is an offset such
as ``0m``, ``42m30s`` or ``1h5m``; before the first
knot and after the last the value holds. A series exists from ``from`` to ``until``
(offsets; default: the whole window), as a pod's series do from its start until a
rollout replaces it. The window is ``start`` to ``end``
(default: the cluster's ``now``). The scenario's alert rules (``rules``, Prometheus'
rule-group format) are kept beside the data: the alert the scenario sends comes from
one of them, and a test evaluates it on the backfilled data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_OFFSET = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def parse_offset(text: str) -> timedelta:
    """``42m30s`` → 42.5 minutes.

    Raises:
        ValueError: Not an offset of hours, minutes and seconds.
    """
    match = _OFFSET.fullmatch(str(text).strip())
    if not match or not any(match.groups()):
        raise ValueError(f"{text!r} is not an offset such as '0m', '42m30s' or '1h5m'")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_QUANTITY = re.compile(r"^(-?\d+(?:\.\d+)?)(Ki|Mi|Gi)?$")


def _quantity(value: Any) -> float:
    """``1.5`` → 1.5; ``512Mi`` → 536870912."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _QUANTITY.fullmatch(str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a number or a quantity such as '512Mi'")
    return float(match.group(1)) * _UNITS.get(match.group(2) or "", 1)


Knots = dict[str, float]


def _knots(value: dict[str, Any]) -> list[tuple[float, Any]]:
    """Knots sorted by offset in seconds."""
    return sorted((parse_offset(k).total_seconds(), v) for k, v in value.items())


def _at(knots: list[tuple[float, float]], t: float) -> float:
    """The value at ``t`` seconds: linear between knots, held outside them."""
    if t <= knots[0][0]:
        return knots[0][1]
    for (t0, v0), (t1, v1) in pairwise(knots):
        if t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return knots[-1][1]


class Series(_Model):
    """One series (a histogram: one label set of its family), by its knots."""

    name: str = Field(description="the family name (a counter's samples get _total)")
    type: Literal["gauge", "counter", "histogram"]
    help: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    values: Knots = Field(
        default_factory=dict, description="gauge: the value; counter: the rate per second"
    )
    totals: Knots = Field(default_factory=dict, description="counter: its own value")
    rate: Knots = Field(default_factory=dict, description="histogram: requests per second")
    buckets: list[float] = Field(default_factory=list, description="histogram: upper bounds")
    shares: dict[str, list[float]] = Field(
        default_factory=dict,
        description="histogram: cumulative share of requests at or under each bound, per knot",
    )
    from_: str | None = Field(default=None, alias="from", description="first sample (offset)")
    until: str | None = Field(default=None, description="last sample (offset)")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def alive(self, offset: float) -> bool:
        """Whether the series has a sample ``offset`` seconds into the window."""
        first = parse_offset(self.from_).total_seconds() if self.from_ else -math.inf
        last = parse_offset(self.until).total_seconds() if self.until else math.inf
        return first <= offset <= last

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _METRIC_NAME.fullmatch(value) or value.endswith(("_total", "_bucket", "_count")):
            raise ValueError(f"{value!r} is not a metric family name (no _total/_bucket suffix)")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _LABEL_NAME.fullmatch(k) or k == "le" or k.startswith("__")]
        if bad:
            raise ValueError(f"not usable as label names: {bad}")
        return value

    @field_validator("values", "totals", "rate", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): _quantity(v) for k, v in value.items()}
        return value

    @field_validator("values", "totals", "rate", "shares")
    @classmethod
    def _offsets(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            parse_offset(key)
        return value

    @field_validator("from_", "until")
    @classmethod
    def _offset(cls, value: str | None) -> str | None:
        if value is not None:
            parse_offset(value)
        return value

    @model_validator(mode="after")
    def _complete(self) -> Series:
        if self.type == "histogram":
            if not (self.rate and self.buckets and self.shares) or self.values:
                raise ValueError("a histogram takes rate, buckets and shares (not values)")
            if self.buckets != sorted(self.buckets) or len(set(self.buckets)) != len(self.buckets):
                raise ValueError("buckets must rise")
            for key, shares in self.shares.items():
                rising = all(a <= b for a, b in pairwise(shares))
                if len(shares) != len(self.buckets) or not rising or not 0 <= shares[0]:
                    raise ValueError(f"shares at {key}: one rising share per bucket")
                if shares[-1] > 1:
                    raise ValueError(f"shares at {key}: a share is at most 1")
        elif self.type == "counter":
            if bool(self.values) == bool(self.totals) or self.rate or self.buckets or self.shares:
                raise ValueError("a counter takes values (its rate) or totals, not both")
            if any(v < 0 for v in self.values.values()):
                raise ValueError("a counter's rate cannot be negative")
            totals = [v for _, v in _knots(self.totals)]
            if any(b < a for a, b in pairwise(totals)):
                raise ValueError("a counter's totals cannot fall")
        elif not self.values or self.totals or self.rate or self.buckets or self.shares:
            raise ValueError("a gauge takes values only")
        return self

    def identity(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The family and label set: two series with one identity would clash in the TSDB."""
        return self.name, tuple(sorted(self.labels.items()))


class AlertRule(_Model):
    """A Prometheus alerting rule, as in a rules file."""

    alert: str
    expr: str
    for_: str = Field(default="0m", alias="for")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ScenarioMetrics(_Model):
    """A scenario's metrics history and the alert rules its alert comes from."""

    start: datetime
    end: datetime | None = Field(default=None, description="default: the cluster's now")
    scrape_interval: int = Field(default=30, ge=5, le=300, description="seconds between samples")
    series: list[Series] = Field(min_length=1)
    rules: list[AlertRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct(self) -> ScenarioMetrics:
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for series in self.series:
            if series.identity() in seen:
                raise ValueError(f"series {series.name}{dict(series.labels)} is given twice")
            seen.add(series.identity())
        types: dict[str, str] = {}
        for series in self.series:
            if types.setdefault(series.name, series.type) != series.type:
                raise ValueError(f"family {series.name!r} is given two types")
        return self

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        """The first and last sample times."""
        end = self.end or now
        if end <= self.start:
            raise ValueError("metrics.end must come after metrics.start")
        return self.start, end

    def rules_file(self, group: str) -> dict[str, Any]:
        """The rules as a Prometheus rules file (one group)."""
        return {
            "groups": [
                {
                    "name": group,
                    "rules": [rule.model_dump(by_alias=True) for rule in self.rules],
                }
            ]
        }


def _number(value: float) -> str:
    if value == math.floor(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(round(value, 9))


def _label_text(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    escaped = (
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(labels.items())
    )
    return "{" + ",".join(escaped) + "}"


def _samples(
    series: Series, all_times: list[float], t0: float
) -> Iterator[tuple[str, str, float, float]]:
    """(sample name, labels text, timestamp, value) of one series, time ascending per line."""
    times = [t for t in all_times if series.alive(t - t0)]
    offsets = [t - t0 for t in times]
    if series.type == "gauge":
        knots = _knots(series.values)
        for t, off in zip(times, offsets, strict=True):
            yield series.name, _label_text(series.labels), t, _at(knots, off)
        return
    if series.type == "counter" and series.totals:
        knots = _knots(series.totals)
        for t, off in zip(times, offsets, strict=True):
            yield f"{series.name}_total", _label_text(series.labels), t, _at(knots, off)
        return
    if series.type == "counter":
        knots = _knots(series.values)
        total = 0.0
        for i, (t, off) in enumerate(zip(times, offsets, strict=True)):
            if i:
                previous = offsets[i - 1]
                total += (_at(knots, previous) + _at(knots, off)) / 2 * (off - previous)
            yield f"{series.name}_total", _label_text(series.labels), t, total
        return
    rate = _knots(series.rate)
    shares = _knots(series.shares)
    bounds = [*series.buckets, math.inf]
    cumulative = [0.0] * len(bounds)
    count = total = 0.0
    rows: list[tuple[float, list[float], float, float]] = []
    for i, off in enumerate(offsets):
        if i:
            previous = offsets[i - 1]
            requests = (_at(rate, previous) + _at(rate, off)) / 2 * (off - previous)
            share = [_at([(k, s[b]) for k, s in shares], off) for b in range(len(series.buckets))]
            share.append(1.0)
            below = 0.0
            lower = 0.0
            for b, bound in enumerate(bounds):
                cumulative[b] += requests * share[b]
                in_bucket = requests * (share[b] - below)
                upper = bound if math.isfinite(bound) else lower * 2 or 1.0
                total += in_bucket * (lower + upper) / 2
                below, lower = share[b], upper
            count += requests
        rows.append((times[i], list(cumulative), count, total))
    for b, bound in enumerate(bounds):
        le = "+Inf" if math.isinf(bound) else _number(bound)
        labels = _label_text({**series.labels, "le": le})
        for t, buckets, _, _ in rows:
            yield f"{series.name}_bucket", labels, t, buckets[b]
    for t, _, count_at, _ in rows:
        yield f"{series.name}_count", _label_text(series.labels), t, count_at
    for t, _, _, sum_at in rows:
        yield f"{series.name}_sum", _label_text(series.labels), t, sum_at


def openmetrics(metrics: ScenarioMetrics, now: datetime) -> str:
    """The whole history in the OpenMetrics text format ``promtool`` backfills.

    Args:
        metrics: The scenario's metrics.
        now: The cluster's clock (the window's default end).

    Returns:
        Families in the order first given, each with its TYPE and HELP, then ``# EOF``.
    """
    start, end = metrics.window(now)
    t0 = start.timestamp()
    steps = int((end - start).total_seconds() // metrics.scrape_interval)
    times = [t0 + i * metrics.scrape_interval for i in range(steps + 1)]
    families: dict[str, list[Series]] = {}
    for series in metrics.series:
        families.setdefault(series.name, []).append(series)
    lines: list[str] = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} {members[0].type}")
        if members[0].help:
            lines.append(f"# HELP {name} {members[0].help}")
        for series in members:
            for sample, labels, t, value in _samples(series, times, t0):
                lines.append(f"{sample}{labels} {_number(value)} {_number(t)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"

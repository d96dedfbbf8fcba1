"""PromQL as plain text: an alert's expression, its breakdowns, its window, and query results.

Design constraint: pure functions over the expression's text, with no PromQL
parser as a dependency, so they must be right on what alert rules are made of
(aggregations with or without ``by``, ``histogram_quantile`` over a grouped
``sum``, ratios of sums, a comparison with a number at the end) and harmless on
anything else: a transform that cannot apply returns the expression unchanged,
and the gather phase then makes no second call for it.

Prometheus answers a query with ``{"resultType": ..., "result": [...]}``
(prometheus-mcp-server returns that ``data`` object as its text); the
:class:`PrometheusResult` model is the boundary every reader of a metric
result goes through (the evidence snapshot and the web view's chart).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import ConfigDict, Field, ValidationError

from tarsy._pydantic import DeferredModel

# The window an alert's metrics are read over: the hour before it started, when the
# change that caused it happened, and a little after, to see whether it held.
BEFORE = timedelta(hours=1)
AFTER = timedelta(minutes=15)
STEP = "60s"

_AGGREGATIONS = ("sum", "avg", "min", "max", "count", "group", "stddev", "stdvar")
_AGGREGATION = re.compile(r"\b(" + "|".join(_AGGREGATIONS) + r")\s*(?=\(|by\b|without\b)")
_CLAUSE = re.compile(r"\s*(by|without)\s*\(([^()]*)\)\s*")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_COMPARISONS = (">=", "<=", "==", "!=", ">", "<")


class PromSample(DeferredModel):
    """One series of a query result: its labels and its value (vector) or values (matrix)."""

    model_config = ConfigDict(extra="ignore")

    metric: dict[str, str] = Field(default_factory=dict)
    value: tuple[float, str] | None = None
    values: list[tuple[float, str]] | None = None

    def points(self) -> list[tuple[float, float]]:
        """The finite samples as (unix seconds, value), oldest first."""
        raw = self.values if self.values is not None else [self.value] if self.value else []
        return [(t, v) for t, text in raw if (v := number(text)) is not None]


class PrometheusResult(DeferredModel):
    """The ``data`` of a Prometheus query answer, as prometheus-mcp-server returns it."""

    model_config = ConfigDict(extra="ignore")

    resultType: Literal["vector", "matrix"]  # Prometheus' own field name
    result: list[PromSample]


def parse_result(content: str) -> PrometheusResult | None:
    """The result when ``content`` is a Prometheus vector or matrix; None otherwise."""
    try:
        return PrometheusResult.model_validate(json.loads(content))
    except (ValueError, ValidationError, RecursionError):
        return None


def number(text: str) -> float | None:
    """A sample's value as a finite float (Prometheus writes ``"NaN"``, ``"+Inf"``)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _top_level(expr: str) -> Iterator[tuple[int, str]]:
    """Each character outside parentheses, braces, brackets and quotes, with its index."""
    depth, quote, escaped = 0, "", False
    for index, char in enumerate(expr):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0:
            yield index, char


def split_comparison(expr: str) -> tuple[str, str, float | None]:
    """The expression before a final comparison with a number, the operator, and the number.

    ``sum(rate(x[5m])) > 0.02`` → ``("sum(rate(x[5m]))", ">", 0.02)``; an
    expression without one comes back whole, with ``""`` and None.
    """
    text = expr.strip()
    found: tuple[int, str] | None = None
    chars = dict(_top_level(text))
    for index in sorted(chars):
        pair = text[index : index + 2]
        operator = pair if pair in _COMPARISONS else chars[index]
        if operator not in _COMPARISONS or (index - 1 in chars and text[index - 1] in "<>=!"):
            continue
        found = (index, operator)
    if found is None:
        return text, "", None
    index, operator = found
    right = text[index + len(operator) :].strip()
    # A stray closing parenthesis after the number (a rule cut from a larger text) is not ours.
    right = right.removeprefix("bool").strip().rstrip(")").strip()
    threshold = float(right) if _NUMBER.match(right) else None
    if threshold is None:
        return text, "", None
    return text[:index].strip(), operator, threshold


def threshold_of(query: str) -> float | None:
    """The number a query compares with at its end (``... > 1`` → 1.0), if any."""
    return split_comparison(query)[2]


def _closing(expr: str, opening: int) -> int | None:
    """The index of the parenthesis that closes the one at ``opening``."""
    depth, quote = 0, ""
    for index in range(opening, len(expr)):
        char = expr[index]
        if quote:
            quote = "" if char == quote and expr[index - 1] != "\\" else quote
        elif char in "\"'`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return None


def _with_label(clause: str, keyword: str, label: str) -> str:
    names = [name.strip() for name in clause.split(",") if name.strip()]
    if keyword == "by" and label not in names:
        names.append(label)
    if keyword == "without":
        names = [name for name in names if name != label]
    return f"{keyword} ({', '.join(names)})"


def grouped_by(expr: str, label: str) -> str:
    """``expr`` with ``label`` kept by every aggregation, so its result is one series per value.

    ``sum(rate(x[5m])) / sum(rate(y[5m]))`` by ``version`` becomes
    ``sum by (version) (rate(x[5m])) / sum by (version) (rate(y[5m]))``, and
    ``histogram_quantile(0.99, sum by (le) (...))`` keeps ``le`` beside it. An
    expression without an aggregation keeps its labels already and comes back as it is.
    """
    if not _LABEL_NAME.match(label):
        return expr
    result = expr
    # Right to left, so that the indices of the matches still to rewrite stay valid.
    for match in reversed(list(_AGGREGATION.finditer(expr))):
        name_end, after = match.end(1), match.end()
        clause = _CLAUSE.match(expr, name_end)
        if clause:  # prefix form: sum by (a) (...)
            rewritten = _with_label(clause.group(2), clause.group(1), label)
            result = f"{result[:name_end]} {rewritten} {result[clause.end() :]}"
            continue
        closing = _closing(expr, after)
        if closing is None or expr[after : after + 1] != "(":
            continue
        postfix = _CLAUSE.match(expr, closing + 1)
        if postfix:  # postfix form: sum(...) by (a)
            rewritten = _with_label(postfix.group(2), postfix.group(1), label)
            rest = result[postfix.end() :]
            result = f"{result[: closing + 1]} {rewritten}{' ' if rest else ''}{rest}"
        else:
            result = f"{result[:name_end]} by ({label}) {result[after:]}"
    return result.strip()


def rfc3339(moment: datetime) -> str:
    """A time as Prometheus' API takes it (UTC, seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def window(starts_at: datetime) -> dict[str, str]:
    """The range an alert's metrics are read over: ``start``, ``end``, ``step`` and ``time``.

    Anchored at the alert's start, not at the clock: an alert delivered late or
    re-sent still shows the hour in which it began (``time`` is its start, for
    instant queries).
    """
    return {
        "start": rfc3339(starts_at - BEFORE),
        "end": rfc3339(starts_at + AFTER),
        "step": STEP,
        "time": rfc3339(starts_at),
    }


def expression_in(url: str) -> str:
    """The PromQL expression in a Prometheus generator URL (``…/graph?g0.expr=…``), or ""."""
    try:
        query = parse_qs(urlsplit(url).query)
    except ValueError:
        return ""
    values = query.get("g0.expr") or query.get("expr") or []
    return values[0].strip() if values else ""

"""A metric tool result as a small chart: inline SVG drawn on the server, no script.

Design constraint: the page's Content-Security-Policy allows only its own script and
style, and every tool result is untrusted. So the chart is SVG markup built here from
numbers alone: the result is validated as a Prometheus query result (pydantic), every
coordinate is a float this module computed, every text (a series' labels, the query)
goes through ``markupsafe.escape``, and colours come from classes in the page's own
stylesheet (no ``style`` attribute, which the policy would block). A result that is not
a Prometheus vector or matrix gets no chart; its text stays as it is, folded below.

A matrix (``execute_range_query``) is one line per series over time; a vector
(``execute_query``) is one bar per series. A query that compares with a number
(``... > 1``, an alert rule's expression) draws that number as the threshold.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from markupsafe import Markup, escape

from tarsy.evidence.promql import PrometheusResult, number, parse_result, threshold_of

MAX_SERIES = 8
WIDTH, HEIGHT = 480, 160
_PAD_LEFT, _PAD_RIGHT, _PAD_TOP, _PAD_BOTTOM = 52, 8, 8, 18
_BAR = 14
_VALUE_ROOM = 40


def _label(metric: dict[str, str]) -> str:
    shown = {k: v for k, v in metric.items() if k != "__name__"}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or metric.get("__name__", "{}")


def _fmt(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 10_000:
        return f"{value:.3g}"
    return f"{value:.2e}"


def _scale(low: float, high: float, threshold: float | None) -> tuple[float, float]:
    points = [low, high, *([threshold] if threshold is not None else [])]
    low, high = min(*points, 0.0), max(points)
    return (low, high) if high > low else (low, low + 1.0)


def _y(value: float, low: float, high: float) -> float:
    usable = HEIGHT - _PAD_TOP - _PAD_BOTTOM
    return round(_PAD_TOP + usable * (1 - (value - low) / (high - low)), 2)


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M")


def _threshold_line(threshold: float | None, low: float, high: float) -> list[str]:
    if threshold is None:
        return []
    y = _y(threshold, low, high)
    return [
        f'<line class="threshold" x1="{_PAD_LEFT}" x2="{WIDTH - _PAD_RIGHT}" y1="{y}" y2="{y}"/>',
        f'<text class="axis" x="{WIDTH - _PAD_RIGHT}" y="{y - 3}" text-anchor="end">'
        f"threshold {escape(_fmt(threshold))}</text>",
    ]


def _axes(low: float, high: float) -> list[str]:
    return [
        f'<line class="axis" x1="{_PAD_LEFT}" x2="{_PAD_LEFT}" y1="{_PAD_TOP}" '
        f'y2="{HEIGHT - _PAD_BOTTOM}"/>',
        f'<text class="axis" x="{_PAD_LEFT - 4}" y="{_PAD_TOP + 8}" text-anchor="end">'
        f"{escape(_fmt(high))}</text>",
        f'<text class="axis" x="{_PAD_LEFT - 4}" y="{HEIGHT - _PAD_BOTTOM}" text-anchor="end">'
        f"{escape(_fmt(low))}</text>",
    ]


def _matrix(result: PrometheusResult, threshold: float | None) -> list[str] | None:
    lines: list[tuple[str, list[tuple[float, float]]]] = []
    for sample in result.result[:MAX_SERIES]:
        points = [(t, v) for t, text in sample.values or [] if (v := number(text)) is not None]
        if points:
            lines.append((_label(sample.metric), points))
    if not lines:
        return None
    times = [t for _, points in lines for t, _ in points]
    values = [v for _, points in lines for _, v in points]
    low, high = _scale(min(values), max(values), threshold)
    start, end = min(times), max(times)
    span = (end - start) or 1.0
    usable = WIDTH - _PAD_LEFT - _PAD_RIGHT
    parts = _axes(low, high)
    for index, (label, points) in enumerate(lines):
        coords = " ".join(
            f"{round(_PAD_LEFT + usable * (t - start) / span, 2)},{_y(v, low, high)}"
            for t, v in points
        )
        parts.append(
            f'<polyline class="series s{index}" points="{coords}"><title>{escape(label)}</title>'
            "</polyline>"
        )
    parts += _threshold_line(threshold, low, high)
    parts.append(
        f'<text class="axis" x="{_PAD_LEFT}" y="{HEIGHT - 4}">{escape(_time(start))} UTC</text>'
    )
    parts.append(
        f'<text class="axis" x="{WIDTH - _PAD_RIGHT}" y="{HEIGHT - 4}" text-anchor="end">'
        f"{escape(_time(end))} UTC</text>"
    )
    return parts + _legend([label for label, _ in lines])


def _vector(result: PrometheusResult, threshold: float | None) -> list[str] | None:
    bars: list[tuple[str, float]] = []
    for sample in result.result[:MAX_SERIES]:
        value = number(sample.value[1]) if sample.value is not None else None
        if value is not None:
            bars.append((_label(sample.metric), value))
    if not bars:
        return None
    low, high = _scale(min(v for _, v in bars), max(v for _, v in bars), threshold)
    # Room on the right for the value written after the longest bar.
    usable = WIDTH - _PAD_LEFT - _PAD_RIGHT - _VALUE_ROOM
    bottom = HEIGHT - _PAD_BOTTOM
    parts = [
        f'<line class="axis" x1="{_PAD_LEFT}" x2="{_PAD_LEFT + usable}" y1="{bottom}" '
        f'y2="{bottom}"/>',
        f'<text class="axis" x="{_PAD_LEFT}" y="{HEIGHT - 4}">{escape(_fmt(low))}</text>',
        f'<text class="axis" x="{_PAD_LEFT + usable}" y="{HEIGHT - 4}" text-anchor="end">'
        f"{escape(_fmt(high))}</text>",
    ]
    step = (HEIGHT - _PAD_TOP - _PAD_BOTTOM) / max(len(bars), 1)
    for index, (label, value) in enumerate(bars):
        zero = _PAD_LEFT + usable * (0 - low) / (high - low)
        end = _PAD_LEFT + usable * (value - low) / (high - low)
        x, width = round(min(zero, end), 2), round(abs(end - zero), 2)
        y = round(_PAD_TOP + index * step + (step - _BAR) / 2, 2)
        parts.append(
            f'<rect class="series s{index}" x="{x}" y="{y}" width="{width}" height="{_BAR}">'
            f"<title>{escape(label)}: {escape(_fmt(value))}</title></rect>"
        )
        parts.append(
            f'<text class="value" x="{round(max(zero, end) + 4, 2)}" y="{y + _BAR - 3}">'
            f"{escape(_fmt(value))}</text>"
        )
    if threshold is not None:
        x = round(_PAD_LEFT + usable * (threshold - low) / (high - low), 2)
        parts.append(f'<line class="threshold" x1="{x}" x2="{x}" y1="{_PAD_TOP}" y2="{bottom}"/>')
        parts.append(
            f'<text class="axis" x="{x + 3}" y="{_PAD_TOP + 8}">threshold '
            f"{escape(_fmt(threshold))}</text>"
        )
    return parts + _legend([label for label, _ in bars])


def _legend(labels: list[str]) -> list[str]:
    return [
        f'<text class="legend s{index}" x="{_PAD_LEFT}" y="{HEIGHT + 14 * (index + 1)}">'
        f"■ {escape(label)}</text>"
        for index, label in enumerate(labels)
    ]


def metric_chart(content: str, arguments: object = None) -> Markup | None:
    """An inline SVG chart of a Prometheus tool result; None when it is not one.

    Args:
        content: The tool result's text (prometheus-mcp-server's JSON).
        arguments: The call's arguments (a dict, or its JSON text); ``query`` gives
            the threshold and the chart's title.

    Returns:
        ``<svg>`` markup, safe to place in the page as it is.
    """
    result = parse_result(content)
    if result is None or not result.result:
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = None
    query = arguments.get("query") if isinstance(arguments, dict) else None
    query = query if isinstance(query, str) else ""
    threshold = threshold_of(query) if query else None
    drawn = _matrix(result, threshold) if result.resultType == "matrix" else None
    if result.resultType == "vector":
        drawn = _vector(result, threshold)
    if drawn is None:
        return None
    shown = min(len(result.result), MAX_SERIES)
    height = HEIGHT + 14 * shown + 6
    title = f"<title>{escape(query)}</title>" if query else ""
    more = ""
    if len(result.result) > MAX_SERIES:
        more = (
            f'<text class="axis" x="{WIDTH - _PAD_RIGHT}" y="{height - 4}" text-anchor="end">'
            f"first {MAX_SERIES} of {len(result.result)} series</text>"
        )
    return Markup(
        f'<svg class="metric-chart" role="img" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
        f"{title}{''.join(drawn)}{more}</svg>"
    )

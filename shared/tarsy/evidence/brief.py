"""The evidence brief: detections first, then each gathered result in compact form, sized (pure).

Design constraint: the brief must fit beside the conversation in the model's
context window (a small local model has 8K tokens in all), and a small model
reads the top of a long text best. So the detections come first, in full,
each pointing at the evidence it rests on (``[E3]``); then the results those
detections cite; then the rest in the order gathered. Each result is cut to
what a person would look at (a YAML object without its bookkeeping, a
Secret's key names only, Warning events one per line, the last lines of a
log), and what does not fit is named, not shown, so the model can fetch it
with its tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from tarsy.evidence import promql
from tarsy.evidence.catalog import Shape
from tarsy.evidence.gather import GatheredCall
from tarsy.evidence.parse import events, load_yaml
from tarsy.evidence.snapshot import Detection

# A rough count for budgeting text: tokenizers give about 3.5 characters per token on
# YAML and logs (the brief is measured, not tokenized, so it stays a pure function).
CHARS_PER_TOKEN = 3.5
LOG_LINES = 25
LOG_LINE_CHARS = 300
TABLE_ROWS = 30
SERIES_SHOWN = 10
SERIES_POINTS = 7
ITEM_CHARS = 2500
_BOOKKEEPING = ("managedFields", "uid", "resourceVersion", "generation", "selfLink")
_NOISY_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def evidence_label(call_id: str) -> str:
    """The short label of a gathered call in the brief (``gather-002`` → ``E3``)."""
    _, _, number = call_id.rpartition("-")
    return f"E{int(number) + 1}" if number.isdigit() else call_id


def _clean_object(body: dict[str, Any]) -> dict[str, Any]:
    """An object without the fields nobody reads when investigating."""
    cleaned = dict(body)
    metadata = dict(cleaned.get("metadata") or {})
    for key in _BOOKKEEPING:
        metadata.pop(key, None)
    annotations = dict(metadata.get("annotations") or {})
    for key in _NOISY_ANNOTATIONS:
        if key in annotations:
            annotations[key] = "(omitted: the applied configuration; see the findings)"
    if annotations:
        metadata["annotations"] = annotations
    cleaned["metadata"] = metadata
    if cleaned.get("kind") == "Secret":
        # Never show a Secret's values, even masked: its key names are the evidence.
        for field in ("data", "stringData"):
            if isinstance(cleaned.get(field), dict):
                cleaned[field] = sorted(cleaned[field])
    return cleaned


def _compact_object(text: str) -> str:
    body = load_yaml(text)
    if not isinstance(body, dict):
        return text
    return yaml.safe_dump(_clean_object(body), sort_keys=False, width=200).strip()


def _compact_events(text: str) -> str:
    seen: set[tuple[str, str, str]] = set()
    lines: list[str] = []
    for event in sorted(
        events(text, ""), key=lambda e: e.last_seen.timestamp() if e.last_seen else 0, reverse=True
    ):
        key = (str(event.object), event.reason, event.message)
        if event.type == "Normal" or key in seen:
            continue
        seen.add(key)
        when = event.last_seen.strftime("%Y-%m-%d %H:%M:%SZ") if event.last_seen else "?"
        count = f" (x{event.count})" if event.count > 1 else ""
        lines.append(f"{when} {event.reason} {event.object}: {event.message}{count}")
    return "\n".join(lines) if lines else "(no Warning events)"


def _compact_log(text: str) -> str:
    lines = [line[:LOG_LINE_CHARS] for line in text.splitlines() if line.strip()]
    if not lines:
        return "(empty log)"
    kept = lines[-LOG_LINES:]
    skipped = len(lines) - len(kept)
    head = [f"({skipped} earlier lines not shown)"] if skipped else []
    return "\n".join([*head, *kept])


def _compact_table(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= TABLE_ROWS + 1:
        return text.strip() or "(no rows)"
    return "\n".join([*lines[: TABLE_ROWS + 1], f"({len(lines) - TABLE_ROWS - 1} more rows)"])


def _figure(value: float) -> str:
    return f"{value:.3g}" if value == 0 or 0.001 <= abs(value) < 100_000 else f"{value:.3e}"


def _compact_metric(result: promql.PrometheusResult) -> str:
    """Each series on one line: its labels, a few evenly spaced points, its range."""
    lines: list[str] = []
    for sample in result.result[:SERIES_SHOWN]:
        points = sample.points()
        labels = ", ".join(f"{k}={v}" for k, v in sorted(sample.metric.items()))
        if not points:
            continue
        if sample.values is None:  # an instant query: one value, at the time asked
            lines.append(f"{{{labels}}} {_figure(points[0][1])}")
            continue
        every = max(1, (len(points) - 1) // (SERIES_POINTS - 1))
        shown = [*points[::every][: SERIES_POINTS - 1], points[-1]]
        values = [v for _, v in points]
        path = " · ".join(
            f"{datetime.fromtimestamp(t, UTC):%H:%M} {_figure(v)}" for t, v in dict(shown).items()
        )
        spread = f" (min {_figure(min(values))}, max {_figure(max(values))})"
        lines.append(f"{{{labels}}} {path}{spread if len(points) > 1 else ''}")
    more = len(result.result) - SERIES_SHOWN
    if more > 0:
        lines.append(f"({more} more series)")
    return "\n".join(lines) if lines else "(no series)"


def compact(shape: Shape, text: str, is_error: bool) -> str:
    """What the brief shows of one result of that ``shape``."""
    if is_error:
        return text.strip()[:500]
    metric = promql.parse_result(text) if text.lstrip().startswith("{") else None
    if metric is not None:
        shown = _compact_metric(metric)
    elif shape == "object":
        shown = _compact_object(text)
    elif shape == "events":
        shown = _compact_events(text)
    elif shape == "log":
        shown = _compact_log(text)
    else:
        shown = _compact_table(text)
    if len(shown) > ITEM_CHARS:
        shown = shown[:ITEM_CHARS] + "\n(cut here)"
    return shown


def _call_line(call: GatheredCall) -> str:
    arguments = json.dumps(call.result.arguments, sort_keys=True)
    return f"[{evidence_label(call.result.call_id)}] {call.result.name} {arguments}"


def findings_text(detections: Sequence[Detection]) -> str:
    """The detections as a numbered list, each with its kind and its evidence labels."""
    if not detections:
        return ""
    lines = []
    for n, detection in enumerate(detections, start=1):
        labels = ", ".join(evidence_label(e) for e in detection.evidence)
        cites = f" [{labels}]" if labels else ""
        lines.append(f"{n}. ({detection.severity.word}) {detection.finding}{cites}")
    return "\n".join(lines)


_FINDING_LINE = re.compile(r"^(\d+)\. (.+)$")


def parse_findings(text: str) -> dict[int, str]:
    """The findings :func:`findings_text` wrote, by number (what a model cites them by)."""
    found = (_FINDING_LINE.match(line) for line in text.splitlines())
    return {int(m.group(1)): m.group(2).strip() for m in found if m}


def evidence_text(
    calls: Sequence[GatheredCall], detections: Sequence[Detection], budget_chars: int
) -> str:
    """The gathered results, cited ones first, each compact, within ``budget_chars``."""
    cited = {e for d in detections for e in d.evidence}
    ordered = sorted(calls, key=lambda c: c.result.call_id not in cited)
    parts: list[str] = []
    omitted: list[str] = []
    used = 0
    for call in ordered:
        result = call.result
        block = f"{_call_line(call)}\n{compact(call.read_as, result.full_content, result.is_error)}"
        if used + len(block) > budget_chars:
            omitted.append(_call_line(call))
            continue
        parts.append(block)
        used += len(block) + 2
    if omitted:
        parts.append(_omitted_text(omitted, budget_chars - used))
    return "\n\n".join(parts)


def _omitted_text(omitted: Sequence[str], room: int) -> str:
    """What was gathered but not shown, named while there is room, then counted.

    The listing is part of the brief, so it keeps to the brief's budget too: a
    small model's opening is sized to what it reads in a minute.
    """
    head = "Gathered but not shown here (call the tool to read it):"
    if room < len(head) + 40:  # no room to name any: one line counts them
        return f"({len(omitted)} gathered calls not shown)"
    named: list[str] = []
    used = len(head)
    for line in omitted:
        if used + len(line) + 1 > room:
            break
        named.append(line)
        used += len(line) + 1
    rest = len(omitted) - len(named)
    tail = [f"({rest} more gathered calls)"] if rest else []
    return "\n".join([head, *named, *tail])


def brief_chars(
    tokens: int,
    context_window: int | None,
    window_share: float,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> int:
    """How many characters the brief may take: its budget, or a share of a small window."""
    if context_window is not None:
        tokens = min(tokens, int(context_window * window_share))
    return int(tokens * chars_per_token)

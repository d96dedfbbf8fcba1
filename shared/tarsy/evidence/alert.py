"""What an alert says about itself, read from the session's stored alert data (pure).

Design constraint: the alert data is untrusted text in the sender's shape.
Native sources store one alert with ``labels`` and ``annotations`` at the
top; a plain ``POST /alerts`` may carry a whole Alertmanager or Grafana
notification (``alerts: [...]`` with ``commonLabels``), or a flat object whose
own text fields (``{"namespace": ..., "pod": ...}``) are its labels. Only string values
are kept, and anything unreadable yields empty facts: the gather phase then
runs the collectors that need no label, or none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tarsy.evidence.snapshot import AlertFacts


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def first_alert(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The alert a notification is about: the first firing one, else the first; else ``data``.

    An Alertmanager or Grafana notification carries its alerts in ``alerts``; routing
    (:mod:`tarsy.config.routing`) and the evidence read the same one.
    """
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        return data
    items = [a for a in alerts if isinstance(a, Mapping)]
    firing = [a for a in items if a.get("status", "firing") == "firing"]
    return (firing or items or [data])[0]


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def alert_facts(alert_data: str) -> AlertFacts:
    """The name, labels, annotations and start of the alert in ``alert_data``.

    Args:
        alert_data: The session's alert data as stored (JSON text, or free text).

    Returns:
        The facts found; empty when the data is not a JSON object.
    """
    # Imported here: routing (ingest, the api) reads only first_alert; the facts are the step's.
    from tarsy.evidence.snapshot import AlertFacts

    try:
        data = json.loads(alert_data)
    except (ValueError, RecursionError):
        return AlertFacts()
    if not isinstance(data, Mapping):
        return AlertFacts()
    alert = first_alert(data)
    labels = {**_strings(data.get("commonLabels")), **_strings(alert.get("labels"))}
    if not labels and not isinstance(alert.get("labels"), Mapping):
        # A plain JSON alert without a labels mapping: its own text fields name things.
        labels = _strings(alert)
    annotations = {
        **_strings(data.get("commonAnnotations")),
        **_strings(alert.get("annotations")),
    }
    name = labels.get("alertname") or str(alert.get("alertname") or alert.get("title") or "")
    starts = _time(alert.get("startsAt")) or _time(alert.get("starts_at"))
    return AlertFacts(
        name=name,
        labels=labels,
        annotations=annotations,
        starts_at=starts,
        expression=_expression(alert, labels),
    )


def _expression(alert: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """The rule's PromQL: an ``expr`` field or label, else the generator URL's ``g0.expr``."""
    from tarsy.evidence.promql import expression_in  # the step's, as alert_facts

    for value in (alert.get("expr"), labels.get("expr")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    for key in ("generatorURL", "generator_url"):
        url = alert.get(key)
        if isinstance(url, str) and (found := expression_in(url)):
            return found
    return ""

"""A scenario's metrics history: compact knots in, OpenMetrics for promtool out.

The real Prometheus judges the result in ``tests/integration/test_prometheus.py``
(backfilled, queried, the alert rules evaluated); these tests pin the arithmetic
and the scenario files' rules.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from pydantic import ValidationError

from tarsy.config import load_config
from tarsy.config.routing import alert_fields, alert_labels
from tarsy.settings import Settings
from tarsy_dev.demo_cluster import load_scenario, scenario_names
from tarsy_dev.demo_cluster.metrics import ScenarioMetrics, Series, openmetrics, parse_offset
from tarsy_dev.demo_cluster.models import PROMETHEUS_TOOL_NAMES

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
START = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
METRICS_SCENARIOS = [n for n in scenario_names() if load_scenario(n).metrics is not None]
# The scenarios that cannot be solved without metrics (tagged so); others only have them.
NEEDS_METRICS = [n for n in METRICS_SCENARIOS if "metrics" in load_scenario(n).tags]


def first_alert(data: object) -> dict[str, Any]:
    """The alert of a scenario's data: itself, or the first of a notification's ``alerts``."""
    assert isinstance(data, dict)
    alerts = data.get("alerts")
    return dict(alerts[0]) if isinstance(alerts, list) else data


def history(*series: dict[str, Any], interval: int = 60) -> ScenarioMetrics:
    return ScenarioMetrics.model_validate(
        {"start": START, "scrape_interval": interval, "series": list(series)}
    )


def samples(text: str, name: str) -> list[tuple[str, float, float]]:
    """(labels, value, timestamp) of every sample line of ``name``."""
    found = []
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(\{{[^}}]*\}})? (\S+) (\S+)", line)
        if match:
            found.append((match.group(1) or "", float(match.group(2)), float(match.group(3))))
    return found


def test_offsets_read_hours_minutes_and_seconds() -> None:
    assert parse_offset("1h5m30s").total_seconds() == 3930
    assert parse_offset("0m").total_seconds() == 0
    with pytest.raises(ValueError, match="not an offset"):
        parse_offset("5 minutes")


def test_a_gauge_is_linear_between_knots_and_held_outside_them() -> None:
    text = openmetrics(
        history({"name": "mem", "type": "gauge", "values": {"10m": 100, "20m": "1Ki"}}), NOW
    )
    values = [v for _, v, _ in samples(text, "mem")]
    assert len(values) == 61
    assert values[0] == values[10] == 100
    assert values[15] == (100 + 1024) / 2
    assert values[20] == values[60] == 1024


def test_a_counter_integrates_its_rate_and_ends_in_total() -> None:
    text = openmetrics(
        history({"name": "reqs", "type": "counter", "values": {"0m": 2, "30m": 2, "31m": 4}}), NOW
    )
    [first, second, *_, last] = samples(text, "reqs_total")
    assert (first[1], second[1]) == (0, 120)
    assert second[2] - first[2] == 60
    # 30 minutes at 2/s, one minute ramping to 4/s, 29 minutes at 4/s.
    assert last[1] == 30 * 60 * 2 + 60 * 3 + 29 * 60 * 4
    assert "# TYPE reqs counter" in text and text.endswith("# EOF\n")


def test_a_counter_may_be_given_by_its_totals() -> None:
    text = openmetrics(
        history({"name": "restarts", "type": "counter", "totals": {"0m": 0, "30m": 0, "31m": 1}}),
        NOW,
    )
    values = [v for _, v, _ in samples(text, "restarts_total")]
    assert values[30] == 0 and values[31] == values[-1] == 1


def test_a_histogram_has_cumulative_buckets_count_and_sum() -> None:
    series = {
        "name": "latency",
        "type": "histogram",
        "labels": {"service": "api"},
        "rate": {"0m": 10},
        "buckets": [0.1, 1],
        "shares": {"0m": [0.5, 0.9]},
    }
    text = openmetrics(history(series), NOW)
    buckets = samples(text, "latency_bucket")
    last = {labels: value for labels, value, t in buckets if t == NOW.timestamp()}
    requests = 10 * 3600
    assert last == {
        '{le="0.1",service="api"}': requests * 0.5,
        '{le="1",service="api"}': requests * 0.9,
        '{le="+Inf",service="api"}': requests,
    }
    assert samples(text, "latency_count")[-1][1] == requests


def test_a_series_exists_only_from_its_start_until_its_end() -> None:
    text = openmetrics(
        history(
            {"name": "up", "type": "gauge", "values": {"0m": 1}, "from": "10m", "until": "20m"}
        ),
        NOW,
    )
    times = [t for _, _, t in samples(text, "up")]
    assert times[0] == START.timestamp() + 600 and times[-1] == START.timestamp() + 1200


@pytest.mark.parametrize(
    ("series", "message"),
    [
        ({"name": "x_total", "type": "counter", "values": {"0m": 1}}, "not a metric family"),
        ({"name": "x", "type": "gauge", "rate": {"0m": 1}}, "a gauge takes values only"),
        ({"name": "x", "type": "counter", "values": {"0m": -1}}, "cannot be negative"),
        ({"name": "x", "type": "counter", "totals": {"0m": 2, "1m": 1}}, "cannot fall"),
        (
            {"name": "x", "type": "histogram", "rate": {"0m": 1}, "buckets": [1, 0.5],
             "shares": {"0m": [0.5, 1]}},
            "buckets must rise",
        ),
        ({"name": "x", "type": "gauge", "values": {"soon": 1}}, "not an offset"),
        ({"name": "x", "type": "gauge", "values": {"0m": "lots"}}, "not a number"),
        ({"name": "x", "type": "gauge", "labels": {"le": "1"}, "values": {"0m": 1}}, "label names"),
    ],
)  # fmt: skip
def test_a_bad_series_is_refused_with_the_reason(series: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        history(series)


def test_a_series_given_twice_is_refused() -> None:
    one = {"name": "x", "type": "gauge", "labels": {"a": "1"}, "values": {"0m": 1}}
    with pytest.raises(ValidationError, match="given twice"):
        history(one, one)


# ─── the bundled scenarios ────────────────────────────────────────────────────


def test_at_least_three_scenarios_need_metrics_and_their_playbooks_query_prometheus() -> None:
    assert len(NEEDS_METRICS) >= 3
    for name in NEEDS_METRICS:
        steps = load_scenario(name).playbook.steps
        assert any(step.tool in PROMETHEUS_TOOL_NAMES for step in steps), name


def test_the_metrics_windows_of_the_scenarios_never_overlap() -> None:
    """One Prometheus holds them all: a query at one incident's time sees only that one."""
    windows = []
    for name in METRICS_SCENARIOS:
        scenario = load_scenario(name)
        assert scenario.metrics is not None
        start, end = scenario.metrics.window(scenario.cluster.now)
        windows.append((start, end, name))
    windows.sort()
    for (_, end, first), (start, _, second) in pairwise(windows):
        assert end < start, f"{first} and {second} overlap"


@pytest.mark.parametrize("name", METRICS_SCENARIOS)
def test_a_scenarios_alert_carries_the_rule_its_history_fires(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.metrics is not None
    data = first_alert(scenario.alert.data)
    [rule] = [r for r in scenario.metrics.rules if r.alert == data["labels"]["alertname"]]
    [expr] = parse_qs(urlparse(data["generatorURL"]).query)["g0.expr"]
    assert expr == rule.expr
    start, end = scenario.metrics.window(scenario.cluster.now)
    assert start < datetime.fromisoformat(data["startsAt"]) <= end


@pytest.mark.parametrize("name", NEEDS_METRICS)
def test_a_scenario_that_needs_metrics_runs_the_metrics_chain(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.metrics is not None
    data = scenario.alert.data
    assert isinstance(data, dict)
    [rule] = [r for r in scenario.metrics.rules if r.alert == data["labels"]["alertname"]]
    [expr] = parse_qs(urlparse(data["generatorURL"]).query)["g0.expr"]
    assert expr == rule.expr
    start, end = scenario.metrics.window(scenario.cluster.now)
    assert start < datetime.fromisoformat(data["startsAt"]) <= end
    config = load_config(Settings())
    chain, routing = config.route(
        scenario.alert.alert_type, alert_labels(data), fields=alert_fields(data)
    )
    assert (chain, routing.rule) == ("metrics", "metrics-expression")


@pytest.mark.parametrize("name", METRICS_SCENARIOS)
def test_a_metrics_scenarios_history_renders_and_its_series_are_distinct(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.metrics is not None
    text = openmetrics(scenario.metrics, scenario.cluster.now)
    assert text.endswith("# EOF\n")
    assert len(scenario.metrics.rules_file(name)["groups"][0]["rules"]) >= 1


def test_a_series_builds_from_python_names_too() -> None:
    series = Series(name="g", type="gauge", values={"0m": 1}, from_="5m")
    assert series.alive(300) and not series.alive(299)

"""Metric evidence: the alert's PromQL, its breakdowns and window, results read and briefed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote_plus

import pytest
import yaml

from tarsy.config.loader import builtin_config_text
from tarsy.evidence import promql
from tarsy.evidence.alert import alert_facts
from tarsy.evidence.brief import compact
from tarsy.evidence.catalog import Collector
from tarsy.evidence.gather import next_round
from tarsy.evidence.parse import add_result
from tarsy.evidence.snapshot import AlertFacts, Snapshot
from tarsy.evidence.targets import targets_of
from tarsy.llm.base import ToolDefinition
from tarsy.tools.base import ToolListing

STARTS = datetime(2026, 3, 2, 14, 30, tzinfo=UTC)
RULE = 'sum(rate(http_errors_total{job="api",code=~"5.."}[5m])) / sum(rate(http_total{job="api"}[5m])) > 0.05'  # noqa: E501


def test_the_final_comparison_is_split_from_the_expression() -> None:
    query, operator, threshold = promql.split_comparison(RULE)
    assert query.endswith('sum(rate(http_total{job="api"}[5m]))')
    assert (operator, threshold) == (">", 0.05)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('rate(x{path=">"}[5m]) >= 3', ('rate(x{path=">"}[5m])', ">=", 3.0)),
        ("up == bool 0", ("up", "==", 0.0)),
        ("a > b", ("a > b", "", None)),
        ("sum(rate(x[5m]))", ("sum(rate(x[5m]))", "", None)),
        ("x < 1e3", ("x", "<", 1000.0)),
    ],
)
def test_only_a_comparison_with_a_number_at_the_top_level_is_a_threshold(
    expression: str, expected: tuple[str, str, float | None]
) -> None:
    assert promql.split_comparison(expression) == expected


@pytest.mark.parametrize(
    ("expression", "label", "expected"),
    [
        (
            "sum(rate(a[5m])) / sum (rate(b[5m]))",
            "version",
            "sum by (version) (rate(a[5m])) / sum by (version) (rate(b[5m]))",
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(d_bucket[5m])))",
            "pod",
            "histogram_quantile(0.99, sum by (le, pod) (rate(d_bucket[5m])))",
        ),
        ("sum(rate(x[5m])) by (job)", "pod", "sum(rate(x[5m])) by (job, pod)"),
        ("max without (instance, pod) (up)", "pod", "max without (instance) (up)"),
        ("sum by (pod) (x)", "pod", "sum by (pod) (x)"),
        ("rate(x[5m])", "pod", "rate(x[5m])"),
        (
            'count(kube_pod_info{node=~"a|b"})',
            "node",
            'count by (node) (kube_pod_info{node=~"a|b"})',
        ),
        ("sum(x)", "not a label!", "sum(x)"),
    ],
)
def test_every_aggregation_keeps_the_breakdown_label(
    expression: str, label: str, expected: str
) -> None:
    assert promql.grouped_by(expression, label) == expected


def test_the_window_is_the_hour_before_the_alert_and_a_quarter_after() -> None:
    assert promql.window(STARTS) == {
        "start": "2026-03-02T13:30:00Z",
        "end": "2026-03-02T14:45:00Z",
        "step": "60s",
        "time": "2026-03-02T14:30:00Z",
    }


def test_the_expression_comes_from_prometheus_generator_url() -> None:
    url = f"http://prometheus:9090/graph?g0.expr={quote_plus(RULE)}&g0.tab=1"
    data = {"labels": {"alertname": "HighErrors"}, "generatorURL": url, "startsAt": "x"}
    assert alert_facts(json.dumps(data)).expression == RULE


def test_an_expr_field_wins_over_the_generator_url() -> None:
    data = {"alertname": "X", "expr": "up == 0", "generatorURL": "http://p/graph?g0.expr=other"}
    assert alert_facts(json.dumps(data)).expression == "up == 0"


ALERT = AlertFacts(
    name="HighErrors", labels={"namespace": "shop", "service": "api"}, starts_at=STARTS,
    expression=RULE,
)  # fmt: skip


def test_the_alert_expression_target_carries_the_query_and_the_window() -> None:
    [target] = targets_of("alert.expression", ALERT, Snapshot())
    assert target["query"] == promql.split_comparison(RULE)[0]
    assert target["start"] == "2026-03-02T13:30:00Z" and target["step"] == "60s"
    assert target["label.service"] == "api"


def test_a_breakdown_target_per_label_that_changes_the_query() -> None:
    targets = targets_of("alert.expression.by:version,pod", ALERT, Snapshot())
    assert [t["by"] for t in targets] == ["version", "pod"]
    assert targets[0]["query"].startswith("sum by (version) (rate(http_errors_total")
    plain = ALERT.model_copy(update={"expression": "rate(x[5m]) > 1"})
    assert targets_of("alert.expression.by:version", plain, Snapshot()) == []


def test_an_alert_without_an_expression_or_a_start_has_no_metric_target() -> None:
    assert (
        targets_of("alert.expression", ALERT.model_copy(update={"expression": ""}), Snapshot())
        == []
    )
    assert targets_of("alert.pods", ALERT.model_copy(update={"starts_at": None}), Snapshot()) == []


@pytest.mark.parametrize(
    ("labels", "pods"),
    [
        ({"namespace": "shop", "pod": "api-7d.x-0"}, "api-7d[.]x-0"),
        ({"namespace": "shop", "deployment": "api"}, "api-.*"),
        ({"namespace": "shop", "service": "api"}, "api-.*"),
    ],
)
def test_the_alert_pods_are_the_named_pod_else_its_workloads_or_services_pods(
    labels: dict[str, str], pods: str
) -> None:
    alert = AlertFacts(name="X", labels=labels, starts_at=STARTS)
    [target] = targets_of("alert.pods", alert, Snapshot())
    assert target["pods"] == pods and target["namespace"] == "shop"


def _builtin_metric_collectors() -> dict[str, Collector]:
    raw = yaml.safe_load(builtin_config_text())["collectors"]
    return {
        name: Collector.model_validate(entry)
        for name, entry in raw.items()
        if entry.get("server") == "prometheus"
    }


def test_the_builtin_metric_collectors_plan_range_queries_that_say_what_they_measure() -> None:
    listing = ToolListing(tools=[ToolDefinition(name="prometheus.execute_range_query")])
    planned = next_round(_builtin_metric_collectors(), ALERT, Snapshot(), set(), listing, 40)
    measures = [p.measures for p in planned]
    assert measures[:4] == ["alert", "alert_by", "alert_by", "alert_by"]
    assert set(measures[4:]) == {
        "cpu_usage", "cpu_throttled_ratio", "cpu_limit", "memory_working_set", "memory_limit",
        "restarts", "request_rate",
    }  # fmt: skip
    memory = next(p for p in planned if p.measures == "memory_working_set")
    assert 'namespace="shop",pod=~"api-.*"' in memory.arguments["query"]
    assert memory.arguments["start"] == "2026-03-02T13:30:00Z"


MATRIX = json.dumps(
    {
        "resultType": "matrix",
        "result": [
            {"metric": {"version": "2.0"},
             "values": [[1772458200 + 60 * n, str(0.001 * n)] for n in range(30)]},
            {"metric": {"version": "1.9"}, "values": [[1772458200, "NaN"], [1772458260, "0.002"]]},
        ],
    }
)  # fmt: skip


def test_a_metric_result_becomes_series_that_say_what_they_measure() -> None:
    snapshot = Snapshot()
    add_result(
        snapshot, "promql", {"query": "sum by (version) (x)"}, MATRIX, "gather-004",
        is_error=False, measures="alert_by",
    )  # fmt: skip
    first, second = snapshot.series
    assert first.measures == "alert_by" and first.query == "sum by (version) (x)"
    assert len(first.points) == 30 and first.source == "gather-004"
    assert second.points == [(1772458260.0, 0.002)]  # NaN is no sample


def test_a_result_without_a_measure_is_not_read_as_series() -> None:
    snapshot = Snapshot()
    add_result(snapshot, "promql", {}, MATRIX, "g-1", is_error=False)
    assert snapshot.series == []


def test_the_brief_shows_each_series_on_one_line_with_a_few_points_and_its_range() -> None:
    shown = compact("promql", MATRIX, is_error=False).splitlines()
    assert len(shown) == 2
    assert shown[0].startswith("{version=2.0} 13:30 0 · ")
    assert shown[0].endswith("13:59 0.029 (min 0, max 0.029)")
    assert shown[0].count("·") == 6
    assert shown[1] == "{version=1.9} 13:31 0.002"

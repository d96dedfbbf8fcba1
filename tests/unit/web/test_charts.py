"""A metric tool result drawn as inline SVG: numbers in, escaped text, no script, no style."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from tarsy.evidence.promql import parse_result, threshold_of
from tarsy.web.charts import MAX_SERIES, metric_chart

SCRIPT = "<script>alert(1)</script>"


def matrix(*series: tuple[dict[str, str], list[float]]) -> str:
    return json.dumps(
        {
            "resultType": "matrix",
            "result": [
                {
                    "metric": labels,
                    "values": [[1795513500 + 300 * i, str(v)] for i, v in enumerate(vs)],
                }
                for labels, vs in series
            ],
        }
    )


def vector(*series: tuple[dict[str, str], float]) -> str:
    return json.dumps(
        {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [1795516800, str(v)]} for labels, v in series],
        }
    )


def svg_of(chart: object) -> ET.Element:
    assert chart is not None
    return ET.fromstring(str(chart))


NS = "{http://www.w3.org/2000/svg}"


def test_a_range_query_is_one_line_per_series_with_the_querys_threshold() -> None:
    content = matrix(
        ({"version": "5.2.1"}, [0.25, 0.25, 2.37, 2.45]),
        ({"version": "5.3.0"}, [0.2, 0.2, 0.2, 0.2]),
    )
    query = "histogram_quantile(0.99, sum by (le, version) (rate(x_bucket[5m]))) > 1"
    svg = svg_of(metric_chart(content, {"query": query}))
    lines = svg.findall(f"{NS}polyline")
    assert [line.get("class") for line in lines] == ["series s0", "series s1"]
    first = [tuple(map(float, p.split(","))) for p in (lines[0].get("points") or "").split()]
    assert len(first) == 4
    assert first[0][1] > first[-1][1]  # higher values are drawn higher up
    assert svg.findall(f"{NS}line[@class='threshold']")
    texts = "".join(t.text or "" for t in svg.iter(f"{NS}text"))
    assert "threshold 1" in texts and "version=5.2.1" in texts and "UTC" in texts
    assert svg.find(f"{NS}title") is not None and svg.find(f"{NS}title").text == query  # type: ignore[union-attr]


def test_an_instant_query_is_one_bar_per_series() -> None:
    content = vector(({"pod": "a"}, 0.56), ({"pod": "b"}, 0.01))
    svg = svg_of(metric_chart(content, json.dumps({"query": "ratio"})))
    bars = svg.findall(f"{NS}rect")
    assert len(bars) == 2
    assert float(bars[0].get("width") or 0) > float(bars[1].get("width") or 0)


def test_labels_and_queries_are_escaped_and_nothing_active_is_drawn() -> None:
    content = vector(({"pod": SCRIPT, "on": 'x" onload="alert(1)'}, 1.0))
    chart = str(metric_chart(content, {"query": f"{SCRIPT} > 0.5"}))
    assert "<script" not in chart and "onload=" not in chart.replace("onload=&#34;", "")
    assert not re.search(r"<[^>]*\son\w+\s*=", chart)
    assert "style=" not in chart
    assert "&lt;script&gt;" in chart
    svg_of(chart)  # still well-formed


def test_anything_but_a_prometheus_vector_or_matrix_gets_no_chart() -> None:
    assert metric_chart("pods: 3 running") is None
    assert metric_chart(json.dumps({"resultType": "scalar", "result": [1, "2"]})) is None
    assert metric_chart(json.dumps({"resultType": "vector", "result": []})) is None
    assert metric_chart(vector(({"pod": "a"}, float("nan")))) is None
    assert parse_result("{") is None


def test_a_comparison_at_the_end_of_the_query_is_the_threshold() -> None:
    assert threshold_of("rate(x[5m]) > 0.02") == 0.02
    assert threshold_of("(a / b) >= 90)") == 90
    assert threshold_of("sum(rate(x[5m]))") is None


def test_many_series_are_cut_to_the_first_few_and_the_chart_says_so() -> None:
    content = vector(*(({"pod": f"p{i}"}, float(i)) for i in range(MAX_SERIES + 3)))
    chart = str(metric_chart(content))
    assert chart.count("<rect") == MAX_SERIES
    assert f"first {MAX_SERIES} of {MAX_SERIES + 3} series" in chart

"""Metric detections on series built here: steps, parts out of line, resources at their limits."""

from __future__ import annotations

from tarsy.evidence.detections import detect, metrics
from tarsy.evidence.snapshot import AlertFacts

from .cluster import T0, pod, replica_set, series, snapshot

MI = 2**20
RATIO_RULE = "sum(rate(errors_total[5m])) / sum(rate(requests_total[5m])) > 0.02"


def _alert(expression: str = RATIO_RULE) -> AlertFacts:
    return AlertFacts(
        name="HighErrorRatio", labels={"namespace": "orders"}, starts_at=T0, expression=expression
    )


def test_a_step_across_the_threshold_names_its_time_and_the_replica_set_created_then() -> None:
    # Flat at 0.002 for 40 minutes, then 0.05 from 10 minutes before the alert started.
    values = [0.002] * 8 + [0.05] * 8
    cluster = snapshot(
        series("alert", values, start=-50, step=5),
        replica_set("api-7c9", "api", 4, {}, created=-11),
        replica_set("api-5d2", "api", 3, {}, created=-600),
        alert=_alert(),
    )
    [found] = metrics.level_shift(cluster)
    assert "from about 0.002 to 0.05 at 09:50 UTC" in found.finding
    assert "fires > 0.02" in found.finding
    assert "ReplicaSet api-7c9 was created (09:49 UTC)" in found.finding
    assert found.evidence == ["query-alert-all", "get-replicaset-api-7c9"]
    assert found.severity == 1


def test_a_step_with_no_rollout_near_it_is_a_symptom() -> None:
    cluster = snapshot(series("alert", [1.0] * 8 + [9.0] * 6), alert=_alert("rate(x[5m]) > 5"))
    [found] = metrics.level_shift(cluster)
    assert found.severity == 2
    assert "was created" not in found.finding


def test_noise_around_one_level_is_no_step() -> None:
    values = [0.010, 0.012, 0.011, 0.009, 0.010, 0.013, 0.011, 0.010, 0.012]
    assert metrics.level_shift(snapshot(series("alert", values), alert=_alert())) == []


def test_a_fall_below_a_lower_bound_rule_is_a_step_too() -> None:
    cluster = snapshot(
        series("alert", [100.0] * 6 + [10.0] * 6), alert=_alert("sum(rate(orders_total[5m])) < 20")
    )
    [found] = metrics.level_shift(cluster)
    assert "from about 100 to 10" in found.finding


def test_only_one_version_crossing_the_threshold_is_out_of_line_and_says_since_when() -> None:
    query = "by version"
    stable = series("alert_by", [0.002] * 13, start=-60, query=query, version="1.4.0")
    canary = series("alert_by", [0.0] * 6 + [0.45] * 7, start=-60, query=query, version="1.5.0")
    [found] = metrics.out_of_line(snapshot(stable, canary, alert=_alert()))
    assert found.finding == (
        "By version, only version=1.5.0 at 0.45 since 09:30 UTC crosses the alert's threshold "
        "(> 0.02); the other stays at 0.002."
    )
    assert found.evidence == [canary.source]
    assert found.severity == 1


def test_when_most_parts_cross_the_threshold_nothing_is_out_of_line() -> None:
    query = "by pod"
    parts = [
        series("alert_by", [0.5] * 6, query=query, pod="a"),
        series("alert_by", [0.4] * 6, query=query, pod="b"),
        series("alert_by", [0.001] * 6, query=query, pod="c"),
    ]
    assert metrics.out_of_line(snapshot(*parts, alert=_alert())) == []


def test_without_a_threshold_one_part_far_above_the_median_is_out_of_line() -> None:
    query = "by instance"
    parts = [
        series("alert_by", [2.0] * 6, query=query, instance="10.0.0.1:9100"),
        series("alert_by", [2.2] * 6, query=query, instance="10.0.0.2:9100"),
        series("alert_by", [30.0] * 6, query=query, instance="10.0.0.3:9100"),
    ]
    alert = _alert("histogram_quantile(0.99, sum by (le) (rate(latency_bucket[5m])))")
    [found] = metrics.out_of_line(snapshot(*parts, alert=alert))
    assert "only instance=10.0.0.3:9100 at 30" in found.finding
    assert "is far above the others; the other 2 stay at 2 to 2.2" in found.finding


def test_a_part_that_ended_before_the_alert_is_not_compared() -> None:
    query = "by pod"
    replaced = series("alert_by", [0.001] * 4, start=-60, query=query, pod="old-0")
    current = [series("alert_by", [0.4] * 4, start=-15, query=query, pod=p) for p in ("a", "b")]
    assert metrics.out_of_line(snapshot(replaced, *current, alert=_alert())) == []


def test_parts_of_the_same_size_are_not_out_of_line() -> None:
    query = "by pod"
    parts = [series("alert_by", [v] * 6, query=query, pod=p) for p, v in [("a", 2), ("b", 3)]]
    alert = _alert("sum(rate(x[5m]))")
    assert metrics.out_of_line(snapshot(*parts, alert=alert)) == []


def test_memory_near_its_limit_names_the_share_and_the_figures() -> None:
    cluster = snapshot(
        series("memory_working_set", [400 * MI] * 5 + [490 * MI], pod="worker-1"),
        series("memory_limit", [512 * MI] * 6, pod="worker-1"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding.startswith("Pod worker-1 uses 96% of its memory limit (490Mi of 512Mi)")
    assert found.subject.name == "worker-1" and found.subject.namespace == "orders"
    assert found.severity == 1


def test_memory_that_only_grows_is_projected_to_its_limit() -> None:
    # 200Mi to 320Mi over 50 minutes: 2.4Mi a minute, 192Mi left of 512Mi: 80 minutes.
    grows = [200 * MI + n * 12 * MI for n in range(11)]
    cluster = snapshot(
        series("memory_working_set", grows, start=-60, step=5, pod="feed-0"),
        series("memory_limit", [512 * MI] * 11, pod="feed-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert "grows without falling, from 200Mi at 09:00 UTC to 320Mi at 09:50 UTC" in found.finding
    assert "reaches its 512Mi limit in about 80 min" in found.finding


def test_memory_at_its_limit_after_a_climb_under_level_load_says_how_it_got_there() -> None:
    climb = [200 * MI + n * 30 * MI for n in range(11)]  # 200Mi to 500Mi, never falling
    cluster = snapshot(
        series("memory_working_set", climb, start=-60, step=5, pod="feed-0"),
        series("memory_limit", [512 * MI] * 11, pod="feed-0"),
        series("cpu_usage", [0.2, 0.22, 0.21, 0.2, 0.22, 0.21] * 2, start=-60, pod="feed-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding == (
        "Pod feed-0 uses 98% of its memory limit (500Mi of 512Mi) at 09:50 UTC; it grew "
        "without falling from 200Mi at 09:00 UTC, while its CPU use stayed level (200m-220m)."
    )
    # Load that comes and goes is not level: the climb is stated, the load is not.
    busy = snapshot(
        series("memory_working_set", climb, start=-60, step=5, pod="feed-0"),
        series("memory_limit", [512 * MI] * 11, pod="feed-0"),
        series("cpu_usage", [0.2, 0.9] * 6, start=-60, pod="feed-0"),
        alert=_alert(),
    )
    [loaded] = metrics.resource_saturation(busy)
    assert loaded.finding.endswith("it grew without falling from 200Mi at 09:00 UTC.")


def test_memory_at_its_limit_after_ups_and_downs_states_no_climb() -> None:
    wave = [200 * MI, 480 * MI, 300 * MI, 500 * MI]
    cluster = snapshot(
        series("memory_working_set", wave, pod="api-0"),
        series("memory_limit", [512 * MI] * 4, pod="api-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert "grew" not in found.finding


def test_memory_that_comes_and_goes_is_not_a_leak() -> None:
    wave = [200 * MI, 260 * MI, 210 * MI, 300 * MI, 220 * MI, 330 * MI]
    cluster = snapshot(
        series("memory_working_set", wave, pod="api-0"),
        series("memory_limit", [512 * MI] * 6, pod="api-0"),
        alert=_alert(),
    )
    assert metrics.resource_saturation(cluster) == []


def test_throttling_names_the_share_of_periods_the_limit_and_the_use() -> None:
    cluster = snapshot(
        series("cpu_throttled_ratio", [0.05] * 6 + [0.6] * 6, pod="pricing-0"),
        series("cpu_limit", [0.5] * 12, pod="pricing-0"),
        series("cpu_usage", [0.2] * 6 + [0.49] * 6, pod="pricing-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding == (
        "Pod pricing-0 is CPU-throttled in 60% of its CPU periods under its 500m CPU limit, "
        "using 490m."
    )
    assert len(found.evidence) == 3


def test_a_pod_at_its_cpu_limit_without_throttling_figures_is_a_symptom() -> None:
    cluster = snapshot(
        series("cpu_usage", [0.95] * 6, pod="batch-0"),
        series("cpu_limit", [1.0] * 6, pod="batch-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding == "Pod batch-0 uses 95% of its CPU limit (950m of 1)."
    assert found.severity == 2


def test_restarts_within_the_window_are_counted() -> None:
    cluster = snapshot(
        series("restarts", [3, 3, 4, 5, 5, 6], start=-60, pod="api-0"), alert=_alert()
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding == "Pod api-0 restarted 3 times between 09:00 UTC and 09:25 UTC."


def test_metric_findings_join_the_others_likely_causes_first() -> None:
    cluster = snapshot(
        pod("api-0"),
        series("restarts", [0, 1], pod="api-0"),
        series("cpu_throttled_ratio", [0.9] * 6, pod="api-0"),
        alert=_alert(),
    )
    checks = [d.check for d in detect(cluster)]
    assert checks == ["resource_saturation", "resource_saturation"]
    assert [d.severity for d in detect(cluster)] == [1, 2]


def test_a_climb_under_level_requests_says_the_load_did_not_rise() -> None:
    climb = [200 * MI + n * 30 * MI for n in range(11)]
    requests = [12.0, 12.4, 11.8, 12.1, 12.2, 11.9] * 2
    cluster = snapshot(
        series("memory_working_set", climb, start=-60, step=5, pod="feed-0"),
        series("memory_limit", [512 * MI] * 11, pod="feed-0"),
        series("request_rate", requests, start=-60, pod="feed-0"),
        # CPU that rose is not read when the requests themselves were gathered.
        series("cpu_usage", [0.2, 0.9] * 6, start=-60, pod="feed-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding.endswith(
        "it grew without falling from 200Mi at 09:00 UTC, while the requests it served "
        "stayed level (11.8-12.4 a second)."
    )


def test_a_climb_under_rising_requests_does_not_call_the_load_level() -> None:
    climb = [200 * MI + n * 30 * MI for n in range(11)]
    cluster = snapshot(
        series("memory_working_set", climb, start=-60, step=5, pod="feed-0"),
        series("memory_limit", [512 * MI] * 11, pod="feed-0"),
        series("request_rate", [5.0 + 2 * n for n in range(11)], start=-60, pod="feed-0"),
        series("cpu_usage", [0.2] * 11, start=-60, pod="feed-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert found.finding.endswith("it grew without falling from 200Mi at 09:00 UTC.")


def test_a_rate_dipping_at_its_last_points_is_still_level_load() -> None:
    # A rate() over a window its samples only partly cover falls for its last points:
    # 3 of 40 one-minute points, the last minutes of a 5-minute rate window.
    climb = [200 * MI + n * 7 * MI for n in range(40)]
    requests = [12.0] * 37 + [9.0, 6.0, 3.0]
    cluster = snapshot(
        series("memory_working_set", climb, start=-40, step=1, pod="feed-0"),
        series("memory_limit", [512 * MI] * 40, start=-40, step=1, pod="feed-0"),
        series("request_rate", requests, start=-40, step=1, pod="feed-0"),
        alert=_alert(),
    )
    [found] = metrics.resource_saturation(cluster)
    assert "while the requests it served stayed level (12-12 a second)" in found.finding

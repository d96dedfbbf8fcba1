from __future__ import annotations

import pytest

from tarsy.evidence.detections import logs
from tarsy.evidence.snapshot import AlertFacts, MetricSeries
from tarsy.evidence.targets import targets_of

from .cluster import T0, log, replica_set, series, snapshot


@pytest.mark.parametrize(
    ("line", "klass", "about"),
    [
        ("java.lang.OutOfMemoryError: Java heap space", "resources exhausted", "(memory)"),
        (
            "write /var/lib/data/segment-42: no space left on device",
            "resources exhausted",
            "(disk space at /var/lib/data/segment-42)",
        ),
        (
            "accept tcp [::]:8080: accept4: too many open files",
            "resources exhausted",
            "(file descriptors: too many open files)",
        ),
        (
            "dial tcp: lookup stock.inventory.svc.cluster.local on 10.96.0.10:53: no such host",
            "name resolution failing",
            "for stock.inventory.svc.cluster.local",
        ),
        (
            "dial tcp 10.0.3.4:5432: connect: connection refused",
            "connection refused",
            "at 10.0.3.4:5432",
        ),
        (
            "Error: connect ECONNREFUSED cache.shared:6379",
            "connection refused",
            "at cache.shared:6379",
        ),
        (
            "upstream request to api.partner.example:443 timed out after 5s",
            "connection timing out",
            "at api.partner.example:443",
        ),
        (
            'pods is forbidden: User "system:serviceaccount:ops:reporter" cannot list '
            'resource "pods" in API group "" in the namespace "ops"',
            "permission denied",
            "(service account ops/reporter is not allowed to list pods)",
        ),
        (
            "open /etc/app/secret.key: permission denied",
            "permission denied",
            "on /etc/app/secret.key",
        ),
        (
            "Get https://auth.corp:8443/token: x509: certificate has expired or is not yet valid",
            "TLS failure",
            "(certificate has expired at auth.corp:8443)",
        ),
        (
            "x509: certificate signed by unknown authority",
            "TLS failure",
            "(certificate is signed by an authority the client does not trust)",
        ),
        (
            "x509: certificate is valid for a.internal, not b.internal",
            "TLS failure",
            "(the certificate is valid for a.internal, not b.internal)",
        ),
        (
            "failed to parse /etc/app/config.yaml: yaml: line 12: mapping values are not allowed",
            "configuration does not parse",
            "(file /etc/app/config.yaml, line 12)",
        ),
        (
            'json: unknown field "retries" in key "client"',
            "configuration does not parse",
            "(key retries)",
        ),
    ],
)
def test_a_log_line_is_classified_by_meaning_and_names_what_it_is_about(
    line: str, klass: str, about: str
) -> None:
    [(name, subject, count, newest)] = logs.classify_log(f"10:00:01 starting\n{line}\n")
    assert (name, subject, count, newest) == (klass, about, 1, line)


def test_clock_times_are_not_taken_for_host_ports() -> None:
    [(_, subject, _, _)] = logs.classify_log("2026-11-27 10:00:02 connection refused")
    assert subject == ""


def test_ordinary_lines_have_no_class() -> None:
    assert logs.classify_line("GET /healthz 200 3ms") is None
    assert logs.classify_line('ERROR: syntax error at or near "SELEC"') is None
    assert logs.classify_line("bad request: could not parse body") is None
    [(klass, about, _, _)] = logs.classify_log("error decoding settings.json: invalid character")
    assert (klass, about) == ("configuration does not parse", "")
    assert logs.classify_log("listening on :8080\nready\n") == []


def test_repeats_are_one_finding_with_their_count_and_the_newest_line() -> None:
    text = "\n".join(
        [
            "dial tcp 10.0.0.5:5432: connect: connection refused",
            "retrying",
            "dial tcp 10.0.0.5:5432: connect: connection refused (attempt 2)",
            "open /etc/x.conf: permission denied",
        ]
    )
    found = logs.log_signals(snapshot(log("api-1", text)))
    assert [f.finding for f in found] == [
        "Pod orders/api-1 container app's previous run's log shows permission denied on "
        '/etc/x.conf (1 line; newest: "open /etc/x.conf: permission denied").',
        "Pod orders/api-1 container app's previous run's log shows connection refused at "
        '10.0.0.5:5432 (2 lines; newest: "dial tcp 10.0.0.5:5432: connect: connection refused '
        '(attempt 2)").',
    ]
    assert all(f.severity == 2 and f.evidence == ["log-api-1-app-previous"] for f in found)


def test_the_same_failure_in_several_pods_is_one_finding_naming_the_others() -> None:
    line = "dial tcp 10.0.0.5:5432: connect: connection refused"
    found = logs.log_signals(
        snapshot(log("api-1", line), log("api-2", line), log("api-3", line, previous=False))
    )
    [only] = found
    assert only.finding.endswith("; the same in pods api-2, api-3.")
    assert only.evidence == [
        "log-api-1-app-previous",
        "log-api-2-app-previous",
        "log-api-3-app-current",
    ]


def test_log_findings_are_capped() -> None:
    items = [log(f"api-{n}", f"dial tcp 10.0.0.{n}:5432: connect: connection refused")
             for n in range(10)]  # fmt: skip
    assert len(logs.log_signals(snapshot(*items))) == logs.MAX_FINDINGS


@pytest.mark.parametrize(
    ("line", "about"),
    [
        (
            "2026-11-27 09:58:01 ERROR handler failed KeyError: 'unit_price'",
            "(KeyError: 'unit_price')",
        ),
        (
            "java.lang.IllegalStateException: pool closed",
            "(java.lang.IllegalStateException: pool closed)",
        ),
        (
            "panic: runtime error: index out of range [3]",
            "(panic: runtime error: index out of range [3])",
        ),
        (
            "TypeError: Cannot read properties of undefined (reading 'plan')",
            "(TypeError: Cannot read properties of undefined (reading 'plan'))",
        ),
        ("Traceback (most recent call last):", ""),
    ],
)
def test_an_unhandled_exception_is_classified_and_quoted(line: str, about: str) -> None:
    [(klass, subject, count, newest)] = logs.classify_log(line)
    assert (klass, subject, count, newest) == ("an unhandled exception", about, 1, line)


@pytest.mark.parametrize(
    "line",
    [
        "ERROR request failed after 3 attempts",
        'level=error msg="upstream returned 502"',
        "errors_total=0 exceptions=0",
    ],
)
def test_a_log_level_or_the_word_error_is_no_exception(line: str) -> None:
    assert logs.classify_line(line) is None


def test_a_runtime_exception_for_a_known_failure_counts_as_that_failure() -> None:
    line = "java.net.UnknownHostException: stock.inventory.svc.cluster.local"
    assert logs.classify_line(line) == "name resolution failing"


def test_an_exception_in_a_pod_of_code_released_before_the_alert_is_the_likely_cause() -> None:
    text = "\n".join(
        ["INFO served /healthz"] * 5 + ["ERROR invoice failed: KeyError: 'unit_price'"] * 3
    )
    cluster = snapshot(
        replica_set("api-7c9", "api", 12, {}, created=-8),
        log("api-7c9-x2k4q", text, previous=False),
    )
    [new] = logs.log_signals(cluster)
    assert new.subject.name == "api-7c9-x2k4q" and new.severity == 1
    assert new.finding == (
        "Pod orders/api-7c9-x2k4q container app's log shows an unhandled exception "
        "(KeyError: 'unit_price') (3 lines; newest: \"ERROR invoice failed: KeyError: "
        "'unit_price'\"); the pod runs ReplicaSet api-7c9, created 8 min before the alert began."
    )
    assert new.evidence == ["log-api-7c9-x2k4q-app-current", "get-replicaset-api-7c9"]
    # The same exception in code that ran long before the alert is a symptom.
    earlier = snapshot(
        replica_set("api-5d2", "api", 11, {}, created=-600),
        log("api-5d2-p9s7d", text, previous=False),
    )
    [old] = logs.log_signals(earlier)
    assert old.severity == 2 and "ReplicaSet" not in old.finding


def _one_pod_out_of_line() -> list[MetricSeries]:
    """The alert's ratio by pod: one pod at 0.4 since the alert, three at 0.002."""
    query = "sum by (pod) (rate(errors[5m]))"
    quiet = [
        series("alert_by", [0.002] * 12, start=-30, query=query, pod=f"api-5d2-{n}") for n in "abc"
    ]
    odd = series("alert_by", [0.002] * 6 + [0.4] * 6, start=-30, query=query, pod="api-9f1-q")
    return [*quiet, odd]


def test_an_exception_in_the_pod_the_alerts_figures_single_out_is_the_likely_cause() -> None:
    alert = AlertFacts(
        name="HighErrorRatio", labels={"namespace": "orders"}, starts_at=T0,
        expression="sum(rate(errors[5m])) / sum(rate(requests[5m])) > 0.02",
    )  # fmt: skip
    text = "GET /v2/quote 500: TypeError: Cannot read properties of undefined (reading 'plan')"
    cluster = snapshot(*_one_pod_out_of_line(), alert=alert)
    # Its log is what the gather step reads next; the others' are not.
    assert [t["name"] for t in targets_of("pods.out_of_line", alert, cluster)] == ["api-9f1-q"]
    cluster.logs.append(log("api-9f1-q", text, previous=False))
    [found] = logs.log_signals(cluster)
    assert found.severity == 1
    assert found.finding.endswith("; the alert's own figures single this pod out.")
    assert targets_of("pods.out_of_line", alert, cluster) == []

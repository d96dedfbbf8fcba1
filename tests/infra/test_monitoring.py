"""Static checks of monitoring and retention in infra/ against the code (no network).

The log-based metrics must read the fields the code's metric log lines carry
(found by writing those lines, not copied here), the alert policies must watch
those metrics and notify the configured channels, and every collection group a
session's documents live in must have a TTL policy on the field the retention
pass stamps.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from tarsy import telemetry
from tarsy.models import ExecutionStatus
from tarsy.persistence import _firestore as store
from tarsy.persistence import chunking, ledger, retention
from tarsy.settings import Settings, env_names
from tests.infra.test_terraform import ROOT, locals_, one, resources, variables

EXTRACT = re.compile(r"^EXTRACT\(jsonPayload\.(\w+)\)$")
LOG_METRIC = re.compile(
    r'metric\.type="\$\{local\.log_metric_prefix\}\$\{google_logging_metric\.(\w+)\.name\}"'
)


# ─── what the code writes ─────────────────────────────────────────────────────


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.fields: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.fields.append(dict(getattr(record, "fields", {})))


@cache
def metric_lines() -> dict[str, set[str]]:
    """Event name -> every field its metric log line can carry (written by the code)."""
    keep = _Keep()
    metrics_logger = logging.getLogger("tarsy.metrics")
    metrics_logger.addHandler(keep)
    telemetry.reset()
    telemetry.enable_metric_logs()
    try:
        with telemetry.step_span("t", {}, session_id="s", execution_id="e", kind="iterate"):
            pass
        with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="m") as call:
            call.record_usage(input_tokens=1, output_tokens=1)
        with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="m") as call:
            call.fail("rate_limit")
        telemetry.record_session_end("completed", chain_id="c", total_tokens=1, cost_usd=0.1)
    finally:
        telemetry.reset()
        metrics_logger.removeHandler(keep)
    events: dict[str, set[str]] = {}
    for entry in keep.fields:
        events.setdefault(entry[telemetry.METRIC_FIELD], set()).update(entry)
    assert set(events) == {
        telemetry.METRIC_STEP,
        telemetry.METRIC_MODEL_CALL,
        telemetry.METRIC_SESSION_END,
    }
    return events


# ─── log-based metrics ────────────────────────────────────────────────────────


def test_log_based_metrics_read_fields_the_metric_lines_carry() -> None:
    metrics = resources("google_logging_metric")
    assert metrics, "no log-based metrics"
    for name, metric in metrics.items():
        match = re.fullmatch(
            r'\$\{local\.metric_log_filter\} AND jsonPayload\.tarsy_metric="(\w+)"',
            metric["filter"],
        )
        assert match, f"{name}: filter {metric['filter']!r}"
        carried = metric_lines()[match[1]]
        extracted = {
            label: EXTRACT.fullmatch(expression)
            for label, expression in metric.get("label_extractors", {}).items()
        }
        for label, found in extracted.items():
            assert found and found[1] in carried, f"{name}: label {label} reads nothing"
        descriptor = one(metric["metric_descriptor"])
        assert {label["key"] for label in descriptor.get("labels", [])} == set(extracted)
        if descriptor["value_type"] == "DISTRIBUTION":
            value = EXTRACT.fullmatch(metric["value_extractor"])
            assert value and value[1] in carried, f"{name}: value reads nothing"
            assert "bucket_options" in metric
        else:
            assert (descriptor["metric_kind"], descriptor["value_type"]) == ("DELTA", "INT64")


def test_the_metric_lines_are_read_from_the_functions_that_write_them() -> None:
    log_filter = locals_()["metric_log_filter"]
    for function in ("step", "api", "dead_letter"):
        assert f"${{local.names.{function}}}" in log_filter
    assert 'resource.type=\\"cloud_run_revision\\"' in log_filter
    setting = env_names("metric_logs")[0]
    for code in ("step", "api"):
        assert locals_()["function_env"][code][setting] == "true"


# ─── alert policies ───────────────────────────────────────────────────────────


def _filters(policy: dict[str, Any]) -> Iterator[str]:
    for condition in policy["conditions"]:
        threshold = one(condition["condition_threshold"])
        yield threshold["filter"]
        if "denominator_filter" in threshold:
            yield threshold["denominator_filter"]


def test_alert_policies_cover_dead_letters_deadlines_steps_models_and_the_sweeper() -> None:
    policies = resources("google_monitoring_alert_policy")
    assert set(policies) == {
        "dead_letters",
        "sessions_timed_out",
        "step_failures",
        "model_errors",
        "sweeper_failures",
    }
    metrics = set(resources("google_logging_metric"))
    for name, policy in policies.items():
        assert policy["notification_channels"] == "${var.notification_channels}", name
        assert one(policy["documentation"])["content"], name
        for text in _filters(policy):
            for metric in LOG_METRIC.findall(text):
                assert metric in metrics, f"{name} watches an undeclared metric {metric}"

    dead = one(one(policies["dead_letters"]["conditions"])["condition_threshold"])
    assert "pubsub.googleapis.com/subscription/dead_letter_message_count" in dead["filter"]
    assert "${google_pubsub_subscription.step.name}" in dead["filter"]

    late = one(one(policies["sessions_timed_out"]["conditions"])["condition_threshold"])
    assert LOG_METRIC.findall(late["filter"]) == ["sessions_ended"]
    assert f'metric.labels.status="{ExecutionStatus.TIMED_OUT.value}"' in late["filter"]

    for name, metric, threshold in (
        ("step_failures", "steps", "alert_step_failure_ratio"),
        ("model_errors", "model_calls", "alert_model_error_ratio"),
    ):
        ratio = one(one(policies[name]["conditions"])["condition_threshold"])
        assert LOG_METRIC.findall(ratio["filter"]) == [metric]
        assert LOG_METRIC.findall(ratio["denominator_filter"]) == [metric]
        assert ratio["filter"].endswith('metric.labels.outcome="error"')
        assert "outcome" not in ratio["denominator_filter"]
        assert ratio["threshold_value"] == f"${{var.{threshold}}}"
        assert 0 < variables()[threshold]["default"] < 1

    sweeper = one(one(policies["sweeper_failures"]["conditions"])["condition_threshold"])
    assert "${google_cloud_scheduler_job.sweeper.name}" in sweeper["filter"]

    assert variables()["notification_channels"]["default"] == []


def test_the_dashboard_charts_every_metric() -> None:
    charts = locals_()["dashboard_charts"]
    types = locals_()["metric_types"]
    assert set(types) == set(resources("google_logging_metric"))
    for name, metric_type in types.items():
        assert metric_type == f"${{local.log_metric_prefix}}${{google_logging_metric.{name}.name}}"
    assert {chart["metric"] for chart in charts} == set(types)
    titles = " ".join(chart["title"].lower() for chart in charts)
    for topic in ("sessions ended, by status", "step latency", "model latency", "error",
                  "tokens", "cost"):  # fmt: skip
        assert topic in titles
    for chart in charts:
        # Distributions are reduced to a percentile or a mean, counters summed.
        distribution = chart["metric"] in {"step_latency", "model_latency", "session_tokens",
                                           "session_cost"}  # fmt: skip
        assert chart["aligner"] == ("ALIGN_DELTA" if distribution else "ALIGN_SUM"), chart
        assert chart["reducer"].startswith(
            ("REDUCE_PERCENTILE_", "REDUCE_MEAN") if distribution else ("REDUCE_SUM",)
        ), chart
        assert all(field.startswith("metric.label.") for field in chart["by"])
    dashboard = resources("google_monitoring_dashboard")["tarsy"]["dashboard_json"]
    assert "local.dashboard_charts" in dashboard and "dead_letter_message_count" in dashboard


# ─── retention ────────────────────────────────────────────────────────────────


def _collections_written() -> set[str]:
    """Every collection name a deployed module passes to ``.collection(...)``."""
    names: dict[str, Any] = {**vars(store), **vars(chunking), **vars(ledger), **vars(retention)}
    dev_only = ("testing", "localstack", "evals", "samples", "cli.py", "client.py")
    found: set[str] = set()
    for path in (ROOT / "shared" / "tarsy").rglob("*.py"):
        relative = path.relative_to(ROOT / "shared" / "tarsy").as_posix()
        if relative.startswith(dev_only) or "/demo_cluster/" in relative:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("collection", "collection_group")
                and len(node.args) == 1
            ):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
            elif isinstance(arg, ast.Name) and isinstance(names.get(arg.id), str):
                found.add(names[arg.id])
            else:
                raise AssertionError(f"{relative}:{node.lineno}: a collection name not resolved")
    return found


def test_every_collection_group_of_a_session_has_a_ttl_policy() -> None:
    policy = resources("google_firestore_field")["retention_ttl"]
    assert policy["for_each"] == "${local.retention_collection_groups}"
    assert policy["collection"] == "${each.value}"
    assert policy["field"] == retention.TTL_FIELD
    assert policy["ttl_config"] == [{}] and policy["index_config"] == [{}]
    declared = set(re.findall(r'"(\w+)"', locals_()["retention_collection_groups"]))
    assert declared == retention.COLLECTION_GROUPS

    # Every collection the code writes expires: by the retention pass, or on its own clock
    # (thought signatures, alert fingerprints), or holds no session's data (tool lists).
    own_clock = {store.THOUGHT_SIGNATURES, store.ALERT_FINGERPRINTS, store.TOOL_LISTS}
    written = _collections_written()
    assert store.MESSAGES in written and ledger.NOTIFICATIONS in written
    assert written - own_clock <= retention.COLLECTION_GROUPS, (
        written - own_clock - retention.COLLECTION_GROUPS
    )


def test_the_stale_notification_query_has_its_collection_group_index() -> None:
    field = resources("google_firestore_field")["notification_leases"]
    assert (field["collection"], field["field"]) == (ledger.NOTIFICATIONS, ledger.LEASE_FIELD)
    [index] = one(field["index_config"])["indexes"]
    assert index == {"order": "ASCENDING", "query_scope": "COLLECTION_GROUP"}
    source = (ROOT / "shared" / "tarsy" / "persistence" / "ledger.py").read_text()
    assert "collection_group(NOTIFICATIONS)" in source
    assert "FieldFilter(LEASE_FIELD, " in source


def test_retention_days_reach_the_sweeper() -> None:
    default = variables()["retention_days"]["default"]
    assert default == Settings.model_fields["retention_days"].default == 90
    api = locals_()["function_env"]["api"]
    assert api[env_names("retention_days")[0]] == "${tostring(var.retention_days)}"


def test_the_docs_the_readme_and_terraform_agree_on_the_sweep_interval() -> None:
    schedule = variables()["sweep_schedule"]["default"]
    assert schedule == "* * * * *"
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert f"`{schedule}`" in deploy and "every minute" in deploy
    assert "every 5 minutes" not in deploy
    readme = (ROOT / "README.md").read_text()
    assert "every 5 minutes" not in readme and "*/5 * * * *" not in readme


def test_the_deploy_docs_give_the_retention_jobs_own_schedule() -> None:
    schedule = variables()["retention_schedule"]["default"]
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert f"`retention_schedule`, `{schedule}`" in " ".join(deploy.split())


def test_the_docs_describe_monitoring_and_retention() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    for name in ("notification_channels", "retention_days", "TARSY_METRIC_LOGS", "expire_at"):
        assert name in deploy, name
    for policy in resources("google_monitoring_alert_policy").values():
        assert policy["display_name"] in deploy, policy["display_name"]

"""Routing alerts to chains by their labels (tarsy.config.routing), recorded on the session."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console

from tarsy.config import load_config
from tarsy.config.routing import AlertRoute, alert_fields, alert_labels
from tarsy.config.schema import TarsyConfig
from tarsy.errors import ConfigError
from tarsy.intake.alerts import Intake
from tarsy.intake.sources.alertmanager import AlertmanagerReceiver
from tarsy.intake.sources.config import AlertSourcesConfig
from tarsy.models import ChainRouting
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev import cli
from tarsy_dev.client import SessionView
from tarsy_dev.fakes.bus import RecordingBus
from tests.unit.alert_store_fake import MemoryAlertStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sources"


def config(user: str | None = None) -> TarsyConfig:
    return load_config(Settings(), user_text=user)


# ─── the built-in rules ───────────────────────────────────────────────────────


def test_a_kube_prometheus_alertname_goes_to_the_kubernetes_chain() -> None:
    chain, routing = config().route("KubePodCrashLooping", {"alertname": "KubePodCrashLooping"})
    assert chain == "kubernetes"
    assert routing == ChainRouting(
        by="rule",
        rule="kube-prometheus",
        reason="alertname 'KubePodCrashLooping' matches 'Kube*'",
    )


@pytest.mark.parametrize("label", ["pod", "deployment", "namespace"])
def test_any_alert_naming_a_kubernetes_resource_goes_to_the_kubernetes_chain(label: str) -> None:
    chain, routing = config().route("CheckoutSlow", {"alertname": "CheckoutSlow", label: "x"})
    assert (chain, routing.rule, routing.reason) == (
        "kubernetes",
        "kubernetes-resource",
        f"{label} is set",
    )


def test_an_alert_no_rule_matches_runs_the_default_chain_and_says_why() -> None:
    chain, routing = config().route("DiskFull", {"alertname": "DiskFull", "instance": "db-1"})
    assert chain == "default"
    assert routing.by == "default" and routing.rule is None
    assert routing.reason == (
        "no chain lists alert type 'DiskFull' and no alert_routes rule matched: "
        "the default chain (no tools) serves it"
    )


def test_patterns_are_case_sensitive_and_match_the_whole_value() -> None:
    assert config().chain_for("kubeish", {"alertname": "kubeish"}) == "default"
    assert config().chain_for("NotKube", {"alertname": "NotKubeAlert"}) == "default"


def test_a_chain_that_lists_the_alert_type_wins_over_the_rules() -> None:
    chain, routing = config().route("kubernetes", {"alertname": "DiskFull"})
    assert (chain, routing.by) == ("kubernetes", "alert_type")
    mine = config(
        "agent_chains:\n  disks: {alert_types: [KubePersistentVolumeFillingUp],"
        " stages: [{name: s, agent: investigator}]}\n"
    )
    labels = {"alertname": "KubePersistentVolumeFillingUp", "namespace": "db"}
    assert mine.route("KubePersistentVolumeFillingUp", labels)[0] == "disks"


# ─── rules in the user's file ─────────────────────────────────────────────────

USER_RULES = """
agent_chains:
  databases: {stages: [{name: s, agent: investigator}]}
alert_routes:
  - name: postgres
    chain: databases
    match_labels: {alertname: "Postgres*", severity: critical}
    has_labels: [instance]
  - name: kubernetes-resource
    enabled: false
"""


def test_user_rules_come_first_and_may_replace_or_turn_off_a_builtin_rule() -> None:
    mine = config(USER_RULES)  # "databases" lists no alert type: the rule is its only way in
    assert [r.name for r in mine.alert_routes] == [
        "postgres",
        "kubernetes-resource",
        "kube-prometheus",
        "metrics-expression",
        "metrics-service",
    ]
    labels = {"alertname": "PostgresDown", "severity": "critical", "instance": "db-1", "pod": "p"}
    chain, routing = mine.route("PostgresDown", labels)
    assert (chain, routing.rule) == ("databases", "postgres")
    assert routing.reason == (
        "alertname 'PostgresDown' matches 'Postgres*', severity 'critical' matches 'critical', "
        "instance is set"
    )
    # Every condition must hold; the built-in pod rule is off, the Kube* one still works.
    assert mine.chain_for("PostgresDown", {**labels, "severity": "warning"}) == "default"
    assert mine.chain_for("KubeJobFailed", {"alertname": "KubeJobFailed"}) == "kubernetes"


@pytest.mark.parametrize(
    ("rules", "location", "message"),
    [
        (
            "[{name: r, chain: nowhere, has_labels: [pod]}]",
            "alert_routes.0.chain",
            "unknown chain 'nowhere'",
        ),
        (
            "[{name: r, chain: kubernetes}]",
            "alert_routes.0",
            "Value error, a rule needs at least one of 'match_labels', 'has_labels', "
            "'has_any_label', 'has_any_field'",
        ),
        (
            "[{name: r, chain: kubernetes, match_labels: {alertname: [Kube]}}]",
            "alert_routes.0.match_labels.alertname",
            "Input should be a valid string",
        ),
        (
            "[{name: r, chain: kubernetes, has_label: [pod]}]",
            "alert_routes.0.has_label",
            "Extra inputs are not permitted",
        ),
        (
            "[{name: r, chain: kubernetes, has_labels: [pod]},"
            " {name: r, chain: kubernetes, has_labels: [deployment]}]",
            "alert_routes.1.name",
            "rule 'r' is given twice",
        ),
    ],
    ids=["unknown chain", "no condition", "pattern not text", "misspelt key", "twice"],
)
def test_a_bad_rule_is_a_field_level_error(rules: str, location: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(f"alert_routes: {rules}\n")
    assert (location, message) in raised.value.errors


def test_a_turned_off_rule_needs_no_chain_and_matches_nothing() -> None:
    rule = AlertRoute(name="off", enabled=False)
    assert rule.explain({"pod": "x"}) is None


def test_labels_are_the_text_values_of_the_alerts_labels_mapping() -> None:
    assert alert_labels({"labels": {"pod": "a", "count": 3, "ok": True}}) == {"pod": "a"}
    assert alert_labels({"labels": ["pod"]}) == {}
    assert alert_labels("pod=a") == {}


# ─── recorded on the session, shown by tarsy show ─────────────────────────────


async def test_an_alertmanager_kube_alert_creates_a_kubernetes_session_recording_the_rule() -> None:
    body = (FIXTURES / "alertmanager_firing_group.json").read_bytes()
    sources = AlertSourcesConfig()
    alerts = AlertmanagerReceiver().alerts(body.decode(), sources)
    store = MemoryAlertStore()
    intake = Intake(
        settings=Settings(), config=config(), store=cast(Store, store), bus=RecordingBus()
    )
    await intake.take(alerts, sources.for_source("alertmanager"))
    [session, *_] = store.sessions.values()
    assert session.alert_type == "KubePodCrashLooping"
    assert session.chain_id == "kubernetes"
    assert session.routing is not None and session.routing.rule == "kube-prometheus"


def shown(routing: ChainRouting, alert_type: str, chain: str) -> str:
    """What ``tarsy show`` prints for a pending session routed as ``routing``."""
    session: dict[str, Any] = {
        "session_id": "s1",
        "alert_type": alert_type,
        "chain_id": chain,
        "status": "pending",
        "routing": routing.model_dump(mode="json"),
    }
    view = SessionView.model_validate(
        {"session": session, "stages": [], "executions": [], "timeline": []}
    )
    buffer = io.StringIO()
    cli.show_session(view, Console(file=buffer, width=200))
    return buffer.getvalue()


def test_tarsy_show_says_which_rule_chose_the_chain() -> None:
    routing = ChainRouting(
        by="rule", rule="kube-prometheus", reason="alertname 'KubeX' matches 'Kube*'"
    )
    assert (
        "routed to kubernetes by rule kube-prometheus: alertname 'KubeX' matches 'Kube*'"
        in shown(routing, "KubeX", "kubernetes")
    )


# ─── metrics alerts, sources, fields (issue 32) ───────────────────────────────


def test_an_alert_carrying_its_expression_goes_to_the_metrics_chain() -> None:
    fields = {"generatorURL": "http://prometheus:9090/graph?g0.expr=up+%3D%3D+0"}
    chain, routing = config().route("TargetDown", {"alertname": "TargetDown"}, fields=fields)
    assert (chain, routing.rule, routing.reason) == (
        "metrics",
        "metrics-expression",
        "the alert has a generatorURL",
    )


@pytest.mark.parametrize("label", ["service", "job"])
def test_an_alert_naming_a_service_or_a_job_goes_to_the_metrics_chain(label: str) -> None:
    labels = {"alertname": "ErrorBudgetBurn", label: "payments-api", "namespace": "checkout"}
    chain, routing = config().route("ErrorBudgetBurn", labels)
    assert (chain, routing.rule) == ("metrics", "metrics-service")


def test_a_kube_alert_with_a_generator_url_stays_on_the_kubernetes_chain() -> None:
    fields = {"generatorURL": "http://prometheus:9090/graph?g0.expr=kube_pod"}
    labels = {"alertname": "KubePodCrashLooping", "pod": "p"}
    assert config().chain_for("KubePodCrashLooping", labels) == "kubernetes"
    assert config().route("KubePodCrashLooping", labels, fields=fields)[0] == "kubernetes"


def test_a_flat_posted_alert_is_labelled_by_its_own_text_fields() -> None:
    data = {"service": "payments-api", "p99_seconds": 2.31, "window": "10m"}
    assert alert_labels(data) == {"service": "payments-api", "window": "10m"}
    assert alert_fields({"generatorURL": " ", "expr": "up == 0"}) == {"expr": "up == 0"}


def test_a_whole_notification_posted_is_routed_by_its_first_firing_alert() -> None:
    notification = {
        "receiver": "tarsy",
        "status": "firing",
        "commonLabels": {"cluster": "prod", "severity": "page"},
        "alerts": [
            {"status": "resolved", "labels": {"alertname": "Old", "pod": "x"}},
            {
                "status": "firing",
                "labels": {"alertname": "CheckoutSlow", "service": "checkout", "severity": "warn"},
                "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
                "startsAt": "2026-03-02T14:30:00Z",
            },
        ],
    }
    labels = alert_labels(notification)
    assert labels == {
        "cluster": "prod", "severity": "warn", "alertname": "CheckoutSlow", "service": "checkout",
    }  # fmt: skip
    assert alert_fields(notification)["generatorURL"].endswith("g0.expr=up")
    chain, routing = config().route("CheckoutSlow", labels, fields=alert_fields(notification))
    assert (chain, routing.rule) == ("metrics", "metrics-expression")


def test_a_users_source_settings_keep_the_builtin_chain_unless_they_name_another() -> None:
    secrets = config("alert_sources:\n  pagerduty: {signing_secrets: [pd-secret]}\n")
    assert secrets.alert_sources.pagerduty.chain == "metrics"
    assert secrets.alert_sources.pagerduty.signing_secrets == ["pd-secret"]
    mine = config("alert_sources:\n  sns: {chain: kubernetes}\n")
    chain, routing = mine.route("AWS/RDS", {}, source="sns")
    assert (chain, routing.by) == ("kubernetes", "source")


def test_a_source_naming_an_unknown_chain_is_a_field_level_error() -> None:
    with pytest.raises(ConfigError) as raised:
        config("alert_sources:\n  grafana: {chain: nowhere}\n")
    assert ("alert_sources.grafana.chain", "unknown chain 'nowhere'") in raised.value.errors


def test_a_chain_reached_only_through_a_source_is_not_reported_unreachable() -> None:
    mine = config(
        "agent_chains:\n  aws: {stages: [{name: s, agent: investigator}]}\n"
        "alert_sources:\n  sns: {chain: aws}\n"
    )
    assert mine.route("AWS/RDS", {}, source="sns")[0] == "aws"


def test_tarsy_show_says_when_the_source_chose_the_chain() -> None:
    routing = ChainRouting(by="source", reason="alert_sources.sns.chain names 'metrics'")
    assert "routed to metrics by its source: alert_sources.sns.chain names 'metrics'" in shown(
        routing, "AWS/RDS", "metrics"
    )

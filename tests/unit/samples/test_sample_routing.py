"""Every sample alert runs a chain with tools, and the session says why (issue 32, scope 3)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from tarsy.commands.start import new_session
from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.intake.sources.alertmanager import AlertmanagerReceiver
from tarsy.intake.sources.alertmanager_api import AlertmanagerApiReceiver
from tarsy.intake.sources.grafana import GrafanaReceiver
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.intake.sources.pagerduty import PagerDutyReceiver
from tarsy.intake.sources.sns import normalize_sns, parse_sns
from tarsy.models import AlertSubmission, Session, utcnow
from tarsy.settings import Settings
from tarsy.tools.masking import Masker

SAMPLES = resources.files("tarsy_dev.samples")
CONFIG: TarsyConfig = load_config(Settings())


def _text(name: str) -> str:
    return SAMPLES.joinpath(name).read_text()


def _native(name: str) -> NormalizedAlert:
    sources = CONFIG.alert_sources
    if name == "sns-cloudwatch-alarm.json":
        outcome: Any = normalize_sns(parse_sns(_text(name)), sources.sns)
        [sns_alert] = outcome
        assert isinstance(sns_alert, NormalizedAlert)
        return sns_alert
    receiver = {
        "alertmanager.json": AlertmanagerReceiver(),
        "grafana.json": GrafanaReceiver(),
        "grafana-alertmanager-api.json": AlertmanagerApiReceiver(),
        "pagerduty.json": PagerDutyReceiver(),
    }[name]
    [alert] = receiver.alerts(_text(name), sources)
    return alert


def session_of(name: str) -> Session:
    """The session ingest creates for a sample (the same ``new_session`` both doors use)."""
    common: dict[str, Any] = {
        "config": CONFIG,
        "settings": Settings(),
        "now": utcnow(),
        "masker": Masker(CONFIG.alert_masking),
    }
    if name in ("pod-crashloop.json", "api-high-latency.json"):
        submission = AlertSubmission.model_validate(json.loads(_text(name)))
        return new_session(
            alert_type=submission.alert_type,
            data_text=submission.data_as_text(),
            data=submission.data,
            **common,
        )
    alert = _native(name)
    return new_session(
        alert_type=alert.alert_type,
        data_text=json.dumps(alert.data),
        data=alert.data,
        source=alert.source,
        **common,
    )


def tool_servers(chain_id: str) -> set[str]:
    """The MCP servers the agents of every stage of a chain have."""
    chain = CONFIG.chain(chain_id)
    servers: set[str] = set()
    for s, stage in enumerate(chain.stages):
        for a in range(len(stage.placed_agents)):
            agent_servers = CONFIG.resolve(chain_id, s, a).mcp_servers
            assert agent_servers, f"{chain_id} stage {s} agent {a} has no tools"
            servers.update(agent_servers)
    return servers


SAMPLE_NAMES = sorted(f.name for f in SAMPLES.iterdir() if f.name.endswith(".json"))


def test_the_samples_are_all_here() -> None:
    assert len(SAMPLE_NAMES) == 7


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_sample_runs_a_chain_with_tools_and_the_session_records_why(name: str) -> None:
    session = session_of(name)
    assert session.chain_id != "default"
    assert tool_servers(session.chain_id)
    assert session.routing is not None and session.routing.by != "default"
    assert session.routing.reason


@pytest.mark.parametrize(
    ("name", "chain", "by", "rule"),
    [
        ("pod-crashloop.json", "kubernetes", "alert_type", None),
        ("alertmanager.json", "kubernetes", "rule", "kube-prometheus"),
        ("api-high-latency.json", "metrics", "rule", "metrics-service"),
        ("grafana.json", "metrics", "rule", "metrics-expression"),
        ("grafana-alertmanager-api.json", "metrics", "rule", "metrics-expression"),
        ("pagerduty.json", "metrics", "source", None),
        ("sns-cloudwatch-alarm.json", "metrics", "source", None),
    ],
)
def test_each_sample_is_routed_by_the_step_that_should_claim_it(
    name: str, chain: str, by: str, rule: str | None
) -> None:
    session = session_of(name)
    assert session.routing is not None
    assert (session.chain_id, session.routing.by, session.routing.rule) == (chain, by, rule)


def test_the_metrics_chain_has_metrics_and_kubernetes_tools() -> None:
    assert tool_servers("metrics") == {"prometheus", "kubernetes"}


def test_a_latency_sample_is_routed_by_the_service_it_names() -> None:
    routing = session_of("api-high-latency.json").routing
    assert routing is not None and routing.reason == "service is set"


def test_a_source_routing_names_the_setting_that_chose_the_chain() -> None:
    routing = session_of("pagerduty.json").routing
    assert routing is not None
    assert routing.reason == "alert_sources.pagerduty.chain names 'metrics' for pagerduty alerts"


def test_an_alert_nothing_claims_runs_the_default_chain_and_says_it_has_no_tools() -> None:
    chain, routing = CONFIG.route("DiskFull", {"instance": "db-1"}, source="grafana")
    assert (chain, routing.by) == ("default", "default")
    assert routing.reason == (
        "no chain lists alert type 'DiskFull', alert_sources.grafana names no chain and no "
        "alert_routes rule matched: the default chain (no tools) serves it"
    )
    assert not CONFIG.resolve("default", 0, 0).mcp_servers

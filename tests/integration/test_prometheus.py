"""The demo cluster's metrics in a real Prometheus, read through the real prometheus-mcp-server.

Debian's ``prometheus`` and ``promtool`` (installed by ``scripts/install_prometheus.sh``
when missing) hold every scenario's history, backfilled from OpenMetrics; the pinned
prometheus-mcp-server (``tools/prometheus-mcp/requirements.txt``) runs over stdio on it
as the local stack runs it. Each scenario's alert rule fires on its own data at the
alert's time and not before, and every playbook step of a scenario with metrics answers,
through the two MCP servers, with the evidence it relies on.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent

from tarsy.tools.masking import Masker
from tarsy_dev.demo_cluster import load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import PROMETHEUS_TOOL_NAMES, TOOL_NAMES, Scenario
from tarsy_dev.localstack import kubernetes_mcp, prometheus, prometheus_mcp
from tarsy_dev.localstack.processes import ProcessInfo, stop
from tarsy_dev.localstack.stack import start_kube_api

ROOT = Path(__file__).resolve().parents[2]
CALL_TIMEOUT_S = 60.0
METRICS_SCENARIOS = [n for n in scenario_names() if load_scenario(n).metrics is not None]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessInfo]:
    state = tmp_path_factory.mktemp("prometheus")
    info = prometheus.serve_scenario_metrics(ROOT, state, state / "logs")
    try:
        yield info
    finally:
        stop(info)


@pytest.fixture(scope="module")
def metrics_server() -> Path:
    return prometheus_mcp.ensure_installed(ROOT)


def query(url: str, expr: str, at: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}/api/v1/query", params={"query": expr, "time": at}, timeout=30)
    response.raise_for_status()
    body = response.json()
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def first_alert(data: object) -> dict[str, Any]:
    """The alert of a scenario's data: itself, or the first of a notification's ``alerts``."""
    assert isinstance(data, dict)
    alerts = data.get("alerts")
    return dict(alerts[0]) if isinstance(alerts, list) else data


def alert_time(scenario: Scenario) -> str:
    return str(first_alert(scenario.alert.data)["startsAt"])


def test_there_are_at_least_three_scenarios_that_need_metrics() -> None:
    assert len([n for n in METRICS_SCENARIOS if "metrics" in load_scenario(n).tags]) >= 3


@pytest.mark.parametrize("name", METRICS_SCENARIOS)
def test_the_scenarios_alert_rule_fires_on_its_history_at_the_alerts_time_and_not_before(
    served: ProcessInfo, name: str, tmp_path: Path
) -> None:
    scenario = load_scenario(name)
    assert scenario.metrics is not None
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(scenario.metrics.rules_file(name)))
    checked = subprocess.run(
        [prometheus.PROMTOOL, "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    data = first_alert(scenario.alert.data)
    [rule] = [r for r in scenario.metrics.rules if r.alert == data["labels"]["alertname"]]
    # The alert carries its rule's expression, as Prometheus' generator URL does.
    [expr] = parse_qs(urlparse(str(data["generatorURL"])).query)["g0.expr"]
    assert expr == rule.expr
    assert query(served.url, rule.expr, alert_time(scenario)), f"{name}: not firing"
    before = scenario.metrics.start.isoformat().replace("+00:00", "Z")
    assert query(served.url, rule.expr, before) == [], f"{name}: firing before the incident"


def _text(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def _metrics_client(binary: Path, url: str) -> Client:
    entry = prometheus_mcp.server_config(binary, url, "test")
    parameters = StdioServerParameters(command=entry["command"], args=[], env=entry["env"])
    return Client(parameters, read_timeout_seconds=CALL_TIMEOUT_S)


def test_the_metrics_server_is_the_locked_version(metrics_server: Path) -> None:
    lock = (ROOT / prometheus_mcp.LOCK).read_text()
    assert "prometheus-mcp-server==1.6.2 \\\n    --hash=sha256:" in lock
    assert prometheus_mcp.pinned_version(ROOT) == "1.6.2"
    assert metrics_server.is_file()


async def test_the_metrics_server_lists_only_read_only_tools(
    served: ProcessInfo, metrics_server: Path
) -> None:
    async with _metrics_client(metrics_server, served.url) as client:
        tools = (await client.list_tools()).tools
        health = await client.call_tool("health_check", {})
    assert sorted(tool.name for tool in tools) == sorted(PROMETHEUS_TOOL_NAMES)
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools)
    assert not health.is_error and "healthy" in _text(health)


@pytest.mark.parametrize("name", METRICS_SCENARIOS)
async def test_every_playbook_step_answers_through_the_metrics_and_kubernetes_servers(
    served: ProcessInfo, metrics_server: Path, name: str, tmp_path: Path
) -> None:
    scenario = load_scenario(name)
    kubeconfig = tmp_path / "kubeconfig"
    cluster = start_kube_api(name, kubeconfig, tmp_path / "logs")
    kube = StdioServerParameters(
        command=str(kubernetes_mcp.ensure_installed(ROOT)),
        args=[*kubernetes_mcp.SERVER_FLAGS, "--kubeconfig", str(kubeconfig)],
    )
    try:
        async with (
            _metrics_client(metrics_server, served.url) as metrics,
            Client(kube, read_timeout_seconds=CALL_TIMEOUT_S) as kubernetes,
        ):
            for number, step in enumerate(scenario.playbook.steps, 1):
                assert step.tool in (*TOOL_NAMES, *PROMETHEUS_TOOL_NAMES)
                client = metrics if step.tool in PROMETHEUS_TOOL_NAMES else kubernetes
                result = await client.call_tool(step.tool, step.arguments)
                text = _text(result)
                where = f"{name} step {number} {step.tool}({step.arguments})"
                assert bool(result.is_error) == step.fails, f"{where}: {text[:2000]}"
                missing = [expected for expected in step.expect if expected not in text]
                assert not missing, f"{where} lacks {missing}:\n{text[:4000]}"
                masked = Masker().mask(text).text
                hidden = [expected for expected in step.expect if expected not in masked]
                assert not hidden, f"{where}: masking hides {hidden}"
    finally:
        stop(cluster)

"""The demo cluster over the Kubernetes API, judged by the real clients.

Debian's ``kubectl`` and the pinned kubernetes-mcp-server binary (installed by
``npm ci`` from the project's ``package-lock.json``) run unchanged against
``tarsy-demo-cluster``: kubectl shows each incident as it would a real
cluster's, and every scenario's playbook, called through kubernetes-mcp-server
with the local stack's flags, fetches the evidence it relies on (and meets the
scenario's injected faults where the playbook says it does).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, TextContent

from tarsy.tools.masking import Masker
from tarsy_dev.demo_cluster import TOOL_NAMES, load_scenario, scenario_names
from tarsy_dev.fakes.sloppy import IRRELEVANT_CALLS
from tarsy_dev.localstack.kubernetes_mcp import SERVER_FLAGS, ensure_installed, pinned_version
from tarsy_dev.localstack.processes import stop
from tarsy_dev.localstack.stack import start_kube_api

ROOT = Path(__file__).resolve().parents[2]
# Far above what a call takes (~0.1 s); above the 5 s hang of media-evictions-flaky-api.
CALL_TIMEOUT_S = 60.0
KUBECTL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Cluster:
    url: str
    kubeconfig: Path
    cache_dir: Path

    def switch(self, scenario: str) -> None:
        response = httpx.post(f"{self.url}/scenario", json={"scenario": scenario}, timeout=30)
        response.raise_for_status()

    def kubectl(self, *args: str) -> str:
        completed = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir),
             *args],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )  # fmt: skip
        assert completed.returncode == 0, (args, completed.stderr)
        return completed.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not installed (Debian package kubectl)")
    state = tmp_path_factory.mktemp("kube-api")
    kubeconfig = state / "kubeconfig"
    info = start_kube_api(scenario_names()[0], kubeconfig, state / "logs", switchable=True)
    try:
        yield Cluster(info.url, kubeconfig, state / "kubectl-cache")
    finally:
        stop(info)


@pytest.fixture(scope="module")
def binary() -> Path:
    return ensure_installed(ROOT)


def test_the_kubeconfig_points_at_the_served_cluster(cluster: Cluster) -> None:
    assert cluster.kubectl("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}") == (
        cluster.url
    )
    version = json.loads(cluster.kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.30.5-gke.1014001"


@dataclass(frozen=True)
class Incident:
    scenario: str
    namespace: str
    pod: str
    status: str  # in `get pods`
    last_state: str  # in `describe pod`
    previous_log: str  # a line of `logs --previous`
    warning: str  # a Warning event's reason in the namespace
    usage: str  # a pod's CPU in `top pods` (another pod of the namespace may show it)


INCIDENTS = [
    Incident(
        scenario="crashloop-bad-configmap",
        namespace="checkout",
        pod="payments-api-7d9f8b6c5-x2k4q",
        status="CrashLoopBackOff",
        last_state="Exit Code:    1",
        previous_log="could not connect to database after 5 attempts",
        warning="BackOff",
        usage="118m",
    ),
    Incident(
        scenario="oom-killed",
        namespace="analytics",
        pod="report-worker-5f7c9d8b4-zp2vk",
        status="CrashLoopBackOff",
        last_state="Reason:       OOMKilled",
        previous_log="batch_size=250000",
        warning="BackOff",
        usage="report-worker-5f7c9d8b4-qm7zt",
    ),
]


@pytest.mark.parametrize("incident", INCIDENTS, ids=lambda i: i.scenario)
def test_kubectl_shows_the_incident(cluster: Cluster, incident: Incident) -> None:
    cluster.switch(incident.scenario)
    ns = ("-n", incident.namespace)

    pods = cluster.kubectl("get", "pods", "-A")
    row = next(line for line in pods.splitlines() if incident.pod in line)
    assert row.split()[0] == incident.namespace
    assert incident.status in row

    wide = cluster.kubectl("get", "pods", *ns, "-o", "wide")
    assert "NODE" in wide.splitlines()[0] and "gke-prod-eu-1-default-pool" in wide

    described = cluster.kubectl("describe", "pod", incident.pod, *ns)
    assert f"Name:             {incident.pod}" in described
    assert incident.last_state in described
    events = described.split("\nEvents:", 1)[1]
    assert incident.warning in events  # events joined to the pod by its uid

    previous = cluster.kubectl("logs", incident.pod, *ns, "--previous")
    assert incident.previous_log in previous

    events_table = cluster.kubectl("get", "events", *ns)
    assert events_table.splitlines()[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert incident.warning in events_table and f"pod/{incident.pod}" in events_table

    top_pods = cluster.kubectl("top", "pods", *ns)
    assert top_pods.splitlines()[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert incident.usage in top_pods

    top_nodes = cluster.kubectl("top", "nodes")
    assert "CPU%" in top_nodes and "gke-prod-eu-1-default-pool-3f1a2b7c-9xkq" in top_nodes

    nodes = cluster.kubectl("get", "nodes")
    assert "Ready" in nodes and "v1.30.5-gke.1014001" in nodes

    workloads = cluster.kubectl("get", "deployments,replicasets,statefulsets,daemonsets", *ns)
    deployment = incident.pod.rsplit("-", 2)[0]
    assert f"deployment.apps/{deployment}" in workloads
    assert f"replicaset.apps/{incident.pod.rsplit('-', 1)[0]}" in workloads

    config = cluster.kubectl("get", "services,configmaps,secrets", "-A")
    assert "service/" in config and "secret/" in config

    namespaces = cluster.kubectl("get", "namespaces")
    assert incident.namespace in namespaces and "Active" in namespaces


def test_kubectl_errors_read_as_a_real_servers(cluster: Cluster) -> None:
    cluster.switch("crashloop-bad-configmap")
    missing = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "--cache-dir",
         str(cluster.cache_dir), "get", "pod", "nope", "-n", "checkout"],
        capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert missing.returncode != 0
    assert 'Error from server (NotFound): pods "nope" not found' in missing.stderr


def test_secrets_are_served_without_their_data(cluster: Cluster) -> None:
    cluster.switch("crashloop-bad-configmap")
    secret = json.loads(
        cluster.kubectl("get", "secret", "payments-db-credentials", "-n", "checkout", "-o", "json")
    )
    assert "data" not in secret and secret["type"] == "Opaque"
    listed = cluster.kubectl("get", "secrets", "-n", "checkout")
    assert "payments-db-credentials" in listed.split("\n", 1)[1].split()[0]


# ─── kubernetes-mcp-server ────────────────────────────────────────────────────


def _text(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def _server(binary: Path, kubeconfig: Path) -> Client:
    parameters = StdioServerParameters(
        command=str(binary), args=[*SERVER_FLAGS, "--kubeconfig", str(kubeconfig)]
    )
    return Client(parameters, read_timeout_seconds=CALL_TIMEOUT_S)


def test_the_pinned_server_is_installed_from_the_lock_file(binary: Path) -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    locked = lock["packages"]["node_modules/kubernetes-mcp-server-linux-amd64"]
    assert locked["version"] == "0.0.66" and locked["integrity"].startswith("sha512-")
    assert pinned_version(ROOT) == "0.0.66"
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    assert "0.0.66" in version.stdout + version.stderr


async def test_the_server_lists_the_read_only_core_tools(cluster: Cluster, binary: Path) -> None:
    async with _server(binary, cluster.kubeconfig) as client:
        tools = (await client.list_tools()).tools
    assert sorted(tool.name for tool in tools) == sorted(TOOL_NAMES)
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools)


# Scenarios with metrics query Prometheus too: tests/integration/test_prometheus.py runs
# their playbooks through both servers.
@pytest.mark.parametrize("name", [n for n in scenario_names() if load_scenario(n).metrics is None])
async def test_every_playbook_step_through_kubernetes_mcp_server(
    cluster: Cluster, binary: Path, name: str
) -> None:
    scenario = load_scenario(name)
    cluster.switch(name)  # fault counts start afresh
    async with _server(binary, cluster.kubeconfig) as client:
        for number, step in enumerate(scenario.playbook.steps, 1):
            result = await client.call_tool(step.tool, step.arguments)
            text = _text(result)
            where = f"{name} step {number} {step.tool}({step.arguments})"
            assert bool(result.is_error) == step.fails, f"{where}: {text[:2000]}"
            missing = [expected for expected in step.expect if expected not in text]
            assert not missing, f"{where} lacks {missing}:\n{text[:4000]}"
            # Tool results are masked before the model sees them: the evidence must stay.
            masked = Masker().mask(text).text
            hidden = [expected for expected in step.expect if expected not in masked]
            assert not hidden, f"{where}: masking hides {hidden}"


async def test_the_injected_fault_reaches_the_model_as_a_tool_error(
    cluster: Cluster, binary: Path
) -> None:
    cluster.switch("media-evictions-flaky-api")
    async with _server(binary, cluster.kubeconfig) as client:
        first = await client.call_tool("events_list", {"namespace": "media"})
        again = await client.call_tool("events_list", {"namespace": "media"})
    assert first.is_error
    assert "the server was unable to return a response in the time allotted" in _text(first)
    assert not again.is_error and "Evicted" in _text(again)


async def test_every_tool_answers_from_the_demo_cluster(cluster: Cluster, binary: Path) -> None:
    cluster.switch("crashloop-bad-configmap")
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("namespaces_list", {}, "checkout"),
        ("pods_list", {}, "CrashLoopBackOff"),
        ("pods_list", {"labelSelector": "app.kubernetes.io/name=payments-db"}, "payments-db-0"),
        ("pods_list_in_namespace", {"namespace": "checkout"}, "payments-api-7d9f8b6c5-x2k4q"),
        ("pods_get", {"namespace": "checkout", "name": "payments-db-0"}, "postgres:16.4"),
        (
            "pods_log",
            {"namespace": "checkout", "name": "payments-api-7d9f8b6c5-x2k4q", "previous": True},
            "no such host",
        ),
        ("pods_log", {"namespace": "checkout", "name": "payments-db-0", "tail": 1}, "checkpoint"),
        ("events_list", {}, "Back-off restarting failed container"),
        ("events_list", {"namespace": "checkout"}, "ScalingReplicaSet"),
        ("resources_list", {"apiVersion": "apps/v1", "kind": "Deployment"}, "payments-api"),
        ("resources_list", {"apiVersion": "v1", "kind": "Node"}, "gke-prod-eu-1-default-pool"),
        (
            "resources_get",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "namespace": "checkout",
                "name": "payments-api-config",
            },
            "payments-db-primary.checkout.svc.cluster.local",
        ),
        ("pods_top", {}, "payments-db-0"),
        ("pods_top", {"namespace": "checkout", "all_namespaces": False}, "212m"),
        ("nodes_top", {}, "1210m"),
        ("nodes_top", {"name": "gke-prod-eu-1-default-pool-3f1a2b7c-h2mt"}, "980m"),
        (
            "nodes_stats_summary",
            {"name": "gke-prod-eu-1-default-pool-3f1a2b7c-h2mt"},
            '"usageNanoCores":980000000',
        ),
    ]
    async with _server(binary, cluster.kubeconfig) as client:
        for tool, arguments, expected in calls:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, (tool, arguments, _text(result))
            assert expected in _text(result), (tool, arguments, _text(result)[:3000])
        missing = await client.call_tool("pods_get", {"namespace": "checkout", "name": "nope"})
        no_previous = await client.call_tool(
            "pods_log", {"namespace": "checkout", "name": "payments-db-0", "previous": True}
        )
        node_log = await client.call_tool(
            "nodes_log", {"name": "gke-prod-eu-1-default-pool-3f1a2b7c-h2mt", "query": "kubelet"}
        )
    assert missing.is_error and 'pods "nope" not found' in _text(missing)
    assert no_previous.is_error and "previous terminated container" in _text(no_previous)
    assert node_log.is_error and "keeps no logs" in _text(node_log)


@pytest.mark.parametrize("name", scenario_names())
async def test_the_sloppy_models_calls_answer_without_evidence(
    cluster: Cluster, binary: Path, name: str
) -> None:
    scenario = load_scenario(name)
    cluster.switch(name)
    async with _server(binary, cluster.kubeconfig) as client:
        for tool, arguments in IRRELEVANT_CALLS:
            if scenario.is_relevant_call(tool, arguments):
                continue
            result = await client.call_tool(tool, arguments)
            if result.is_error:  # only where the scenario injects a fault
                assert any(f.message in _text(result) for f in scenario.faults), _text(result)


async def test_credentials_in_tool_output_get_masked(cluster: Cluster, binary: Path) -> None:
    cluster.switch("crashloop-bad-configmap")
    async with _server(binary, cluster.kubeconfig) as client:
        logs = _text(
            await client.call_tool(
                "pods_log",
                {"namespace": "checkout", "name": "payments-api-7d9f8b6c5-x2k4q", "previous": True},
            )
        )
    assert "Zx8pQ2vLm4" in logs
    masked = Masker().mask(logs).text
    assert "Zx8pQ2vLm4" not in masked
    assert "postgres://payments:[MASKED_PASSWORDS]@payments-db-primary" in masked

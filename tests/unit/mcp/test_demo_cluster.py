from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tarsy.models import AlertSubmission
from tarsy.tools.masking import Masker
from tarsy_dev.demo_cluster import (
    DEFAULT_SCENARIO,
    TOOL_NAMES,
    build_server,
    load_scenario,
    scenario_names,
)
from tarsy_dev.demo_cluster.cluster import (
    Cluster,
    cpu_millicores,
    human_duration,
    memory_bytes,
    plural,
    table,
)
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.demo_cluster.server import main

SCENARIOS = [
    "crashloop-bad-configmap",
    "oom-killed",
    "image-pull-error",
    "expired-tls-cert",
    "noisy-neighbour",
    "ledger-two-causes",
    "invoice-red-herring",
    "catalog-quota-events",
    "media-evictions-flaky-api",
    "cart-victim-networkpolicy",
    "notifier-self-resolved",
    "marketplace-noisy-namespace",
]


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def quick(scenario: Scenario) -> Scenario:
    """The scenario with its simulated timeouts cut to a few milliseconds."""
    faults = [fault.model_copy(update={"seconds": 0.01}) for fault in scenario.faults]
    return scenario.model_copy(update={"faults": faults})


@contextlib.asynccontextmanager
async def connected(scenario: str | Scenario = DEFAULT_SCENARIO) -> AsyncIterator[Client]:
    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    async with Client(build_server(quick(loaded))) as client:
        yield client


# ─── scenarios ────────────────────────────────────────────────────────────────


def test_scenario_names() -> None:
    assert scenario_names()[0] == DEFAULT_SCENARIO == "crashloop-bad-configmap"
    assert sorted(scenario_names()) == sorted(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_loads_and_validates(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.title and scenario.description
    # The alert is a valid submission, Alertmanager-shaped.
    alert = AlertSubmission.model_validate(scenario.alert.model_dump(mode="json"))
    assert alert.alert_type == "kubernetes"
    assert isinstance(alert.data, dict)
    firing = alert.data["alerts"][0]
    assert firing["status"] == "firing"
    assert firing["labels"]["alertname"]
    assert firing["annotations"]["summary"]
    # The analysis states every finding and no forbidden conclusion (also enforced by the model).
    for finding in scenario.expected.findings:
        assert finding.found_in(scenario.playbook.analysis), finding.fact
    for forbidden in scenario.expected.forbidden:
        assert forbidden.found_in(scenario.playbook.analysis) is None, forbidden.claim
        assert forbidden.found_in(forbidden.claim), forbidden.claim
    assert all(step.tool in TOOL_NAMES for step in scenario.playbook.steps)
    assert scenario.expected.tools
    assert scenario.cluster.name == "prod-eu-1"


@pytest.mark.parametrize("name", SCENARIOS)
def test_alert_targets_exist(name: str) -> None:
    scenario = load_scenario(name)
    cluster = Cluster(scenario.cluster)
    assert isinstance(scenario.alert.data, dict)
    labels = scenario.alert.data["alerts"][0]["labels"]
    namespaces = {ns.name for ns in scenario.cluster.namespaces}
    assert labels["namespace"] in namespaces
    if "pod" in labels:
        assert labels["pod"] in cluster.pods_get(labels["namespace"], labels["pod"])
    if "deployment" in labels:
        cluster.resources_get("apps/v1", "Deployment", labels["deployment"], labels["namespace"])


def test_unknown_scenario() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        load_scenario("nope")


def test_scenarios_extend_the_base_cluster() -> None:
    tls = Cluster(load_scenario("expired-tls-cert").cluster)
    issuer = tls.resources_get("cert-manager.io/v1", "ClusterIssuer", "letsencrypt-prod")
    assert "ingressClassName: nginx-legacy" in issuer
    default = Cluster(load_scenario().cluster)
    assert "ingressClassName: nginx\n" in default.resources_get(
        "cert-manager.io/v1", "ClusterIssuer", "letsencrypt-prod"
    )
    # Base pods are everywhere; scenario pods only in their scenario.
    assert "coredns-5d78c9869d-7hx2p" in default.pods_list()
    assert "image-resizer-backfill" not in default.pods_list()
    # A scenario can override one field of a base node.
    noisy = Cluster(load_scenario("noisy-neighbour").cluster)
    assert re.search(r"3f1a2b7c-wl5d\s+3871m\s+99%", noisy.nodes_top())
    assert re.search(r"3f1a2b7c-wl5d\s+1105m\s+28%", default.nodes_top())


# ─── the server, in memory ────────────────────────────────────────────────────


async def test_tools_are_listed_with_schemas() -> None:
    async with connected() as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tuple(tools) == TOOL_NAMES
    assert tools["resources_get"].input_schema["required"] == ["apiVersion", "kind", "name"]
    assert tools["pods_log"].input_schema["required"] == ["namespace", "name"]
    assert set(tools["pods_log"].input_schema["properties"]) == {
        "namespace",
        "name",
        "container",
        "previous",
    }
    assert "required" not in tools["pods_list"].input_schema
    for tool in tools.values():
        assert tool.description
        assert tool.annotations is not None and tool.annotations.read_only_hint


@pytest.mark.parametrize("name", SCENARIOS)
async def test_playbook_runs_and_shows_the_evidence(name: str) -> None:
    scenario = load_scenario(name)
    async with connected(name) as client:
        for step in scenario.playbook.steps:
            result = await client.call_tool(step.tool, step.arguments)
            text = text_of(result)
            # A step marked "fails" meets the scenario's simulated fault; the others succeed.
            assert bool(result.is_error) is step.fails, f"{step.tool} {step.arguments}: {text}"
            for evidence in step.expect:
                assert evidence in text, f"{step.tool} {step.arguments} lacks {evidence!r}"


@pytest.mark.parametrize("name", SCENARIOS)
async def test_every_tool_answers(name: str) -> None:
    # Without its simulated faults, every tool of every scenario answers.
    healthy = load_scenario(name).model_copy(update={"faults": []})
    async with connected(healthy) as client:
        for tool, arguments in [
            ("pods_list", {}),
            ("events_list", {}),
            ("nodes_top", {}),
            ("pods_top", {}),
            ("namespaces_list", {}),
            ("resources_list", {"apiVersion": "apps/v1", "kind": "Deployment"}),
            ("resources_list", {"apiVersion": "v1", "kind": "Node"}),
            ("resources_get", {"apiVersion": "v1", "kind": "Namespace", "name": "kube-system"}),
        ]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, text_of(result)
            assert text_of(result).strip()


async def test_outputs_look_like_kubectl() -> None:
    async with connected() as client:
        pods = text_of(await client.call_tool("pods_list", {"namespace": "checkout"}))
        assert pods.splitlines()[0].split() == [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
        ]
        crash = next(line for line in pods.splitlines() if "x2k4q" in line)
        assert re.search(r"0/1\s+CrashLoopBackOff\s+7 \(68s ago\)\s+9m56s\s+10\.8\.1\.17", crash)
        everywhere = text_of(await client.call_tool("pods_list", {}))
        assert everywhere.startswith("NAMESPACE ")
        pod = text_of(
            await client.call_tool(
                "pods_get", {"namespace": "checkout", "name": "payments-api-7d9f8b6c5-x2k4q"}
            )
        )
        assert pod.startswith("apiVersion: v1\nkind: Pod\nmetadata:\n")
        assert 'creationTimestamp: "2026-11-23T07:55:04Z"' in pod
        assert "uid: ff2054b6-22fb-5f6e-95c0-1e9acc9ee547" in pod
        assert "qosClass: Burstable" in pod
        assert "payments-api@sha256:" in pod
        events = text_of(await client.call_tool("events_list", {"namespace": "checkout"}))
        assert events.splitlines()[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
        assert "9s (x31 over 9m40s)   Warning   BackOff" in events
        namespaces = text_of(await client.call_tool("namespaces_list", {}))
        assert re.search(r"checkout\s+Active\s+69d", namespaces)
        secrets = text_of(
            await client.call_tool(
                "resources_list", {"apiVersion": "v1", "kind": "Secret", "namespace": "checkout"}
            )
        )
        assert re.search(r"payments-db-credentials\s+Opaque\s+2\s+69d", secrets)


async def test_lenient_kind_names() -> None:
    async with connected() as client:
        for kind in ("deployment", "Deployment", "deployments"):
            result = await client.call_tool(
                "resources_list", {"apiVersion": "apps/v1", "kind": kind, "namespace": "checkout"}
            )
            assert "payments-api" in text_of(result)


@pytest.mark.parametrize(
    ("scenario", "tool", "arguments", "message"),
    [
        (
            DEFAULT_SCENARIO,
            "pods_get",
            {"namespace": "checkout", "name": "nope"},
            'pods "nope" not found in namespace checkout',
        ),
        (
            DEFAULT_SCENARIO,
            "pods_log",
            {"namespace": "checkout", "name": "nope"},
            'pods "nope" not found in namespace checkout',
        ),
        (DEFAULT_SCENARIO, "pods_list", {"namespace": "nope"}, 'namespaces "nope" not found'),
        (
            DEFAULT_SCENARIO,
            "pods_log",
            {"namespace": "checkout", "name": "payments-db-0", "previous": True},
            'previous terminated container "postgres" in pod "payments-db-0" not found',
        ),
        (
            DEFAULT_SCENARIO,
            "pods_log",
            {"namespace": "checkout", "name": "payments-db-0", "container": "sidecar"},
            "container sidecar is not valid for pod payments-db-0",
        ),
        (
            "image-pull-error",
            "pods_log",
            {"namespace": "web", "name": "storefront-84b6d7c9f5-7tq2n"},
            'container "storefront" in pod "storefront-84b6d7c9f5-7tq2n" is waiting to start: '
            "trying and failing to pull image",
        ),
        (
            DEFAULT_SCENARIO,
            "resources_get",
            {"apiVersion": "v1", "kind": "Deployment", "namespace": "checkout", "name": "x"},
            'no matches for kind "Deployment" in version "v1" (Deployment is served as apps/v1)',
        ),
        (
            DEFAULT_SCENARIO,
            "resources_get",
            {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "checkout", "name": "x"},
            'deployments.apps "x" not found in namespace checkout',
        ),
        (
            DEFAULT_SCENARIO,
            "resources_get",
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "payments-api-config"},
            "a namespace is required",
        ),
        (
            DEFAULT_SCENARIO,
            "resources_list",
            {"apiVersion": "v1", "kind": "Widget"},
            'the server doesn\'t have a resource type "Widget"',
        ),
        (
            DEFAULT_SCENARIO,
            "pods_get",
            {"namespace": "checkout"},
            "name",
        ),
    ],
)
async def test_errors_are_tool_errors(
    scenario: str, tool: str, arguments: dict[str, Any], message: str
) -> None:
    async with connected(scenario) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert message in text_of(result)


async def test_empty_results_are_not_errors() -> None:
    async with connected() as client:
        result = await client.call_tool("events_list", {"namespace": "kube-public"})
        assert not result.is_error
        assert text_of(result) == "No resources found in kube-public namespace.\n"
        quiet = await client.call_tool(
            "pods_log", {"namespace": "checkout", "name": "payments-api-6c4b8d9f7-4kxmz"}
        )
        assert "listening" in text_of(quiet)


@pytest.mark.parametrize("name", SCENARIOS)
async def test_evidence_survives_masking(name: str) -> None:
    # Tool results are masked before the model sees them: the evidence must still be there.
    scenario = load_scenario(name)
    masker = Masker()
    async with connected(name) as client:
        for step in scenario.playbook.steps:
            result = await client.call_tool(step.tool, step.arguments)
            masked = masker.mask(text_of(result)).text
            for evidence in step.expect:
                assert evidence in masked, f"masking hides {evidence!r} from {step.tool}"


async def test_the_cluster_secrets_get_masked() -> None:
    masker = Masker()
    async with connected() as client:
        secret = text_of(
            await client.call_tool(
                "resources_get",
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "namespace": "checkout",
                    "name": "payments-db-credentials",
                },
            )
        )
        logs = text_of(
            await client.call_tool(
                "pods_log",
                {"namespace": "checkout", "name": "payments-api-7d9f8b6c5-x2k4q", "previous": True},
            )
        )
    assert "Wng4cFEydkxtNA==" in secret
    masked_secret = masker.mask(secret).text
    assert "Wng4cFEydkxtNA==" not in masked_secret
    assert "password: [MASKED_KUBERNETES_SECRETS]" in masked_secret
    assert "Zx8pQ2vLm4" in logs
    masked_logs = masker.mask(logs).text
    assert "Zx8pQ2vLm4" not in masked_logs
    assert "postgres://payments:[MASKED_PASSWORDS]@payments-db-primary" in masked_logs


# ─── formatting helpers ───────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (596, "9m56s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (47 * 3600, "47h"),
        (2 * 86400 + 16 * 3600, "2d16h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_human_duration(seconds: int, expected: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == expected


def test_quantities_and_tables() -> None:
    assert cpu_millicores("250m") == 250
    assert cpu_millicores("2") == 2000
    assert cpu_millicores("1.5") == 1500
    assert memory_bytes("512Mi") == 512 * 2**20
    assert memory_bytes("1G") == 10**9
    assert memory_bytes("16386308Ki") == 16386308 * 1024
    with pytest.raises(ValueError):
        cpu_millicores("lots")
    assert plural("Ingress") == "ingresses"
    assert plural("NetworkPolicy") == "networkpolicies"
    assert plural("Deployment") == "deployments"
    assert table(["A", "LONG"], [["xx", "y"]]) == "A    LONG\nxx   y\n"


# ─── real transports ──────────────────────────────────────────────────────────


async def test_streamable_http_subprocess() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tarsy_dev.demo_cluster",
        "--scenario",
        "oom-killed",
        "--transport",
        "http",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        assert process.stdout is not None
        url = None
        seen: list[str] = []
        while url is None:
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
            assert line, f"server exited: {''.join(seen)}"
            seen.append(line)
            match = re.search(
                r"demo-cluster MCP server \(scenario oom-killed\) listening on "
                r"(http://127\.0\.0\.1:\d+/mcp)",
                line,
            )
            url = match.group(1) if match else None
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            assert [tool.name for tool in tools.tools] == list(TOOL_NAMES)
            result = await session.call_tool("pods_list", {"namespace": "analytics"})
            assert not result.is_error
            assert "report-worker-5f7c9d8b4-zp2vk" in text_of(result)
            assert "CrashLoopBackOff" in text_of(result)
            missing = await session.call_tool(
                "pods_get", {"namespace": "analytics", "name": "report-worker-nope"}
            )
            assert missing.is_error
            assert 'pods "report-worker-nope" not found' in text_of(missing)
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


async def test_stdio_subprocess() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tarsy_dev.demo_cluster", "--scenario", "image-pull-error"],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("pods_list", {"namespace": "web"})
        assert not result.is_error
        assert "ImagePullBackOff" in text_of(result)


def test_cli_rejects_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--scenario", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_cli_help_lists_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--transport {stdio,http}" in out
    for name in SCENARIOS:
        assert name in out

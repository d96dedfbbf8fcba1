"""tarsy's streamable-HTTP MCP transport against the real kubernetes-mcp-server serving HTTP.

Deployed, the ``kubernetes`` server is kubernetes-mcp-server's image on Cloud
Run, reached over streamable HTTP (infra/kubernetes_mcp.tf: ``--port``,
``--stateless``, ``--read-only``); locally it runs over stdio. Here the same
pinned binary (the deployed image's version, package.json) serves HTTP with the
deployed flags on the demo cluster, and tarsy's own executor lists its tools
(through the Firestore cache), calls them cold and over a warm connection, and
gets a tool's error back as an observation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tarsy.config.schema import TarsyConfig
from tarsy.models import ToolCall
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy.tools.base import ToolListing
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.demo_cluster import TOOL_NAMES
from tarsy_dev.localstack.kubernetes_mcp import SERVER_FLAGS, ensure_installed
from tarsy_dev.localstack.processes import free_port, http_ok, spawn, stop, wait_until
from tarsy_dev.localstack.stack import start_kube_api

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "crashloop-bad-configmap"
NAMESPACE = "checkout"
POD = "payments-api-7d9f8b6c5-x2k4q"
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """kubernetes-mcp-server over HTTP, as deployed, on the demo cluster's incident."""
    state = tmp_path_factory.mktemp("k8s-mcp-http")
    kubeconfig = state / "kubeconfig"
    cluster = start_kube_api(SCENARIO, kubeconfig, state / "logs")
    port = free_port()
    server = spawn(
        "kubernetes-mcp-server-http",
        [str(ensure_installed(ROOT)), *SERVER_FLAGS, "--stateless",
         "--port", str(port), "--kubeconfig", str(kubeconfig)],
        log_dir=state / "logs",
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(http_ok(f"{url}/healthz"), timeout=START_TIMEOUT_S,
                   what="kubernetes-mcp-server (HTTP)", process=server)  # fmt: skip
        yield f"{url}/mcp"
    finally:
        stop(server)
        stop(cluster)


def executor(url: str, store: Store, *, warm: bool = False) -> MCPToolExecutor:
    config = TarsyConfig.model_validate(
        {"mcp_servers": {"kubernetes": {"transport": "http", "url": url, "call_timeout": 60}}}
    )
    return MCPToolExecutor(config, Settings(), store, warm=warm)


def pods_log(previous: bool) -> ToolCall:
    arguments = (
        f'{{"namespace": "{NAMESPACE}", "name": "{POD}", "previous": {str(previous).lower()}}}'
    )
    return ToolCall(id=f"log-{previous}", name="kubernetes.pods_log", arguments=arguments)


@pytest.fixture
async def listing(mcp_url: str, store: Store) -> AsyncIterator[ToolListing]:
    yield await executor(mcp_url, store).list_tools(["kubernetes"], cached={})


async def test_the_http_server_lists_the_read_only_core_tools_and_the_list_is_cached(
    listing: ToolListing, store: Store
) -> None:
    assert listing.unavailable == {}
    assert sorted(t.name for t in listing.tools) == sorted(f"kubernetes.{n}" for n in TOOL_NAMES)
    cached = await store.get_tool_lists(["kubernetes"])
    assert sorted(t.name for t in cached["kubernetes"].tools) == sorted(
        t.name for t in listing.tools
    )


async def test_a_call_over_http_reads_the_incident_from_the_cluster(
    mcp_url: str, store: Store, listing: ToolListing
) -> None:
    [result] = await executor(mcp_url, store).call_tools([pods_log(previous=True)], listing)
    assert not result.is_error, result.content
    assert "could not connect to database after 5 attempts" in result.content


async def test_a_warm_connection_serves_two_steps_of_calls(
    mcp_url: str, store: Store, listing: ToolListing
) -> None:
    warm = executor(mcp_url, store, warm=True)
    try:
        [first] = await warm.call_tools([pods_log(previous=True)], listing)
        events = ToolCall(
            id="events", name="kubernetes.events_list", arguments=f'{{"namespace": "{NAMESPACE}"}}'
        )
        [second] = await warm.call_tools([events], listing)
    finally:
        assert warm.pool is not None
        await warm.pool.close()
    assert not first.is_error and not second.is_error
    assert "could not connect to database" in first.content
    assert "BackOff" in second.content


async def test_a_tool_error_over_http_is_an_observation_not_a_failure(
    mcp_url: str, store: Store, listing: ToolListing
) -> None:
    missing = ToolCall(
        id="missing", name="kubernetes.pods_get",
        arguments=f'{{"namespace": "{NAMESPACE}", "name": "no-such-pod"}}',
    )  # fmt: skip
    [result] = await executor(mcp_url, store).call_tools([missing], listing)
    assert result.is_error
    assert "no-such-pod" in result.content

"""MCP calls retried on transient failures, against a real MCP server on loopback.

The server (flaky_mcp_server.py) answers its first ``tools/call`` requests with
an HTTP error, as a Cloud Run service does while it starts; or it is not
listening yet at all. The executor's backoff goes through an injected sleep
that records the delays (and, for "connection refused", starts the server),
so no test waits on the clock. The server counts the calls it received.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tarsy.config.schema import TarsyConfig
from tarsy.models import ToolCall
from tarsy.settings import Settings
from tarsy.tools.base import ToolListing, ToolResult
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, stop, wait_until

SERVER = Path(__file__).with_name("flaky_mcp_server.py")
LISTING = ToolListing.model_validate(
    {
        "tools": [
            {"name": "flaky.echo", "description": "", "parameters": {"type": "object"}},
            {"name": "flaky.broken", "description": "", "parameters": {"type": "object"}},
        ]
    }
)
# Far from what a loopback call takes, even on a busy machine.
CALL_TIMEOUT_S = 20.0


class Servers:
    """Starts flaky servers for one test and stops them all after it."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[ProcessInfo] = []

    def start(
        self, port: int, *, fail_first: int = 0, status: int = 503, audience: str | None = None
    ) -> str:
        argv = [sys.executable, str(SERVER), "--port", str(port), "--fail-first", str(fail_first),
                "--status", str(status)]  # fmt: skip
        if audience is not None:
            argv += ["--audience", audience]
        url = f"http://127.0.0.1:{port}"
        process = spawn(f"flaky-{port}", argv, log_dir=self.log_dir, url=url)
        self.started.append(process)
        wait_until(http_ok(f"{url}/calls"), timeout=30, what="flaky MCP server", process=process)
        return f"{url}/mcp"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    running = Servers(tmp_path)
    yield running
    for process in running.started:
        stop(process)


def calls_received(mcp_url: str) -> int:
    count = httpx.get(mcp_url.removesuffix("/mcp") + "/calls", timeout=5).json()["calls"]
    assert isinstance(count, int)
    return count


def executor(
    url: str,
    sleep: Callable[[float], Awaitable[None]],
    *,
    max_attempts: int = 3,
    warm: bool = False,
    keep_warm: bool = True,
) -> MCPToolExecutor:
    config = TarsyConfig.model_validate(
        {
            "mcp_servers": {
                "flaky": {
                    "transport": "http",
                    "url": url,
                    "connect_timeout": 10,
                    "call_timeout": CALL_TIMEOUT_S,
                    "retry": {"max_attempts": max_attempts, "initial_delay": 0.5, "max_delay": 2},
                    "keep_warm": keep_warm,
                }
            }
        }
    )
    # call_tools reads nothing from Firestore.
    store: Any = None
    return MCPToolExecutor(config, Settings(), store, sleep=sleep, warm=warm)


def call(tool: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id=f"{tool}-1", name=f"flaky.{tool}", arguments=arguments)


class Backoff:
    """The executor's sleep: records each delay, runs an optional hook, waits for nothing."""

    def __init__(self, hook: Callable[[], object] | None = None) -> None:
        self.delays: list[float] = []
        self.hook = hook

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.hook is not None:
            self.hook()
            self.hook = None


async def test_a_call_answered_503_twice_succeeds_on_the_third_attempt(servers: Servers) -> None:
    url = servers.start(free_port(), fail_first=2)
    backoff = Backoff()
    [result] = await executor(url, backoff).call_tools([call("echo", '{"text": "hi"}')], LISTING)
    assert (result.is_error, result.content) == (False, "echo: hi")
    assert calls_received(url) == 3
    assert len(backoff.delays) == 2
    assert all(0 <= delay <= 2 for delay in backoff.delays)


async def test_a_server_that_refuses_connections_is_called_again_once_it_listens(
    servers: Servers,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    # Nothing listens on the port at the first attempt; the server starts during the backoff.
    backoff = Backoff(hook=lambda: servers.start(port))
    [result] = await executor(url, backoff).call_tools([call("echo", '{"text": "up"}')], LISTING)
    assert (result.is_error, result.content) == (False, "echo: up")
    assert len(backoff.delays) == 1
    assert calls_received(url) == 1


async def test_a_call_that_keeps_failing_is_an_observation_saying_how_often_it_was_tried(
    servers: Servers,
) -> None:
    url = servers.start(free_port(), fail_first=100)
    backoff = Backoff()
    [result] = await executor(url, backoff).call_tools([call("echo", '{"text": "x"}')], LISTING)
    assert result.is_error
    assert result.content.startswith("Error calling flaky.echo: MCPError: ")
    assert result.content.endswith("(failed 3 attempts)")
    assert calls_received(url) == 3
    assert len(backoff.delays) == 2


@pytest.mark.parametrize(
    ("tool", "fail_first", "status"),
    [("broken", 0, 503), ("echo", 100, 403)],
    ids=["the tool's own error", "an HTTP 403"],
)
async def test_a_failure_that_is_not_transient_is_not_retried(
    servers: Servers, tool: str, fail_first: int, status: int
) -> None:
    url = servers.start(free_port(), fail_first=fail_first, status=status)
    backoff = Backoff()
    [result] = await executor(url, backoff).call_tools([call(tool, '{"text": "x"}')], LISTING)
    assert result.is_error
    assert "attempts" not in result.content
    assert calls_received(url) == 1
    assert backoff.delays == []


async def test_only_the_calls_that_failed_are_made_again(servers: Servers) -> None:
    # The first tools/call request fails with 503; which of the two it is depends on
    # the order the client sends them, so the test only counts.
    url = servers.start(free_port(), fail_first=1)
    calls = [
        ToolCall(id="a", name="flaky.echo", arguments='{"text": "a"}'),
        ToolCall(id="b", name="flaky.echo", arguments='{"text": "b"}'),
    ]
    results: list[ToolResult] = await executor(url, Backoff()).call_tools(calls, LISTING)
    assert [r.content for r in results] == ["echo: a", "echo: b"]
    assert calls_received(url) == 3


async def test_no_retry_starts_that_the_step_budget_could_not_hold(servers: Servers) -> None:
    url = servers.start(free_port(), fail_first=100)
    backoff = Backoff()
    # Less left than one more connect + call could take.
    budget = time.monotonic() + CALL_TIMEOUT_S / 2
    tools = executor(url, backoff)
    [result] = await tools.call_tools([call("echo", '{"text": "x"}')], LISTING, budget=budget)
    assert result.is_error
    assert calls_received(url) == 1
    assert backoff.delays == []


# ─── warm connections (issue 26, item 5) ──────────────────────────────────────


def sessions_opened(mcp_url: str) -> int:
    count = httpx.get(mcp_url.removesuffix("/mcp") + "/sessions", timeout=5).json()["sessions"]
    assert isinstance(count, int)
    return count


async def test_a_warm_executor_reuses_one_connection_across_steps(servers: Servers) -> None:
    url = servers.start(free_port())
    warm = executor(url, Backoff(), warm=True)
    assert warm.pool is not None
    try:
        for step in range(3):
            [result] = await warm.call_tools([call("echo", f'{{"text": "{step}"}}')], LISTING)
            assert result.content == f"echo: {step}", result
        assert sessions_opened(url) == 1 and warm.pool.opened == 1
    finally:
        await warm.pool.close()


async def test_a_warm_connection_that_failed_is_replaced_on_the_retry(
    servers: Servers, tmp_path: Path
) -> None:
    port = free_port()
    url = servers.start(port)
    restarted = Servers(tmp_path)
    # The server goes away; while the executor backs off, it comes back.
    backoff = Backoff(hook=lambda: restarted.start(port))
    warm = executor(url, backoff, warm=True, max_attempts=3)
    assert warm.pool is not None
    try:
        [first] = await warm.call_tools([call("echo", '{"text": "a"}')], LISTING)
        assert first.content == "echo: a"
        stop(servers.started.pop())
        [second] = await warm.call_tools([call("echo", '{"text": "b"}')], LISTING)
        assert second.content == "echo: b", second
        assert len(backoff.delays) == 1  # one failed attempt on the broken connection
        assert warm.pool.opened == 2  # and the retry on a new one
    finally:
        await warm.pool.close()
        for process in restarted.started:
            stop(process)


async def test_a_server_that_must_not_stay_warm_gets_a_connection_per_step(
    servers: Servers,
) -> None:
    url = servers.start(free_port())
    cold = executor(url, Backoff(), warm=True, keep_warm=False)
    assert cold.pool is not None
    for step in range(3):
        [result] = await cold.call_tools([call("echo", f'{{"text": "{step}"}}')], LISTING)
        assert result.content == f"echo: {step}", result
    assert sessions_opened(url) == 3 and cold.pool.opened == 0

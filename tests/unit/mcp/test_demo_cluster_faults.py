"""Simulated tool failures and switching scenarios on a running demo cluster."""

from __future__ import annotations

import asyncio
import re
import sys
import time

import httpx
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tarsy_dev.demo_cluster import build_server, load_scenario
from tarsy_dev.demo_cluster.faults import Fault, FaultPlan
from tarsy_dev.demo_cluster.server import ServedScenario, main

TIMEOUT_MESSAGE = "Error from server (Timeout)"


def text_of(result: CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def test_fault_plan_counts_matching_calls_only() -> None:
    plan = FaultPlan(
        [Fault(tool="pods_log", arguments={"namespace": "Shop"}, calls=[2, 3], message="boom")]
    )
    assert plan.next_failure("pods_log", {"namespace": "shop", "name": "a"}) is None
    assert plan.next_failure("pods_log", {"namespace": "other"}) is None  # not counted
    assert plan.next_failure("events_list", {"namespace": "shop"}) is None
    assert plan.next_failure("pods_log", {"namespace": "shop"}) is not None  # 2nd
    assert plan.next_failure("pods_log", {"namespace": "shop"}) is not None  # 3rd
    assert plan.next_failure("pods_log", {"namespace": "shop"}) is None  # 4th
    plan.reset()
    assert plan.next_failure("pods_log", {"namespace": "shop"}) is None
    assert plan.next_failure("pods_log", {"namespace": "shop"}) is not None


def test_faults_are_validated() -> None:
    with pytest.raises(ValueError, match="counted from 1"):
        Fault(tool="pods_log", calls=[0], message="x")
    with pytest.raises(ValueError):
        Fault(tool="pods_log", message="")


async def test_the_first_events_query_fails_and_a_retry_succeeds() -> None:
    scenario = load_scenario("media-evictions-flaky-api")
    [fault] = scenario.faults
    quick = scenario.model_copy(update={"faults": [fault.model_copy(update={"seconds": 0.2})]})
    async with Client(build_server(quick)) as client:
        started = time.monotonic()
        first = await client.call_tool("events_list", {"namespace": "media"})
        assert time.monotonic() - started >= 0.2  # a timeout fault hangs before failing
        assert first.is_error
        assert TIMEOUT_MESSAGE in text_of(first)
        second = await client.call_tool("events_list", {"namespace": "media"})
        assert not second.is_error
        assert "Evicted" in text_of(second)


async def test_switching_scenarios_serves_the_new_cluster_and_restarts_fault_counts() -> None:
    media = load_scenario("media-evictions-flaky-api")
    fast = media.model_copy(
        update={"faults": [f.model_copy(update={"seconds": 0.0}) for f in media.faults]}
    )
    served = ServedScenario(fast)
    async with Client(build_server(served)) as client:
        assert (await client.call_tool("events_list", {})).is_error
        assert not (await client.call_tool("events_list", {})).is_error
        assert served.switch("oom-killed").name == served.scenario.name == "oom-killed"
        pods = await client.call_tool("pods_list", {"namespace": "analytics"})
        assert "report-worker-5f7c9d8b4-zp2vk" in text_of(pods)
        served.serve(fast)  # served afresh: the fault is due again
        assert (await client.call_tool("events_list", {})).is_error
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        served.switch("nope")


async def test_switchable_http_server() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tarsy_dev.demo_cluster", "--scenario", "oom-killed",
        "--transport", "http", "--port", "0", "--switchable",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=60)).decode()
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)/mcp", line)
        assert match, line
        base = match.group(1)
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            assert (await http.get("/scenario")).json() == {"scenario": "oom-killed"}
            switched = await http.post("/scenario", json={"scenario": "image-pull-error"})
            assert switched.status_code == 200
            assert switched.json() == {"scenario": "image-pull-error"}
            unknown = await http.post("/scenario", json={"scenario": "nope"})
            assert unknown.status_code == 400
            assert "unknown scenario 'nope'" in unknown.json()["error"]
            malformed = await http.post("/scenario", json=["image-pull-error"])
            assert malformed.status_code == 400
        async with (
            streamable_http_client(f"{base}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("pods_list", {"namespace": "web"})
            assert "ImagePullBackOff" in text_of(result)
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)


def test_switchable_needs_http(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--switchable"])
    assert exit_info.value.code == 2
    assert "--switchable needs --transport http" in capsys.readouterr().err

"""Simulated API failures, and switching scenarios on a running demo cluster."""

from __future__ import annotations

import time

import httpx
import pytest

from tarsy_dev.demo_cluster import build_app, load_scenario
from tarsy_dev.demo_cluster.faults import ApiRequest, Fault, FaultPlan
from tarsy_dev.demo_cluster.kube_api import ServedScenario

TIMEOUT_MESSAGE = "the server was unable to return a response in the time allotted"


def test_fault_plan_counts_matching_requests_only() -> None:
    plan = FaultPlan(
        [Fault(verb="get", resource="pods/log", namespace="shop", calls=[2, 3], message="boom")]
    )
    log = ApiRequest(verb="get", resource="pods/log", namespace="shop", name="a")
    assert plan.next_failure(log) is None
    other = ApiRequest(verb="get", resource="pods/log", namespace="other", name="a")
    assert plan.next_failure(other) is None  # not counted
    assert plan.next_failure(ApiRequest(verb="list", resource="events")) is None
    assert plan.next_failure(log) is not None  # 2nd
    assert plan.next_failure(log) is not None  # 3rd
    assert plan.next_failure(log) is None  # 4th
    plan.reset()
    assert plan.next_failure(log) is None
    assert plan.next_failure(log) is not None


def test_faults_are_validated() -> None:
    with pytest.raises(ValueError, match="counted from 1"):
        Fault(verb="list", resource="events", calls=[0], message="x")
    with pytest.raises(ValueError):
        Fault(verb="list", resource="events", message="")
    with pytest.raises(ValueError):
        Fault.model_validate({"verb": "delete", "resource": "pods", "message": "x"})


async def test_the_first_events_list_times_out_and_a_retry_succeeds() -> None:
    scenario = load_scenario("media-evictions-flaky-api")
    [fault] = scenario.faults
    quick = scenario.model_copy(update={"faults": [fault.model_copy(update={"seconds": 0.2})]})
    transport = httpx.ASGITransport(app=build_app(quick))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        started = time.monotonic()
        first = await client.get("/api/v1/namespaces/media/events")
        assert time.monotonic() - started >= 0.2  # a timeout fault hangs before failing
        assert first.status_code == 504
        assert first.json()["reason"] == "Timeout"
        assert TIMEOUT_MESSAGE in first.json()["message"]
        second = await client.get("/api/v1/namespaces/media/events")
        assert second.status_code == 200
        assert "Evicted" in {e["reason"] for e in second.json()["items"]}


async def test_switching_scenarios_serves_the_new_cluster_and_restarts_fault_counts() -> None:
    media = load_scenario("media-evictions-flaky-api")
    fast = media.model_copy(
        update={"faults": [f.model_copy(update={"seconds": 0.0}) for f in media.faults]}
    )
    served = ServedScenario(fast)
    transport = httpx.ASGITransport(app=build_app(served))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        assert (await client.get("/api/v1/events")).status_code == 504
        assert (await client.get("/api/v1/events")).status_code == 200
        assert served.switch("oom-killed").name == served.scenario.name == "oom-killed"
        pods = (await client.get("/api/v1/namespaces/analytics/pods")).json()["items"]
        assert "report-worker-5f7c9d8b4-zp2vk" in {p["metadata"]["name"] for p in pods}
        served.serve(fast)  # served afresh: the fault is due again
        assert (await client.get("/api/v1/events")).status_code == 504
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        served.switch("nope")

from __future__ import annotations

import threading

import httpx

from tarsy_dev.localstack.scheduler import next_fire, run_on_schedule, sweep_once


def test_sweep_once_posts_with_the_key_and_returns_the_report() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"republished": ["e1"], "timed_out": []})

    with httpx.Client(transport=httpx.MockTransport(handler), headers={"X-API-Key": "k"}) as client:
        report = sweep_once(client, "http://api.local/")

    assert report == {"republished": ["e1"], "timed_out": []}
    [request] = seen
    assert (request.method, str(request.url)) == ("POST", "http://api.local/sweep")
    assert request.headers["X-API-Key"] == "k"


def test_the_next_tick_is_on_the_minute_whatever_time_the_last_sweep_took() -> None:
    assert next_fire(0.0, 60.0) == 60.0
    assert next_fire(125.3, 60.0) == 180.0
    # A sweep that ran from 120 s to 178 s (slow): the next one still fires at 180 s,
    # not 60 s after it ended.
    assert next_fire(178.0, 60.0) == 180.0
    assert next_fire(180.0, 60.0) == 240.0


def test_a_job_posts_on_each_tick_of_its_schedule_and_survives_a_failed_call() -> None:
    seen: list[str] = []
    stop = threading.Event()
    now = [100.0]
    waits: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) == 3:
            stop.set()
        if len(seen) == 2:
            return httpx.Response(503, json={"error": "starting"})
        return httpx.Response(200, json={"stamped": ["s1"]})

    class Stop:
        """The stop event, with the clock moved to the tick each wait asks for."""

        def wait(self, timeout: float) -> bool:
            waits.append(timeout)
            now[0] += timeout
            return stop.is_set()

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        run_on_schedule(client, "http://api.local", "/retention", 300.0, Stop(), lambda: now[0])

    assert seen == ["/retention", "/retention", "/retention"]
    assert waits == [200.0, 300.0, 300.0, 300.0]

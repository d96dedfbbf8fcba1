from __future__ import annotations

import httpx

from tarsy_dev.localstack.scheduler import sweep_once


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

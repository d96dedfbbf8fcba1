"""The local sign-in proxy passes on the host the browser asked for (issue 42, point 1).

The api's same-origin check (tarsy.http.same_origin) takes a request's Origin
when it is the host the browser sent the request to; behind the proxy the api
sees the proxy's upstream as Host, so the proxy says which host it was asked
for, and drops any caller's own claim of it.
"""

from __future__ import annotations

import httpx

from tests.unit.test_signin_proxy import proxy, upstream

__all__ = ["proxy", "upstream"]  # the fixtures of the proxy's own tests, used here


def test_the_proxy_passes_on_the_host_the_browser_asked_for_and_only_that(
    proxy: tuple[str, bytes], upstream: tuple[str, list[dict[str, str]]]
) -> None:
    url, _ = proxy
    _, seen = upstream
    headers = {"Origin": "http://localhost:1234", "X-Forwarded-Host": "evil.example"}
    response = httpx.get(url + "/sessions", headers={**headers, "Host": "localhost:1234"})
    assert response.status_code == 200
    forwarded = {name.lower(): value for name, value in seen[-1].items()}
    # The api's same-origin check reads it (tarsy.http.same_origin): the caller's own is dropped.
    assert forwarded["x-forwarded-host"] == "localhost:1234"
    assert forwarded["origin"] == "http://localhost:1234"

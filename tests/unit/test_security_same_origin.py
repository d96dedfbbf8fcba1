"""No action from another site (issue 42): every state-changing route, from the route table.

Each request is signed in with the role its route needs (a responder's, an
admin's for erasure), so a refusal here is the same-origin check's, not the
sign-in's or the role's. The
store records every call: a refused request must not have read or written
anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from importlib import resources
from typing import Any, cast

import pytest

from tarsy.access.roles import RECORDED_ACTIONS
from tarsy.api.handlers import handle
from tarsy.app import Deps
from tarsy.errors import InputError
from tarsy.http.request import HttpRequest, to_framework_response
from tarsy.http.routes import API_ROUTES, Route, state_changing_routes
from tarsy.http.same_origin import check_same_origin, own_origins
from tarsy.persistence.store import Store
from tarsy.tools.masking import MaskingConfig
from tarsy.web import pages
from tests.unit.signin import ADMIN, RESPONDER, SignIn, signin_server

PUBLIC = "https://tarsy.example.com"
# A body each action accepts, so that a request that passes the checks reaches the store.
VALID_BODY: dict[str, dict[str, Any]] = {
    "chat": {"question": "what changed?"},
    "feedback": {"verdict": "wrong", "root_cause": "a made-up cause"},
    "erase": {"reason": "a secret pasted by mistake"},
}


class RecordingStore:
    """Answers every read with 'no such thing' and records every call (reads and writes)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., Awaitable[None]]:
        async def call(*args: object, **kwargs: object) -> None:
            self.calls.append(name)

        return call


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


def _deps(signin: SignIn, store: RecordingStore) -> Deps:
    config = type("C", (), {"alert_masking": MaskingConfig()})()
    settings = signin.settings(TARSY_PUBLIC_API_URL=PUBLIC)
    fields = {"settings": settings, "store": cast(Store, store), "config": config}
    return cast(Deps, type("D", (), fields)())


def _request(
    signin: SignIn, route: Route, content_type: str | None, body: bytes, **headers: str
) -> HttpRequest:
    user = ADMIN if route.role == "admin" else RESPONDER
    sent = {**signin.headers(user), "host": "tarsy.example.com", **headers}
    if content_type is not None:
        sent["content-type"] = content_type
    return HttpRequest(
        method=route.method,
        path=route.path(session_id="s-1", execution_id="e-1"),
        headers=sent,
        body=body,
    )


def _json_body(route: Route) -> bytes:
    assert route.action is not None
    return json.dumps(VALID_BODY.get(route.action, {})).encode()


def _id(route: Route) -> str:
    return f"{route.method} {route.template}"


CHANGING = state_changing_routes()

# What a page on another site can make a signed-in browser send, and what gives it away.
FORGED: dict[str, tuple[str | None, Callable[[Route], bytes], dict[str, str]]] = {
    "a form post": ("application/x-www-form-urlencoded", lambda r: b"verdict=wrong", {}),
    "a multipart form": ("multipart/form-data; boundary=x", lambda r: b"--x--", {}),
    "a text/plain post": ("text/plain", _json_body, {}),
    "no content type": (None, _json_body, {}),
    "a foreign Origin": ("application/json", _json_body, {"origin": "https://evil.example"}),
    "a null Origin": ("application/json", _json_body, {"origin": "null"}),
    "a cross-site fetch": ("application/json", _json_body, {"sec-fetch-site": "cross-site"}),
    "a same-site fetch": ("application/json", _json_body, {"sec-fetch-site": "same-site"}),
    "everything the issue tried": (
        "text/plain",
        _json_body,
        {"origin": "https://evil.example", "sec-fetch-site": "cross-site"},
    ),
}


def test_the_table_has_every_recorded_action_as_a_state_changing_route() -> None:
    # A new action is a new route in the table, and so under every test below.
    assert {r.action for r in CHANGING} == set(RECORDED_ACTIONS)
    assert all(r.method in ("POST", "DELETE") for r in CHANGING)
    assert {r.template for r in CHANGING} >= {
        "/sessions/{session_id}/cancel",
        "/sessions/{session_id}/feedback",
        "/sessions/{session_id}/investigate",
        "/sessions/{session_id}/executions/{execution_id}/cancel",
    }


@pytest.mark.parametrize("route", CHANGING, ids=_id)
@pytest.mark.parametrize("what", list(FORGED))
async def test_a_request_another_site_could_make_is_refused_and_touches_nothing(
    signin: SignIn, route: Route, what: str
) -> None:
    content_type, body, headers = FORGED[what]
    store = RecordingStore()
    response = await handle(
        _request(signin, route, content_type, body(route), **headers), _deps(signin, store)
    )
    assert response.status == 403, (what, response.body)
    assert "refused" in response.body["error"]["message"]
    assert "required_role" not in json.dumps(response.body)  # not the role check's refusal
    assert store.calls == []


@pytest.mark.parametrize("route", CHANGING, ids=_id)
@pytest.mark.parametrize(
    "headers",
    [
        {"origin": PUBLIC, "sec-fetch-site": "same-origin"},  # the page, through the proxy
        {"origin": "https://TARSY.example.com"},  # the host it was sent to, any case
        # The host a proxy in front was asked for (the local sign-in proxy passes it on).
        {"origin": "http://localhost:8080", "x-forwarded-host": "localhost:8080"},
        {},  # the CLI, curl: no browser headers
    ],
    ids=["the page", "its own host", "the host asked of a proxy", "not a browser"],
)
async def test_the_pages_own_json_request_passes_the_checks(
    signin: SignIn, route: Route, headers: dict[str, str]
) -> None:
    store = RecordingStore()
    request = _request(signin, route, "application/json; charset=utf-8", _json_body(route))
    request.headers.update(headers)
    response = await handle(request, _deps(signin, store))
    # Past every check: the action looked the session up, found none, and wrote nothing.
    assert response.status == 404, response.body
    assert store.calls == ["get_session"]


@pytest.mark.parametrize("route", CHANGING, ids=_id)
@pytest.mark.parametrize("body", [b"[1]", b'"{}"', b'{"unexpected": 1}'])
async def test_json_that_is_not_the_actions_body_is_refused_before_anything(
    signin: SignIn, route: Route, body: bytes
) -> None:
    store = RecordingStore()
    response = await handle(_request(signin, route, "application/json", body), _deps(signin, store))
    assert response.status == 422, response.body
    assert store.calls == []


async def test_reads_are_not_refused_for_their_origin(signin: SignIn) -> None:
    # A cross-site read is the browser's business (no CORS: the page cannot read the answer).
    store = RecordingStore()
    route = next(r for r in API_ROUTES if r.template == "/sessions/{session_id}")
    request = _request(signin, route, None, b"", origin="https://evil.example")
    response = await handle(request, _deps(signin, store))
    assert response.status == 404 and store.calls == ["get_session"]


def test_origins_and_fetch_sites_directly() -> None:
    assert own_origins({"host": "api.local:8080"}, "") == {
        "http://api.local:8080",
        "https://api.local:8080",
    }
    assert own_origins({}, "https://tarsy.example.com/some/path") == {PUBLIC}
    json_type = {"content-type": "application/json"}
    check_same_origin({**json_type, "sec-fetch-site": "same-origin", "origin": PUBLIC}, PUBLIC)
    check_same_origin({**json_type, "sec-fetch-site": "none"}, PUBLIC)
    with pytest.raises(InputError, match="may not change anything"):
        check_same_origin({**json_type, "origin": "https://tarsy.example.com.evil.example"}, PUBLIC)


@pytest.mark.parametrize("route", CHANGING, ids=_id)
async def test_another_method_on_an_action_is_refused_before_anything(
    signin: SignIn, route: Route
) -> None:
    store = RecordingStore()
    request = _request(signin, route, None, b"").model_copy(update={"method": "PUT"})
    response = await handle(request, _deps(signin, store))
    assert response.status == 405
    assert route.method in response.headers["Allow"].split(", ")
    assert store.calls == []


async def test_api_responses_say_nosniff_and_the_pages_keep_their_csp(signin: SignIn) -> None:
    store = RecordingStore()
    route = CHANGING[0]
    response = await handle(_request(signin, route, "text/plain", b"{}"), _deps(signin, store))
    _, status, headers = to_framework_response(response)
    assert status == 403 and headers["X-Content-Type-Options"] == "nosniff"
    page = await pages.handle(HttpRequest(method="GET", path="/ui/"), _deps(signin, store))
    _, _, page_headers = page.to_framework()
    assert "frame-ancestors 'none'" in page_headers["Content-Security-Policy"]
    assert page_headers["X-Content-Type-Options"] == "nosniff"


def test_the_pages_script_sends_every_action_as_json() -> None:
    script = resources.files("tarsy.web").joinpath("static", "app.js").read_text()
    # The one request function sets the JSON content type whenever there is a body...
    assert re.search(
        r'if \(body !== undefined\) \{\s*init\.headers\["Content-Type"\] = "application/json";',
        script,
    )
    # ...and every POST it makes has one ({} when the action has no fields).
    posts = re.findall(r'call\("POST",([^;]*)\)', script)
    assert posts, "the page makes no POST at all?"
    for arguments in posts:
        assert arguments.count(",") >= 1, arguments  # a body argument follows the path
    assert 'call("POST", path, body === undefined ? {} : body)' in script

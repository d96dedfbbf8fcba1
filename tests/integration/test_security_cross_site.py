"""No action from another site (issue 42), tried from outside through the local sign-in proxy.

The proxy signs every request as the stack's admin, as Identity-Aware Proxy
signs a browser's request that carries its cookie: exactly what a page on
another site would ride on. Each state-changing route of the route table is
sent a form POST, a ``text/plain`` POST, a foreign ``Origin`` and a
``cross-site`` fetch; each is refused with 403, and the finished session they
aim at (which would take feedback, a chat, a re-score and a new
investigation) is left exactly as it was. The same request as the page sends
it passes.
"""

from __future__ import annotations

import json

import httpx

from tarsy.http.routes import state_changing_routes
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.localstack.stack import Stack

WAIT_S = 90.0
BODIES: dict[str, dict[str, str]] = {
    "chat": {"question": "who did it?"},
    "feedback": {"verdict": "wrong", "root_cause": "a cause made up on another site"},
    "erase": {"reason": "erased from another site"},
}


def finished(client: TarsyClient, session_id: str) -> SessionView:
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal, last.status
    return last


def untouched(before: SessionView, after: SessionView) -> None:
    """Nothing judged, asked, re-run, cancelled or recorded since ``before``.

    (A judge the session's own end started may still be running: only chats count.)
    """
    assert after.session["feedback"] is None and after.session["verdict"] is None
    assert after.session["investigated_again_as"] == []
    assert after.session["audit_keys"] == [] and after.audit == []
    assert not after.session["cancel_requested"]
    assert [e for e in after.executions if e["role"] == "chat"] == []


def test_a_form_a_text_post_a_foreign_origin_and_a_cross_site_fetch_change_nothing(
    stack: Stack, client: TarsyClient
) -> None:
    before = finished(client, client.submit({"alert_type": "generic", "data": "5xx"}).session_id)
    session_id = before.session["session_id"]
    [execution] = [e for e in before.executions if e["role"] == "agent"]
    own = {"Content-Type": "application/json", "Origin": stack.signin_url}
    with httpx.Client(base_url=stack.signin_url, timeout=10) as proxy:
        for route in state_changing_routes():
            path = route.path(session_id=session_id, execution_id=execution["execution_id"])
            body = json.dumps(BODIES.get(route.action or "", {}))
            forged = {
                "a form post": (
                    {"Content-Type": "application/x-www-form-urlencoded"},
                    "verdict=wrong",
                ),
                "a text/plain post": ({"Content-Type": "text/plain"}, body),
                "a foreign Origin": ({**own, "Origin": "https://evil.example"}, body),
                "a cross-site fetch": ({**own, "Sec-Fetch-Site": "cross-site"}, body),
            }
            for what, (headers, content) in forged.items():
                response = proxy.request(route.method, path, headers=headers, content=content)
                assert response.status_code == 403, (what, path, response.text)
                assert response.json()["error"]["message"].startswith("refused"), response.text
                assert response.headers["X-Content-Type-Options"] == "nosniff"
    untouched(before, client.session(session_id))
    # The page's own request (its origin, JSON) passes: the feedback is stored.
    with httpx.Client(base_url=stack.signin_url, timeout=10) as proxy:
        response = proxy.post(
            f"/sessions/{session_id}/feedback",
            headers={**own, "Sec-Fetch-Site": "same-origin"},
            content=json.dumps({"verdict": "right"}),
        )
    assert response.status_code == 200, response.text
    assert client.session(session_id).session["verdict"] == "right"

"""People, not a shared key (issue 33): sign-in, roles and the audit, on the local stack.

Requests go to the api function as deployed code sees them: the proxy's
signed header (``x-goog-iap-jwt-assertion``) verified with google-auth against
the keys the stack's sign-in proxy serves. Forged, expired, foreign and
missing identities are refused with 401 before anything is read or written;
a viewer's action is refused with 403 naming the role it needs; a responder's
is done and recorded with their e-mail, which the session, the list, the CLI
and the page all show.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tarsy.access.iap import ASSERTION_HEADER
from tarsy.http.routes import person_routes
from tarsy.models import ExecutionStatus
from tarsy_dev import cli
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, StandInResponder
from tarsy_dev.localstack.signin import assertion, new_key
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER, VIEWER, VIEWER_DOMAIN, cli_flags, signed_in

WAIT_S = 90.0


def slow_investigation(call: FakeCall) -> FakeReply:
    """The investigation streams for up to a minute (time to act on it); the rest is quick."""
    if "executive-summarizer" in call.system_text() or "chat-assistant" in call.system_text():
        return StandInResponder()(call)
    # One chunk per half second for a minute (a chunk needs text: 120 chunks, 120 words).
    return FakeReply(text="still looking " * 120, stream_chunks=120, chunk_delay=0.5)


def wait_for_a_model_call(fake: FakeGemini) -> None:
    deadline = time.monotonic() + WAIT_S
    while not fake.calls:
        assert time.monotonic() < deadline, "the investigation never called the model"
        time.sleep(0.05)


@pytest.fixture
def running(stack: Stack, client: TarsyClient, fake_gemini: FakeGemini) -> Iterator[str]:
    """An investigation in the middle of a model call; cancelled at the end if still running."""
    fake_gemini.responder = slow_investigation
    session_id = client.submit({"alert_type": "generic", "data": "5xx burst on orders"}).session_id
    wait_for_a_model_call(fake_gemini)
    yield session_id
    if not client.session(session_id).is_finished:
        client.cancel(session_id)
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.is_finished


def forged_identities(stack: Stack) -> dict[str, dict[str, str]]:
    """Every way of not being signed in: each must be refused."""
    key = stack.signin_key_pem
    return {
        "no header": {},
        "the API key instead": {"Authorization": f"Bearer {stack.api_key}"},
        "the API key as X-API-Key": {"X-API-Key": stack.api_key},
        "signed by another key": {ASSERTION_HEADER: assertion(new_key(), stack.user)},
        "for another audience": {
            ASSERTION_HEADER: assertion(
                key, stack.user, audience="/projects/1/global/backendServices/2"
            )
        },
        "expired": {ASSERTION_HEADER: assertion(key, stack.user, issued_at=time.time() - 3600)},
        "not a JWT": {ASSERTION_HEADER: "garbage"},
    }


# A body each action accepts: a refusal is then the sign-in's, never the body's.
ACTION_BODIES: dict[str, dict[str, str]] = {
    "chat": {"question": "who did it?"},
    "feedback": {"verdict": "wrong", "root_cause": "a made-up cause"},
    "erase": {"reason": "a made-up request"},
}


def every_route(session_id: str, execution_id: str) -> list[tuple[str, str, dict[str, str], str]]:
    """Every route a person calls, from the route table (a new route is tried at once).

    Each as ``(method, path, a body it accepts, the role it needs)``.
    """
    return [
        (
            route.method,
            route.path(session_id=session_id, execution_id=execution_id),
            ACTION_BODIES.get(route.action or "", {}),
            route.role or "",
        )
        for route in person_routes()
    ]


def assert_untouched(view: SessionView) -> None:
    """Still running, nothing cancelled, asked, re-run or recorded (read as the stack's admin)."""
    assert view.status is ExecutionStatus.ACTIVE
    assert not view.session["cancel_requested"] and view.session["audit_keys"] == []
    assert view.session["investigated_again_as"] == []
    assert view.audit == []
    assert [e["role"] for e in view.executions] == ["agent"]


def test_a_request_without_a_verified_identity_is_refused_and_writes_nothing(
    stack: Stack, client: TarsyClient, running: str
) -> None:
    [execution] = [e for e in client.session(running).executions if e["role"] == "agent"]
    for what, headers in forged_identities(stack).items():
        for method, path, body, _ in every_route(running, execution["execution_id"]):
            response = httpx.request(
                method,
                stack.api_url + path,
                headers=headers,
                json=body if method != "GET" else None,
                timeout=10,
            )
            assert response.status_code == 401, (what, method, path, response.text)
            assert response.json()["error"]["status"] == 401
            assert "5xx burst" not in response.text
    # Nothing was cancelled, asked or recorded; the investigation goes on.
    assert_untouched(client.session(running))


@pytest.mark.parametrize("viewer", [VIEWER, f"anyone@{VIEWER_DOMAIN}"])
def test_a_viewer_reads_but_cannot_cancel_or_chat_and_is_told_the_role(
    stack: Stack, client: TarsyClient, running: str, viewer: str
) -> None:
    read = httpx.get(f"{stack.api_url}/sessions/{running}", headers=signed_in(stack, viewer))
    assert read.status_code == 200 and read.json()["session"]["session_id"] == running
    [execution] = [e for e in client.session(running).executions if e["role"] == "agent"]
    for method, path, body, role in every_route(running, execution["execution_id"]):
        if role == "viewer":
            continue
        refused = httpx.request(
            method,
            stack.api_url + path,
            headers=signed_in(stack, viewer),
            json=body if method != "GET" else None,
            timeout=10,
        )
        assert refused.status_code == 403, (path, refused.text)
        error = refused.json()["error"]
        assert error["details"] == {"required_role": role}
        assert f"needs the {role} role" in error["message"] and viewer in error["message"]
    assert_untouched(client.session(running))


def test_someone_with_no_role_cannot_even_read(stack: Stack, running: str) -> None:
    outsider = signed_in(stack, "mallory@elsewhere.example")
    response = httpx.get(f"{stack.api_url}/sessions/{running}", headers=outsider)
    assert response.status_code == 403
    assert response.json()["error"]["details"] == {"required_role": "viewer"}
    assert "5xx burst" not in response.text


def test_a_responders_cancel_is_recorded_with_their_email_and_found_in_the_list(
    stack: Stack,
    client: TarsyClient,
    running: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flags = cli_flags(stack, monkeypatch, user=RESPONDER)
    assert cli.main([*flags, "cancel", running]) == cli.EXIT_OK
    *_, view = client.watch(running, poll_interval=0.2, timeout=WAIT_S)
    assert view.status is ExecutionStatus.CANCELLED

    [action] = view.audit
    assert (action["action"], action["actor"], action["role"]) == ("cancel", RESPONDER, "responder")
    assert action["at"] >= view.session["created_at"]
    # The list finds it by who did it, by what was done, and by both; not by someone else.
    found = [
        client.list_sessions(actor=RESPONDER),
        client.list_sessions(action="cancel"),
        client.list_sessions(actor=RESPONDER, action="cancel"),
    ]
    assert [[s.session_id for s in page.sessions] for page in found] == [[running]] * 3
    assert client.list_sessions(actor=VIEWER).sessions == []
    assert client.list_sessions(action="chat").sessions == []
    # The CLI shows it, and lists it by the same filters.
    capsys.readouterr()
    assert cli.main([*flags, "show", running]) == cli.EXIT_SESSION_FAILED  # it was cancelled
    shown = capsys.readouterr().out
    assert f"{RESPONDER} (responder) cancel" in shown
    assert cli.main([*flags, "list", "--actor", RESPONDER, "--action", "cancel"]) == cli.EXIT_OK
    assert running in capsys.readouterr().out


def test_a_question_is_recorded_with_who_asked_it(
    stack: Stack, client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    session_id = client.submit({"alert_type": "generic", "data": "disk 91% on db-1"}).session_id
    *_, done = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert done.status is ExecutionStatus.COMPLETED
    asked = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/chat",
        headers=signed_in(stack, RESPONDER),
        json={"question": "Is the disk the cause?"},
        timeout=10,
    )
    assert asked.status_code == 202
    view = client.session(session_id)
    [action] = view.audit
    assert (action["action"], action["actor"]) == ("chat", RESPONDER)
    assert action["detail"] == "Is the disk the cause?"
    assert action["target"] == asked.json()["execution_id"]

"""Feedback and the memory of earlier incidents (issue 33, items 4 and 5), on the local stack.

A responder's feedback is stored on the session, audited and found by the
list's filters; a viewer's is refused and writes nothing. A second alert on
the same workload starts a session whose investigating agent opens with the
first session's corrected cause, marked as history to verify, and whose page
links the first.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from tarsy.engine.messages import execution_id_for
from tarsy.memory import HISTORY_HEAD
from tarsy.persistence.store import Store
from tarsy_dev import cli
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER, VIEWER, signed_in

WAIT_S = 90.0
CAUSE = "the orders ConfigMap points DB_HOST at the retired database"


def finished(client: TarsyClient, session_id: str) -> SessionView:
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal, last.status
    return last


def alert(p99: float) -> dict[str, object]:
    """A plain JSON alert whose own fields name its workload (shop/orders)."""
    return {
        "alert_type": "generic",
        "data": {"namespace": "shop", "deployment": "orders", "summary": f"p99 {p99}s"},
    }


def feedback(stack: Stack, session_id: str, user: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(
        f"{stack.api_url}/sessions/{session_id}/feedback",
        json=body,
        headers=signed_in(stack, user),
        timeout=10,
    )


def page_data(stack: Stack, session_id: str) -> dict[str, Any]:
    """What the session page polls, signed in as the stack's user."""
    answer = httpx.get(
        f"{stack.api_url}/ui/data/sessions/{session_id}", headers=signed_in(stack), timeout=10
    )
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def test_a_responders_feedback_is_stored_audited_and_listed_and_a_viewers_is_refused(
    stack: Stack, client: TarsyClient
) -> None:
    first = finished(client, client.submit(alert(2.3)).session_id).session["session_id"]

    refused = feedback(stack, first, VIEWER, {"verdict": "right"})
    assert refused.status_code == 403
    assert refused.json()["error"]["details"] == {"required_role": "responder"}
    assert client.session(first).session.get("feedback") is None

    given = feedback(stack, first, RESPONDER, {"verdict": "wrong", "root_cause": CAUSE})
    assert given.status_code == 200, given.text
    view = client.session(first)
    assert view.session["verdict"] == "wrong"
    assert view.session["feedback"]["root_cause"] == CAUSE
    assert view.session["feedback"]["by"] == RESPONDER
    [event] = [e for e in view.audit if e["action"] == "feedback"]
    assert event["actor"] == RESPONDER and event["detail"] == f"wrong: {CAUSE}"

    by_verdict = client.list_sessions(verdict="wrong")
    assert [row.session_id for row in by_verdict.sessions] == [first]
    assert client.list_sessions(verdict="right").sessions == []
    by_action = client.list_sessions(action="feedback", actor=RESPONDER)
    assert [row.session_id for row in by_action.sessions] == [first]


async def test_a_second_alert_on_the_same_workload_opens_with_the_first_sessions_corrected_cause(
    stack: Stack, client: TarsyClient, store: Store
) -> None:
    first = finished(client, client.submit(alert(2.3)).session_id).session["session_id"]
    given = feedback(stack, first, RESPONDER, {"verdict": "wrong", "root_cause": CAUSE})
    assert given.status_code == 200, given.text
    # Corrected: found again by memory's query of judged sessions, however many come after.
    assert (
        "judged:wl:source=api|generic|shop/orders" in client.session(first).session["memory_keys"]
    )

    second_view = finished(client, client.submit(alert(3.1)).session_id)
    second = second_view.session["session_id"]
    [recalled] = second_view.session["recalled"]
    assert recalled["session_id"] == first
    assert recalled["feedback"]["root_cause"] == CAUSE
    assert "wl:source=api|generic|shop/orders" in second_view.session["memory_keys"]

    messages = await store.load_messages(execution_id_for(second, 0, 0))
    opening = next(m.content for m in messages if m.role == "user")
    history = re.search(r"<<<BEGIN HISTORY>>>\n(.*)\n<<<END HISTORY>>>", opening, re.DOTALL)
    assert history is not None
    assert HISTORY_HEAD in opening and opening.index(HISTORY_HEAD) < history.start()
    assert f"Session {first}" in history[1] and CAUSE in history[1]
    assert "before this alert" in history[1]

    # The page links the first; tarsy show names it.
    header = page_data(stack, second)["header"]
    assert f'<a class="recalled-session" href="{first}">{first}</a>' in header
    assert cli.recalled_line(second_view.session) == (
        f"recalls (history to verify): {first} (wrong)"
    )

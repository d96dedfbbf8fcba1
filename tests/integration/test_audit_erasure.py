"""Roles that mean something (issue 42, point 3): the audit across sessions and erasure.

On the local stack: the admin (the sign-in proxy's own user) reads the audit
across sessions through the proxy, filtered by actor, action and time, page
by page; erases a session, after which nothing of it is left in Firestore but
the erasure's record (who, when, why, masked). A responder and a viewer are
refused both with 403 naming ``admin``, and nothing is erased.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tarsy.models import AuditEvent, ExecutionStatus, Session, utcnow
from tarsy.persistence.audit_log import ActionRecord
from tarsy.persistence.ledger import NOTIFICATIONS
from tarsy.persistence.store import (
    ALERT_FINGERPRINTS,
    EXECUTIONS,
    SESSIONS,
    THOUGHT_SIGNATURES,
    Store,
)
from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER, VIEWER, signed_in

WAIT_S = 90.0
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"


def finished(client: TarsyClient, data: str) -> str:
    """A session whose every execution (a judge included) has ended."""
    session_id = client.submit({"alert_type": "generic", "data": data}).session_id
    deadline = time.monotonic() + WAIT_S
    while True:
        view = client.session(session_id)
        if view.is_finished and all(e["status"] in TERMINAL for e in view.executions):
            return session_id
        assert time.monotonic() < deadline, "the session never finished"
        time.sleep(0.2)


TERMINAL = {"completed", "failed", "timed_out", "cancelled"}


def act(stack: Stack, user: str, method: str, path: str, body: dict[str, str]) -> httpx.Response:
    """A request as ``user`` (the proxy's signed header), JSON as the CLI sends it."""
    return httpx.request(
        method, stack.api_url + path, headers=signed_in(stack, user), json=body, timeout=10
    )


def audit(proxy: httpx.Client, **filters: str) -> list[dict[str, Any]]:
    """Every entry of the audit the filters select, page after page (through the proxy)."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {**filters, **({"cursor": cursor} if cursor else {})}
        page = proxy.get("/audit", params=params)
        assert page.status_code == 200, page.text
        entries.extend(page.json()["entries"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return entries


def test_only_an_admin_reads_the_audit_across_sessions_filtered_and_in_pages(
    stack: Stack, client: TarsyClient
) -> None:
    first = finished(client, "5xx burst on orders")
    second = finished(client, "disk 91% on db-1")
    assert act(
        stack, RESPONDER, "POST", f"/sessions/{first}/feedback", {"verdict": "right"}
    ).is_success
    assert act(
        stack, stack.user, "POST", f"/sessions/{first}/feedback", {"verdict": "wrong"}
    ).is_success
    assert act(stack, RESPONDER, "POST", f"/sessions/{second}/investigate", {}).is_success

    for user in (RESPONDER, VIEWER):
        refused = act(stack, user, "GET", "/audit", {})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["details"] == {"required_role": "admin"}

    with httpx.Client(base_url=stack.signin_url, timeout=10) as proxy:
        everything = audit(proxy)
        assert [(e["action"], e["actor"], e["session_id"]) for e in everything] == [
            ("investigate", RESPONDER, second),
            ("feedback", stack.user, first),
            ("feedback", RESPONDER, first),
        ]  # newest first
        assert audit(proxy, limit="1") == everything  # three pages of one
        assert [e["session_id"] for e in audit(proxy, actor=RESPONDER)] == [second, first]
        assert [e["actor"] for e in audit(proxy, action="feedback")] == [stack.user, RESPONDER]
        assert len(audit(proxy, actor=RESPONDER, action="feedback")) == 1
        oldest = everything[-1]["at"]
        assert audit(proxy, since=oldest) == everything
        assert audit(proxy, until=oldest) == []
        assert proxy.get("/audit", params={"action": "delete_everything"}).status_code == 422


async def documents_of(store: Store, session_id: str, execution_ids: list[str]) -> list[str]:
    """The path of every document of the session left anywhere it writes."""
    db = store.client
    found: list[str] = []
    for root in [
        db.collection(SESSIONS).document(session_id),
        *(db.collection(EXECUTIONS).document(e) for e in execution_ids),
        *(db.collection(THOUGHT_SIGNATURES).document(e) for e in execution_ids),
    ]:
        if (await root.get()).exists:
            found.append(root.path)
        async for collection in root.collections():
            async for snap in collection.recursive().stream():
                found.append(snap.reference.path)
    async for snap in db.collection(ALERT_FINGERPRINTS).stream():
        if (snap.to_dict() or {}).get("session_id") == session_id:
            found.append(snap.reference.path)
    return found


def erase_through_the_proxy(
    stack: Stack, session_id: str, reason: dict[str, str]
) -> list[dict[str, Any]]:
    """The admin erases the session as the page would (its origin, JSON); the audit after."""
    own = {"Content-Type": "application/json", "Origin": stack.signin_url}
    with httpx.Client(base_url=stack.signin_url, headers=own, timeout=10) as proxy:
        assert proxy.request("DELETE", f"/sessions/{session_id}", content="{}").status_code == 422
        done = proxy.request("DELETE", f"/sessions/{session_id}", json=reason)
        assert done.status_code == 200, done.text
        assert done.json() == {"session_id": session_id, "erased": True}
        assert proxy.get(f"/sessions/{session_id}").status_code == 404
        again = proxy.request("DELETE", f"/sessions/{session_id}", json=reason)
        assert again.status_code == 404
        return audit(proxy)


async def test_an_admins_erasure_leaves_nothing_of_the_session_but_its_record(
    stack: Stack, client: TarsyClient, store: Store
) -> None:
    erased = finished(client, "a token pasted in an alert")
    kept = finished(client, "5xx burst on orders")
    assert act(
        stack, RESPONDER, "POST", f"/sessions/{erased}/feedback", {"verdict": "right"}
    ).is_success
    executions = [e["execution_id"] for e in client.session(erased).executions]
    memory_keys = client.session(erased).session["memory_keys"]
    # What else a session leaves: a notifier's ledger entry and a model's thought signatures.
    db = store.client
    ledger = db.collection(SESSIONS).document(erased).collection(NOTIFICATIONS).document("slack")
    await ledger.set({"status": "sent", "at": utcnow()})
    await db.collection(THOUGHT_SIGNATURES).document(executions[0]).set({"signatures": ["x"]})
    assert len(await documents_of(store, erased, executions)) > 5

    reason = {"reason": f"the alert carries a token {SECRET}, erase it"}
    for user in (RESPONDER, VIEWER):
        refused = act(stack, user, "DELETE", f"/sessions/{erased}", reason)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["details"] == {"required_role": "admin"}
    assert client.session(erased).session["session_id"] == erased

    entries = erase_through_the_proxy(stack, erased, reason)

    assert await documents_of(store, erased, executions) == []
    # Its memory keys went with it: no later alert recalls it.
    recalled = await store.earlier_sessions(memory_keys, utcnow(), 30)
    assert erased not in [s.session_id for s in recalled]
    # The one record kept: who erased it, when and why (the pasted token masked).
    [record] = [e for e in entries if e["session_id"] == erased]
    assert (record["action"], record["actor"], record["role"]) == ("erase", stack.user, "admin")
    assert SECRET not in record["detail"] and "[MASKED_TOKENS]" in record["detail"]
    assert client.session(kept).session["session_id"] == kept


@pytest.mark.parametrize("body", ["", "{}", '{"reason": ""}'])
def test_an_erasure_needs_a_reason(stack: Stack, client: TarsyClient, body: str) -> None:
    session_id = finished(client, "5xx burst on orders")
    own = {"Content-Type": "application/json", "Origin": stack.signin_url}
    with httpx.Client(base_url=stack.signin_url, headers=own, timeout=10) as proxy:
        refused = proxy.request("DELETE", f"/sessions/{session_id}", content=body)
    assert refused.status_code == 422, refused.text
    assert client.session(session_id).session["session_id"] == session_id


async def test_an_erasure_clears_the_investigate_again_links_naming_the_session(
    store: Store,
) -> None:
    """first ← erased ← later: neither neighbour keeps the erased id; their other links stay."""

    def session(session_id: str, of: str | None = None) -> Session:
        return Session(session_id=session_id, alert_type="generic", alert_data="x",
                       chain_id="default", status=ExecutionStatus.COMPLETED,
                       investigation_of=of)  # fmt: skip

    await store.create_session(session("s-first"))
    for again in (session("s-erased", of="s-first"), session("s-sibling", of="s-first")):
        await store.create_reinvestigation(again)
    await store.create_reinvestigation(session("s-later", of="s-erased"))
    event = AuditEvent(action="erase", actor="admin@example.com", role="admin",
                       target="s-erased", detail="a person asked")  # fmt: skip

    assert await store.erase_session(ActionRecord("s-erased", event, ()))

    first, sibling, later = [
        await store.get_session(s) for s in ("s-first", "s-sibling", "s-later")
    ]
    assert first is not None and first.investigated_again_as == ["s-sibling"]
    assert sibling is not None and sibling.investigation_of == "s-first"
    assert later is not None and later.investigation_of is None
    assert await store.get_session("s-erased") is None

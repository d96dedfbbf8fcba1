"""Retention: a finished session and every record of it get an expire_at for Firestore TTL.

The emulator does not enforce TTL policies, so these tests check the stamps:
on every document of the session, found here by walking ``collections()``
document by document (not by the recursive query the code uses).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx

from tarsy.app import Deps
from tarsy.commands.sessions import ChatRequest, chat
from tarsy.engine.sweeper import sweep
from tarsy.models import ExecutionStatus, Session, StepMessage, utcnow
from tarsy.persistence.retention import COLLECTION_GROUPS, RECHECK_AFTER, stamp_finished
from tarsy.persistence.store import EXECUTIONS, SESSIONS, Store
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack

from . import in_process
from .in_process import drive


async def walk(ref: Any) -> list[tuple[str, dict[str, Any]]]:
    """(path, data) of ``ref`` and every document under it, one level at a time."""
    snap = await ref.get()
    found = [(ref.path, snap.to_dict() or {})] if snap.exists else []
    async for collection in ref.collections():
        async for child in collection.list_documents():
            found.extend(await walk(child))
    return found


async def documents_of(store: Store, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Every document of a session: its own subtree and its executions' subtrees."""
    db = store.client
    found = await walk(db.collection(SESSIONS).document(session_id))
    for execution in await store.list_executions(session_id):
        found.extend(await walk(db.collection(EXECUTIONS).document(execution.execution_id)))
    return found


def groups(documents: list[tuple[str, dict[str, Any]]]) -> set[str]:
    """The collection groups the documents are in (the last collection of each path)."""
    return {path.split("/")[-2] for path, _ in documents}


def replies(call: FakeCall) -> FakeReply:
    if "chat-assistant" in call.system_text():
        return FakeReply(text="the chat's answer")
    return FakeReply(text="the analysis")


async def finished_session(deps: Deps, store: Store) -> Session:
    session = await in_process.new_session(
        store, alert_type="generic", alert_data="error rate 31% on orders"
    )
    await drive(deps, StepMessage(session_id=session.session_id, kind="start_session"))
    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    return done


async def test_a_finished_session_and_all_its_records_are_stamped_to_expire(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = replies
    session = await finished_session(deps, store)
    running = await in_process.new_session(store)
    assert session.retention_due is not None and session.expire_at is None
    before = await documents_of(store, session.session_id)
    assert [path for path, data in before if data.get("expire_at") is not None] == []

    now = utcnow()
    report = await stamp_finished(store.client, deps.settings, now)

    assert report.stamped == [session.session_id] and report.still_running == []
    after = await documents_of(store, session.session_id)
    assert len(after) == len(before) == report.documents
    # The session, its stages, executions, messages, timeline, model calls, markers...
    assert groups(after) >= {SESSIONS, "stages", EXECUTIONS, "messages", "timeline"}
    assert groups(after) <= COLLECTION_GROUPS
    expiry = now + timedelta(days=90)
    unstamped = [path for path, data in after if data.get("expire_at") != expiry]
    assert unstamped == []
    stamped = await store.get_session(session.session_id)
    assert stamped is not None and stamped.retention_due is None
    assert stamped.expire_at == expiry
    # A session still running is left alone.
    untouched = await store.get_session(running.session_id)
    assert untouched is not None and untouched.expire_at is None
    assert untouched.retention_due is None
    # Nothing pending is left: the next pass does nothing.
    assert (await stamp_finished(store.client, deps.settings)).documents == 0


async def test_a_chat_question_after_the_stamp_is_stamped_once_it_is_answered(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = replies
    session = await finished_session(deps, store)
    await stamp_finished(store.client, deps.settings)

    bus = RecordingBus()
    body = await chat(replace(deps, bus=bus), session.session_id, ChatRequest(question="Why?"))
    asked = await store.get_session(session.session_id)
    assert asked is not None and asked.retention_due is not None

    # The chat has not run yet: nothing is stamped, the session is looked at again later.
    first: datetime = utcnow()
    early = await stamp_finished(store.client, deps.settings, first)
    assert early.still_running == [session.session_id] and early.stamped == []
    assert early.documents == 0
    later_look = await store.get_session(session.session_id)
    assert later_look is not None and later_look.retention_due == first + RECHECK_AFTER
    for message in bus.published:
        await drive(deps, message)
    answer = await store.get_execution(str(body["execution_id"]))
    assert answer is not None and answer.final_analysis == "the chat's answer"

    later = first + RECHECK_AFTER
    report = await stamp_finished(store.client, deps.settings, later)
    assert report.stamped == [session.session_id]
    documents = await documents_of(store, session.session_id)
    assert {data.get("expire_at") for _, data in documents} == {later + timedelta(days=90)}
    chat_records = [path for path, _ in documents if str(body["execution_id"]) in path]
    assert len(chat_records) > 1  # the chat's execution and its conversation


async def test_a_shorter_retention_setting_gives_an_earlier_expiry(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = replies
    session = await finished_session(deps, store)
    now = utcnow()
    settings = deps.settings.model_copy(update={"retention_days": 7})

    await stamp_finished(store.client, settings, now)

    stamped = await store.get_session(session.session_id)
    assert stamped is not None and stamped.expire_at == now + timedelta(days=7)


async def test_the_sweep_that_recovers_steps_stamps_no_finished_session(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = replies
    session = await finished_session(deps, store)

    report = await sweep(deps, utcnow() + timedelta(hours=1))

    assert "retention" not in report.model_dump()
    untouched = await store.get_session(session.session_id)
    assert untouched is not None and untouched.retention_due is not None
    assert untouched.expire_at is None


async def test_the_retention_job_of_the_api_function_stamps_a_finished_session(
    deps: Deps, store: Store, fake_gemini: FakeGemini, stack: Stack
) -> None:
    fake_gemini.responder = replies
    session = await finished_session(deps, store)

    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{stack.api_url}/retention", headers={"X-API-Key": stack.api_key}
        )
        refused = await http.get(f"{stack.api_url}/retention", headers={"X-API-Key": stack.api_key})

    assert response.status_code == 200 and response.json()["stamped"] == [session.session_id]
    assert refused.status_code == 405
    stamped = await store.get_session(session.session_id)
    assert stamped is not None and stamped.expire_at is not None and stamped.retention_due is None

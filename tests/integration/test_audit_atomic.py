"""An audit that cannot miss an action (issue 42, point 2), on the Firestore emulator.

Each audited action runs against the real store while the process "dies" at
the transport: before its k-th Firestore write is sent, or just after it
landed, for every k until the action completes. After each death the
session is read back: the action's state change exists exactly when its
audit record does (neither half of one commit without the other).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1.async_batch import AsyncWriteBatch
from google.cloud.firestore_v1.async_document import AsyncDocumentReference

from tarsy.access.roles import Principal, RecordedAction, Role
from tarsy.app import Deps
from tarsy.commands import sessions as handlers
from tarsy.commands.recorded import Recorder
from tarsy.feedback import FeedbackRequest
from tarsy.models import AgentExecution, ExecutionStatus, Session, Stage
from tarsy.persistence.store import SESSIONS, Store
from tarsy.persistence.updates import SessionUpdate
from tarsy_dev.fakes.bus import RecordingBus

from . import in_process

RITA = Principal(email="rita.responder@example.com", role=Role.RESPONDER)
WRITES = ("create", "set", "update", "delete")


class Died(BaseException):
    """The process dies here (not an Exception: nothing in the code catches it)."""


@dataclass
class Transport:
    """Firestore's writes, dying once at the ``die_at``-th (before it is sent, or after)."""

    die_at: int | None = None
    after: bool = False
    writes: int = 0

    async def write(self, send: Callable[[], Awaitable[Any]]) -> Any:
        n = self.writes
        self.writes += 1
        if n == self.die_at and not self.after:
            raise Died(f"before write {n}")
        result = await send()
        if n == self.die_at and self.after:
            raise Died(f"after write {n}")
        return result


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[Transport]:
    """Every batch commit and single-document write goes through :class:`Transport`."""
    dying = Transport()

    def wrap(cls: type, name: str) -> None:
        original = getattr(cls, name)

        async def write(self: object, *args: object, **kwargs: object) -> Any:
            return await dying.write(lambda: original(self, *args, **kwargs))

        monkeypatch.setattr(cls, name, write)

    wrap(AsyncWriteBatch, "commit")
    for name in WRITES:
        wrap(AsyncDocumentReference, name)
    yield dying


async def finished(store: Store) -> Session:
    """A session as an investigation leaves it: completed."""
    session = await in_process.new_session(store, alert_type="generic", alert_data="5xx on orders")
    await store.update_session(session.session_id, SessionUpdate(status=ExecutionStatus.COMPLETED))
    return session


async def with_an_agent(store: Store, status: ExecutionStatus) -> Session:
    """A session whose one stage has one agent in ``status`` (the session too)."""
    session = await in_process.new_session(store, alert_type="generic", alert_data="5xx")
    sid = session.session_id
    agent = AgentExecution(
        execution_id=f"{sid}-s00-a00", session_id=sid, stage=0, agent="investigator",
        strategy="react", provider="default", status=status,
    )  # fmt: skip
    stage = Stage(index=0, name="investigate", status=status, execution_ids=[agent.execution_id])
    await store.start_stage(sid, stage, [agent], {}, SessionUpdate(status=status))
    return session


async def setup(store: Store, action: RecordedAction, variant: str) -> Session:
    """The session the action applies to."""
    if action == "cancel":
        return await in_process.new_session(store)
    if action == "resume":
        return await with_an_agent(store, ExecutionStatus.PAUSED)
    if action == "cancel_agent":
        return await with_an_agent(store, ExecutionStatus(variant))
    return await finished(store)


async def recorded(store: Store, session_id: str, action: RecordedAction) -> int:
    return sum(1 for event in await store.list_audit(session_id) if event.action == action)


async def done(store: Store, session_id: str, action: RecordedAction) -> int:
    """How many times the action's state change landed on the session."""
    session = await store.get_session(session_id)
    assert session is not None
    if action == "cancel":
        return int(session.cancel_requested)
    if action in ("resume", "cancel_agent"):
        [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
        if action == "resume":
            return int(agent.status is not ExecutionStatus.PAUSED)
        return int(agent.cancel_requested or agent.status is ExecutionStatus.CANCELLED)
    if action == "feedback":
        return int(session.verdict is not None)
    if action == "investigate":
        query = store.client.collection(SESSIONS).where(
            filter=firestore.FieldFilter("investigation_of", "==", session_id)
        )
        return len([snap async for snap in query.stream()])
    role = "chat" if action == "chat" else "scoring"
    return len([e for e in await store.list_executions(session_id) if e.role == role])


async def act(deps: Deps, session_id: str, action: RecordedAction) -> None:
    recorder = Recorder(RITA, action, session_id)
    if action == "cancel":
        await handlers.cancel(deps, session_id, recorder)
    elif action == "resume":
        await handlers.resume(deps, session_id, handlers.ResumeRequest(), recorder)
    elif action == "cancel_agent":
        await handlers.cancel_agent(deps, session_id, f"{session_id}-s00-a00", recorder)
    elif action == "score":
        await handlers.rescore(deps, session_id, recorder)
    elif action == "feedback":
        verdict = FeedbackRequest(verdict="wrong", root_cause="the ConfigMap")
        await handlers.give_feedback(deps, session_id, verdict, RITA)
    elif action == "investigate":
        await handlers.investigate_again(deps, session_id, recorder)
    else:
        question = handlers.ChatRequest(question="which pod?")
        await handlers.chat(deps, session_id, question, recorder=recorder)


@pytest.mark.parametrize(
    ("action", "variant"),
    [
        ("cancel", ""),
        ("resume", ""),
        ("cancel_agent", "active"),
        ("cancel_agent", "paused"),
        ("feedback", ""),
        ("investigate", ""),
        ("chat", ""),
        ("score", ""),
    ],
)
async def test_an_action_killed_at_any_write_leaves_both_its_change_and_its_record_or_neither(
    deps: Deps, store: Store, transport: Transport, action: RecordedAction, variant: str
) -> None:
    # A judge to score with (the stand-in's deployment may have scoring off).
    settings = deps.settings.model_copy(update={"scoring_off_reason": None})
    local = replace(deps, bus=RecordingBus(), settings=settings)
    deaths = 0
    for die_at in range(20):
        for after in (False, True):
            session = await setup(store, action, variant)
            transport.writes, transport.die_at, transport.after = 0, die_at, after
            try:
                await act(local, session.session_id, action)
            except Died:
                deaths += 1
            finally:
                transport.die_at = None
            landed = await done(store, session.session_id, action)
            audited = await recorded(store, session.session_id, action)
            assert landed == audited, (action, die_at, after, landed, audited)
            if die_at >= transport.writes:  # it completed: no write left to die at
                assert landed == audited == 1
                assert deaths > 0
                return
    pytest.fail(f"{action} never completed")

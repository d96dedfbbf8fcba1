"""What a person typed is masked before it is stored anywhere (issue 42, point 2).

A chat question, a corrected cause and the reason for investigating again go
through the api with a token pasted in them; the conversation the chat starts
with, the session's feedback and every audit record see only the mask.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pytest

from tarsy.api import handlers
from tarsy.app import Deps
from tarsy.bus import Publisher
from tarsy.commands.recorded import Recorder
from tarsy.config.schema import TarsyConfig
from tarsy.engine import chains
from tarsy.http.request import HttpRequest
from tarsy.models import (
    AgentExecution,
    AuditEvent,
    ConversationMessage,
    ExecutionStatus,
    Session,
    TimelineEvent,
)
from tarsy.persistence.audit_log import ActionRecord, ActionWrites
from tarsy.persistence.ports import Persistence
from tarsy.persistence.updates import SessionUpdate
from tarsy.tools.masking import MaskingConfig
from tests.unit.signin import RESPONDER, SignIn, signin_server

SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
TYPED = f"is it the token {SECRET} that expired?"


class ActionStore:
    """The reads and writes these routes make, in memory."""

    def __init__(self) -> None:
        self.session = Session(session_id="s-1", alert_type="PodCrashLooping", alert_data="x",
                               chain_id="kubernetes", status=ExecutionStatus.COMPLETED)  # fmt: skip
        self.updates: list[SessionUpdate] = []
        self.recorded: list[AuditEvent] = []

    async def get_session(self, session_id: str) -> Session | None:
        return self.session if session_id == "s-1" else None

    async def update_session(self, session_id: str, update: SessionUpdate) -> None:
        self.updates.append(update)

    async def commit_action(self, writes: ActionWrites) -> None:
        if writes.session is not None:
            self.updates.append(writes.session)
        if writes.record is not None:
            self.recorded.append(writes.record.event)

    async def create_recorded_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent],
        record: ActionRecord,
    ) -> bool:
        self.recorded.append(record.event)
        return True


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


def _deps(signin: SignIn, store: ActionStore) -> Deps:
    config = cast(TarsyConfig, type("C", (), {"alert_masking": MaskingConfig()})())
    return Deps(
        settings=signin.settings(),
        config=config,
        store=cast(Persistence, store),
        bus=cast(Publisher, None),
    )


def _post(signin: SignIn, action: str, body: dict[str, Any]) -> HttpRequest:
    return HttpRequest(
        method="POST",
        path=f"/sessions/s-1/{action}",
        headers={**signin.headers(RESPONDER), "content-type": "application/json"},
        body=json.dumps(body).encode(),
    )


def _nowhere(store: ActionStore, asked: list[str]) -> str:
    """Everything the api stored or handed on, as one text."""
    stored = [u.model_dump_json() for u in store.updates]
    stored += [e.model_dump_json() for e in store.recorded]
    return "\n".join([*stored, *asked])


async def test_a_chat_question_is_masked_before_the_chat_and_the_audit(
    signin: SignIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def start_chat(session: Session, question: str, deps: Deps, **_: object) -> Any:
        # The engine stores the question on the timeline and sends it to the model.
        asked.append(question)
        execution = AgentExecution(
            execution_id="chat-1", session_id=session.session_id, stage=-2, agent="chat",
            strategy="react", provider="default",
        )  # fmt: skip
        await deps.store.create_execution(execution, [], [])
        return execution

    monkeypatch.setattr(chains, "start_chat", start_chat)
    store = ActionStore()
    response = await handlers.handle(
        _post(signin, "chat", {"question": TYPED}), _deps(signin, store)
    )
    assert response.status == 202, response.body
    assert asked == ["is it the token [MASKED_TOKENS] that expired?"]
    [event] = store.recorded
    assert event.action == "chat" and "[MASKED_TOKENS]" in event.detail
    assert SECRET not in _nowhere(store, asked)


async def test_a_corrected_cause_is_masked_on_the_session_and_in_the_audit(
    signin: SignIn,
) -> None:
    store = ActionStore()
    body = {"verdict": "wrong", "root_cause": TYPED}
    response = await handlers.handle(_post(signin, "feedback", body), _deps(signin, store))
    assert response.status == 200, response.body
    [update] = store.updates
    assert update.feedback is not None and "[MASKED_TOKENS]" in (update.feedback.root_cause or "")
    assert SECRET not in _nowhere(store, []) and SECRET not in json.dumps(response.body)


async def test_the_reason_for_investigating_again_is_masked_in_the_audit(
    signin: SignIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def investigate_again(
        deps: Deps, session_id: str, recorder: Recorder | None = None
    ) -> dict[str, Any]:
        assert recorder is not None
        await deps.store.commit_action(ActionWrites(session_id, recorder.record(target="s-2")))
        return {"session_id": "s-2", "investigation_of": session_id, "status_url": ""}

    monkeypatch.setattr(handlers, "investigate_again", investigate_again)
    store = ActionStore()
    response = await handlers.handle(
        _post(signin, "investigate", {"reason": TYPED}), _deps(signin, store)
    )
    assert response.status == 202, response.body
    [event] = store.recorded
    assert event.action == "investigate" and event.target == "s-2"
    assert event.detail == "is it the token [MASKED_TOKENS] that expired?"
    assert SECRET not in _nowhere(store, [])


async def test_investigating_again_takes_an_empty_body_and_nothing_else(
    signin: SignIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def investigate_again(
        deps: Deps, session_id: str, recorder: Recorder | None = None
    ) -> dict[str, Any]:
        assert recorder is not None
        await deps.store.commit_action(ActionWrites(session_id, recorder.record(target="s-2")))
        return {"session_id": "s-2", "investigation_of": session_id, "status_url": ""}

    monkeypatch.setattr(handlers, "investigate_again", investigate_again)
    store = ActionStore()
    ok = await handlers.handle(_post(signin, "investigate", {}), _deps(signin, store))
    assert ok.status == 202 and store.recorded[0].detail == ""
    refused = await handlers.handle(
        _post(signin, "investigate", {"why": "x"}), _deps(signin, store)
    )
    assert refused.status == 422 and len(store.recorded) == 1

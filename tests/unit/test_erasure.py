"""Erasing a session (issue 42, point 3): an admin's, with a reason, when nothing runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import cast

import pytest

from tarsy.api.handlers import handle
from tarsy.app import Deps
from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.http.request import HttpRequest
from tarsy.models import AgentExecution, ExecutionStatus, Session
from tarsy.persistence.audit_log import ActionRecord
from tarsy.persistence.ports import Persistence
from tarsy.tools.masking import MaskingConfig
from tests.unit.signin import ADMIN, RESPONDER, SignIn, signin_server

SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"


class ErasingStore:
    """One session and its executions; records the erasures asked for."""

    def __init__(self, status: ExecutionStatus, chat: ExecutionStatus | None = None) -> None:
        self.session = Session(session_id="s-1", alert_type="PodCrashLooping", alert_data="x",
                               chain_id="kubernetes", status=status)  # fmt: skip
        self.executions = (
            []
            if chat is None
            else [
                AgentExecution(
                    execution_id="s-1-chat-00",
                    session_id="s-1",
                    stage=-2,
                    agent="chat",
                    role="chat",
                    strategy="react",
                    provider="default",
                    status=chat,
                )
            ]
        )
        self.erased: list[ActionRecord] = []

    async def get_session(self, session_id: str) -> Session | None:
        return self.session if session_id == "s-1" and not self.erased else None

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        return self.executions

    async def erase_session(self, record: ActionRecord) -> bool:
        self.erased.append(record)
        return True


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


async def erase(signin: SignIn, store: ErasingStore, user: str, body: object) -> tuple[int, object]:
    deps = Deps(
        settings=signin.settings(),
        config=cast(TarsyConfig, type("C", (), {"alert_masking": MaskingConfig()})()),
        store=cast(Persistence, store),
        bus=cast(Publisher, None),
    )
    request = HttpRequest(
        method="DELETE",
        path="/sessions/s-1",
        headers={**signin.headers(user), "content-type": "application/json"},
        body=json.dumps(body).encode(),
    )
    response = await handle(request, deps)
    return response.status, response.body


async def test_an_admin_erases_a_finished_session_recording_who_and_why_masked(
    signin: SignIn,
) -> None:
    store = ErasingStore(ExecutionStatus.COMPLETED, chat=ExecutionStatus.COMPLETED)
    status, body = await erase(signin, store, ADMIN, {"reason": f"a token {SECRET} pasted"})
    assert (status, body) == (200, {"session_id": "s-1", "erased": True})
    [record] = store.erased
    event = record.event
    assert (record.session_id, event.action, event.actor, event.role) == (
        "s-1",
        "erase",
        ADMIN,
        "admin",
    )
    assert event.target == "s-1" and event.detail == "a token [MASKED_TOKENS] pasted"
    assert await erase(signin, store, ADMIN, {"reason": "again"}) == (
        404,
        {"error": {"status": 404, "message": "no session 's-1'"}},
    )


@pytest.mark.parametrize(
    ("session", "chat"),
    [
        (ExecutionStatus.ACTIVE, None),
        (ExecutionStatus.PAUSED, None),
        (ExecutionStatus.COMPLETED, ExecutionStatus.ACTIVE),
    ],
)
async def test_a_session_something_runs_for_is_not_erased(
    signin: SignIn, session: ExecutionStatus, chat: ExecutionStatus | None
) -> None:
    store = ErasingStore(session, chat)
    status, _ = await erase(signin, store, ADMIN, {"reason": "a person asked"})
    assert status == 409 and store.erased == []


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "x", "force": True}, [1]])
async def test_an_erasure_needs_a_reason_and_nothing_else(signin: SignIn, body: object) -> None:
    store = ErasingStore(ExecutionStatus.COMPLETED)
    status, _ = await erase(signin, store, ADMIN, body)
    assert status == 422 and store.erased == []


async def test_a_responder_may_not_erase(signin: SignIn) -> None:
    store = ErasingStore(ExecutionStatus.COMPLETED)
    status, body = await erase(signin, store, RESPONDER, {"reason": "a person asked"})
    assert status == 403 and store.erased == []
    assert cast(dict[str, dict[str, object]], body)["error"]["details"] == {
        "required_role": "admin"
    }

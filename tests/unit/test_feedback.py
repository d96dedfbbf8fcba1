"""Feedback on an analysis: the request, what is stored and audited, and the summary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import ValidationError

from tarsy.api.handlers import handle
from tarsy.app import Deps
from tarsy.feedback import FeedbackRequest, audit_detail, feedback_of, summarize
from tarsy.http.request import HttpRequest
from tarsy.models import AuditEvent, ExecutionStatus, Feedback, Session
from tarsy.persistence.audit_log import ActionWrites
from tarsy.persistence.session_list import SessionSummary
from tarsy.persistence.store import Store
from tarsy.persistence.updates import SessionUpdate
from tarsy.tools.masking import MaskingConfig
from tests.unit.signin import RESPONDER, VIEWER, SignIn, signin_server

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _same(text: str) -> str:
    return text


# ─── the request and what is stored ───────────────────────────────────────────


def test_a_verdict_is_right_partly_right_or_wrong_and_nothing_else() -> None:
    assert FeedbackRequest(verdict="partly_right").verdict == "partly_right"
    with pytest.raises(ValidationError):
        FeedbackRequest.model_validate({"verdict": "meh"})
    with pytest.raises(ValidationError):
        FeedbackRequest.model_validate({"verdict": "right", "score": 5})


def test_a_blank_root_cause_is_no_root_cause() -> None:
    assert FeedbackRequest(verdict="wrong", root_cause="  \n ").root_cause is None
    assert FeedbackRequest(verdict="wrong", root_cause=" disk full ").root_cause == "disk full"


def test_the_stored_cause_is_masked_as_alert_data_is() -> None:
    request = FeedbackRequest(verdict="wrong", root_cause="the db password is hunter2")
    stored = feedback_of(request, RESPONDER, NOW, lambda text: text.replace("hunter2", "***"))
    assert stored == Feedback(
        verdict="wrong", root_cause="the db password is ***", by=RESPONDER, at=NOW
    )


def test_a_correction_is_a_cause_written_against_an_analysis_not_marked_right() -> None:
    assert Feedback(verdict="wrong", root_cause="x", by=RESPONDER).corrected
    assert Feedback(verdict="partly_right", root_cause="x", by=RESPONDER).corrected
    assert not Feedback(verdict="right", root_cause="as it said", by=RESPONDER).corrected
    assert not Feedback(verdict="wrong", by=RESPONDER).corrected


def test_the_audit_says_the_verdict_then_the_cause() -> None:
    assert audit_detail(Feedback(verdict="partly_right", by=RESPONDER)) == "partly right"
    wrong = Feedback(verdict="wrong", root_cause="a bad ConfigMap", by=RESPONDER)
    assert audit_detail(wrong) == "wrong: a bad ConfigMap"


# ─── the api route ────────────────────────────────────────────────────────────


class FeedbackStore:
    """The reads and writes the feedback route makes, in memory (the real Store's names)."""

    def __init__(self, session: Session) -> None:
        self.sessions = {session.session_id: session}
        self.updates: list[tuple[str, SessionUpdate]] = []
        self.recorded: list[tuple[str, AuditEvent, list[str]]] = []

    async def get_session(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def commit_action(self, writes: ActionWrites) -> None:
        """The session's update and its audit record: one commit."""
        assert writes.session is not None and writes.record is not None
        self.updates.append((writes.session_id, writes.session))
        record = writes.record
        self.recorded.append((record.session_id, record.event, list(record.keys)))


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


def _deps(signin: SignIn, store: FeedbackStore) -> Deps:
    config = type("C", (), {"alert_masking": MaskingConfig()})()
    fields = {"settings": signin.settings(), "store": cast(Store, store), "config": config}
    return cast(Deps, type("D", (), fields)())


def _post(signin: SignIn, user: str, session_id: str, body: dict[str, Any]) -> HttpRequest:
    return HttpRequest(
        method="POST",
        path=f"/sessions/{session_id}/feedback",
        headers={**signin.headers(user), "content-type": "application/json"},
        body=json.dumps(body).encode(),
    )


def _session(status: ExecutionStatus) -> Session:
    return Session(session_id="s-1", alert_type="PodCrashLooping", alert_data="x",
                   chain_id="kubernetes", status=status)  # fmt: skip


async def test_a_responders_feedback_is_stored_on_the_session_and_audited(signin: SignIn) -> None:
    store = FeedbackStore(_session(ExecutionStatus.COMPLETED))
    body = {"verdict": "wrong", "root_cause": "a ConfigMap points at the old database"}
    response = await handle(_post(signin, RESPONDER, "s-1", body), _deps(signin, store))
    assert response.status == 200
    [(sid, update)] = store.updates
    assert sid == "s-1" and update.written() == {"feedback", "verdict"}
    assert update.verdict == "wrong" and update.feedback is not None
    assert update.feedback.root_cause == body["root_cause"] and update.feedback.by == RESPONDER
    [(sid, event, keys)] = store.recorded
    assert (event.action, event.actor, event.role) == ("feedback", RESPONDER, "responder")
    assert event.detail == "wrong: a ConfigMap points at the old database"
    assert "feedback" in keys and f"feedback:by:{RESPONDER}" in keys


async def test_a_viewer_may_not_give_feedback_and_nothing_is_written(signin: SignIn) -> None:
    store = FeedbackStore(_session(ExecutionStatus.COMPLETED))
    response = await handle(
        _post(signin, VIEWER, "s-1", {"verdict": "right"}), _deps(signin, store)
    )
    assert response.status == 403
    assert response.body["error"]["details"] == {"required_role": "responder"}
    assert store.updates == [] and store.recorded == []


async def test_a_running_session_takes_no_feedback_yet(signin: SignIn) -> None:
    store = FeedbackStore(_session(ExecutionStatus.ACTIVE))
    response = await handle(
        _post(signin, RESPONDER, "s-1", {"verdict": "right"}), _deps(signin, store)
    )
    assert response.status == 409
    assert store.updates == [] and store.recorded == []


async def test_feedback_with_an_unknown_verdict_is_422_and_writes_nothing(signin: SignIn) -> None:
    store = FeedbackStore(_session(ExecutionStatus.COMPLETED))
    response = await handle(
        _post(signin, RESPONDER, "s-1", {"verdict": "great"}), _deps(signin, store)
    )
    assert response.status == 422
    assert response.body["error"]["details"][0]["field"] == "verdict"
    assert store.updates == [] and store.recorded == []


# ─── the summary ──────────────────────────────────────────────────────────────


def _row(session_id: str, feedback: Feedback | None) -> SessionSummary:
    return SessionSummary(
        session_id=session_id, alert_type="PodCrashLooping", status=ExecutionStatus.COMPLETED,
        created_at=NOW, feedback=feedback, verdict=feedback.verdict if feedback else None,
    )  # fmt: skip


def test_the_summary_counts_each_verdict_and_lists_corrections_newest_first() -> None:
    older = Feedback(verdict="wrong", root_cause="old cause", by=RESPONDER, at=NOW)
    newer = Feedback(
        verdict="partly_right", root_cause="new cause", by=RESPONDER, at=NOW + timedelta(hours=1)
    )
    rows = [
        _row("s-1", older),
        _row("s-2", Feedback(verdict="right", by=RESPONDER, at=NOW)),
        _row("s-3", newer),
        _row("s-4", None),
        _row("s-5", Feedback(verdict="right", by=RESPONDER, at=NOW)),
    ]
    summary = summarize(rows)
    assert summary.counts == {"right": 2, "partly_right": 1, "wrong": 1}
    assert summary.sessions == 4 and summary.right_share == 0.5
    assert [(c.session_id, c.root_cause) for c in summary.corrections] == [
        ("s-3", "new cause"),
        ("s-1", "old cause"),
    ]


def test_the_summary_keeps_only_the_recent_corrections_asked_for() -> None:
    rows = [
        _row(f"s-{n}", Feedback(verdict="wrong", root_cause=f"cause {n}", by=RESPONDER,
                                at=NOW + timedelta(minutes=n)))
        for n in range(5)
    ]  # fmt: skip
    assert [c.session_id for c in summarize(rows, recent=2).corrections] == ["s-4", "s-3"]
    assert summarize([]).right_share is None

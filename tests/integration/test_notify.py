"""Session-end notifications on the emulators: the Firestore ledger, the real engine, a fake Slack.

The step engine runs in process with a recording bus (as in test_delivery), and
:func:`tarsy.notify.session_end.on_session_end` is called after every handled
message, as the wiring does, with every message delivered three times.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from google.cloud import firestore
from pydantic import SecretStr

from tarsy.app import Deps
from tarsy.engine.steps import handle
from tarsy.models import ErrorInfo, ExecutionStatus, Session, StepMessage, utcnow
from tarsy.notify.ledger import FirestoreLedger
from tarsy.notify.session_end import on_session_end
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tests.fake_slack import POST_MESSAGE, Failure, FakeSlack, fake_slack


@pytest.fixture
def slack_api() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


@pytest.fixture
def ledger(stack_settings: Settings) -> FirestoreLedger:
    return FirestoreLedger(
        firestore.AsyncClient(
            project=stack_settings.project_id, database=stack_settings.firestore_database
        )
    )


def with_slack(deps: Deps, slack_api: FakeSlack, bus: RecordingBus | None = None) -> Deps:
    settings = deps.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(slack_api.token),
            "slack_channel": "C0ONCALL",
            "slack_base_url": slack_api.base_url,
            "public_api_url": "https://api.example.test",
        }
    )
    return replace(deps, settings=settings, bus=bus or deps.bus)


async def ledger_entry(ledger: FirestoreLedger, session_id: str) -> dict[str, Any]:
    snap = await ledger._ref(session_id, "slack").get()
    assert snap.exists
    data: dict[str, Any] = snap.to_dict() or {}
    return data


async def ended_session(store: Store, status: ExecutionStatus, **fields: Any) -> Session:
    session = Session(
        session_id=f"notify-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data='{"pod": "payments-api-0"}',
        chain_id="default",
        status=status,
        completed_at=utcnow(),
        **fields,
    )
    await store.create_session(session)
    return session


async def test_an_engine_run_to_completion_posts_once_despite_redeliveries(
    deps: Deps,
    store: Store,
    fake_gemini: FakeGemini,
    slack_api: FakeSlack,
    ledger: FirestoreLedger,
) -> None:
    bus = RecordingBus()
    local = with_slack(deps, slack_api, bus)
    session = Session(
        session_id=f"notify-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data='{"pod": "payments-api-0"}',
        metadata={"slack_message_fingerprint": "alert-fp-42"},
        chain_id="default",
    )
    await store.create_session(session)
    slack_api.history = [
        {"type": "message", "ts": "1700000000.000001", "text": "ALERT-FP-42 firing"}
    ]
    fake_gemini.script(FakeReply(text="The config map lost DB_URL."), FakeReply(text="Restore it."))

    pending = [StepMessage(session_id=session.session_id, kind="start_session")]
    handled = 0
    while pending:
        message = pending.pop(0)
        before = len(bus.published)
        for _ in range(3):  # every message delivered three times
            await handle(message, local)
            await on_session_end(message.session_id, local, ledger=ledger)
        handled += 1
        pending.extend(bus.published[before:])

    stored = await store.get_session(session.session_id)
    assert stored is not None and stored.status is ExecutionStatus.COMPLETED
    assert handled == 3  # start, the agent's iteration, the summary
    [post] = slack_api.posted()
    assert post["channel"] == "C0ONCALL"
    assert post["thread_ts"] == "1700000000.000001"
    assert "Restore it." in str(post["blocks"])
    entry = await ledger_entry(ledger, session.session_id)
    assert entry["state"] == "sent"
    assert entry["result"]["thread_ts"] == "1700000000.000001"


@pytest.mark.parametrize(
    ("status", "fields"),
    [
        (ExecutionStatus.COMPLETED, {"executive_summary": "All good again."}),
        (ExecutionStatus.FAILED, {"error": ErrorInfo(message="stage 'triage' ended failed")}),
        (ExecutionStatus.TIMED_OUT, {"error": ErrorInfo(message="past its deadline")}),
        (ExecutionStatus.CANCELLED, {}),
    ],
)
async def test_concurrent_notifications_of_one_end_post_once(
    deps: Deps,
    store: Store,
    slack_api: FakeSlack,
    ledger: FirestoreLedger,
    status: ExecutionStatus,
    fields: dict[str, Any],
) -> None:
    session = await ended_session(store, status, **fields)
    local = with_slack(deps, slack_api)

    reports = await asyncio.gather(
        *(on_session_end(session.session_id, local, ledger=ledger) for _ in range(3))
    )

    statuses = sorted(r.slack.status for r in reports if r.slack is not None)
    assert statuses == ["duplicate", "duplicate", "sent"]
    [post] = slack_api.posted()
    assert status.value.replace("_", " ") in post["text"]
    assert (await ledger_entry(ledger, session.session_id))["state"] == "sent"


async def test_a_failed_notification_is_recorded_and_leaves_the_session_alone(
    deps: Deps, store: Store, slack_api: FakeSlack, ledger: FirestoreLedger
) -> None:
    slack_api.failures[POST_MESSAGE] = Failure(status=500)
    session = await ended_session(store, ExecutionStatus.COMPLETED, executive_summary="ok")
    local = with_slack(deps, slack_api)

    report = await on_session_end(session.session_id, local, ledger=ledger)

    assert report.slack is not None and report.slack.status == "failed"
    entry = await ledger_entry(ledger, session.session_id)
    # Failed with attempts left: claimable again after the retry delay (test_notify_once).
    assert entry["state"] == "retrying" and "500" in entry["result"]["detail"]
    stored = await store.get_session(session.session_id)
    assert stored is not None
    assert (stored.status, stored.executive_summary, stored.error) == (
        ExecutionStatus.COMPLETED,
        "ok",
        None,
    )
    again = await on_session_end(session.session_id, local, ledger=ledger)
    assert again.slack is not None and again.slack.status == "duplicate"


async def test_a_running_session_is_neither_announced_nor_claimed(
    deps: Deps, store: Store, slack_api: FakeSlack, ledger: FirestoreLedger
) -> None:
    session = await ended_session(store, ExecutionStatus.ACTIVE)

    report = await on_session_end(session.session_id, with_slack(deps, slack_api), ledger=ledger)

    assert report.slack is None and report.status is None
    assert not (await ledger._ref(session.session_id, "slack").get()).exists
    assert slack_api.posted() == []

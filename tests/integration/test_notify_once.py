"""Slack effectively once: a crash at each point between the claim and the record.

The Firestore ledger runs on the emulator with a clock the test moves (so a
lease runs out without waiting); Slack is the loopback fake, which keeps what
was posted in the channel as Slack does. A crash is a ``BaseException``
raised at the named point, as a dying process stops there: nothing after it
runs. Each case then lets the claim run out and calls what the sweeper calls
(:func:`tarsy.notify.session_end.retry_stale`), and counts what reached Slack.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from pydantic import SecretStr

from tarsy.app import Deps
from tarsy.engine.sweeper import sweep
from tarsy.models import ExecutionStatus, Session, utcnow
from tarsy.notify import session_end
from tarsy.notify.ledger import FirestoreLedger
from tarsy.notify.session_end import on_session_end, retry_stale
from tarsy.notify.slack import CLAIM_LEASE, MAX_ATTEMPTS, METADATA_EVENT, RETRY_AFTER
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tests.fake_slack import HISTORY, POST_MESSAGE, Failure, FakeSlack, fake_slack
from tests.integration.crashing_ledger import Clock, Crash, CrashingLedger, crashing_ledger

FINGERPRINT_TS = "1600000000.000100"


@pytest.fixture
def slack_api() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


@pytest.fixture
def clock() -> Clock:
    return Clock()


def ledger_for(settings: Settings, clock: Clock, crash_at: str | None = None) -> CrashingLedger:
    return crashing_ledger(
        settings,
        clock,
        crash_at,
        notifier="slack",
        before_record="after the post, before the record",
    )


def with_slack(deps: Deps, slack_api: FakeSlack) -> Deps:
    settings = deps.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(slack_api.token),
            "slack_channel": "C0ONCALL",
            "slack_base_url": slack_api.base_url,
        }
    )
    return replace(deps, settings=settings)


async def ended(store: Store, *, threaded: bool = False) -> Session:
    session = Session(
        session_id=f"once-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data='{"pod": "payments-api-0"}',
        metadata={"slack_message_fingerprint": "alert-fp-7"} if threaded else {},
        chain_id="default",
        status=ExecutionStatus.COMPLETED,
        executive_summary="The config map lost DB_URL.",
        completed_at=utcnow(),
    )
    await store.create_session(session)
    return session


async def entry(ledger: FirestoreLedger, session_id: str) -> dict[str, Any]:
    snap = await ledger._ref(session_id, "slack").get()
    data: dict[str, Any] = snap.to_dict() or {}
    return data


CRASH_POINTS = ["after the claim", "after the post, before the record"]


@pytest.mark.parametrize("threaded", [False, True], ids=["channel", "thread"])
@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_a_crash_between_claim_and_record_posts_exactly_once_after_a_takeover(
    deps: Deps,
    store: Store,
    slack_api: FakeSlack,
    clock: Clock,
    point: str,
    threaded: bool,
) -> None:
    if threaded:
        slack_api.history = [{"type": "message", "ts": FINGERPRINT_TS, "text": "alert-fp-7 firing"}]
    session = await ended(store, threaded=threaded)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock, crash_at=point)

    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)
    posts_at_crash = len(slack_api.posted())
    assert posts_at_crash == (1 if point.startswith("after the post") else 0)

    # While the claim's lease runs, nobody else posts: a slow attempt is not doubled.
    during = await on_session_end(session.session_id, local, ledger=ledger)
    assert during.slack is not None and during.slack.status == "duplicate"
    assert await retry_stale(local, ledger=ledger) == []

    clock.advance(CLAIM_LEASE)
    assert await retry_stale(local, ledger=ledger) == [session.session_id]

    [post] = slack_api.posted()
    assert post["thread_ts" if threaded else "channel"] == (
        FINGERPRINT_TS if threaded else "C0ONCALL"
    )
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"], recorded["lease_until"]) == ("sent", 2, None)
    if posts_at_crash:
        assert recorded["result"]["detail"] == "posted by an earlier attempt"
        # A reply is not in the channel's history: it was found in its thread.
        assert bool(slack_api.replies_requests) == threaded
        assert recorded["result"]["ts"] == post["ts"]
    # Done: nothing is stale any more, and a later call changes nothing.
    clock.advance(CLAIM_LEASE)
    assert await retry_stale(local, ledger=ledger) == []
    assert len(slack_api.posted()) == 1


async def test_a_post_whose_answer_was_lost_is_found_not_repeated(
    deps: Deps, store: Store, slack_api: FakeSlack, clock: Clock
) -> None:
    slack_api.failures[POST_MESSAGE] = Failure(status=502, after=True)
    session = await ended(store)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock)

    first = await on_session_end(session.session_id, local, ledger=ledger)
    assert first.slack is not None and first.slack.status == "failed"
    assert (await entry(ledger, session.session_id))["state"] == "retrying"
    del slack_api.failures[POST_MESSAGE]

    clock.advance(RETRY_AFTER)
    assert await retry_stale(local, ledger=ledger) == [session.session_id]

    [post] = slack_api.posted()
    metadata = post["metadata"]
    assert METADATA_EVENT in str(metadata) and session.session_id in str(metadata)
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"]) == ("sent", 2)
    assert recorded["result"]["detail"] == "posted by an earlier attempt"


async def test_a_takeover_that_cannot_read_slack_posts_nothing_and_tries_again(
    deps: Deps, store: Store, slack_api: FakeSlack, clock: Clock
) -> None:
    session = await ended(store)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock, crash_at="after the claim")
    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)

    slack_api.failures[HISTORY] = Failure(status=500)
    clock.advance(CLAIM_LEASE)
    await retry_stale(local, ledger=ledger)
    assert slack_api.posted() == []  # unsure whether the dead attempt posted: no post
    assert (await entry(ledger, session.session_id))["state"] == "retrying"

    del slack_api.failures[HISTORY]
    clock.advance(RETRY_AFTER)
    await retry_stale(local, ledger=ledger)
    assert len(slack_api.posted()) == 1
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"]) == ("sent", 3)


async def test_concurrent_takeovers_of_one_stale_claim_post_once(
    deps: Deps, store: Store, slack_api: FakeSlack, clock: Clock
) -> None:
    session = await ended(store)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock, crash_at="after the claim")
    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)
    clock.advance(CLAIM_LEASE)

    reports = await asyncio.gather(
        *(on_session_end(session.session_id, local, ledger=ledger) for _ in range(4))
    )

    statuses = sorted(r.slack.status for r in reports if r.slack is not None)
    assert statuses == ["duplicate", "duplicate", "duplicate", "sent"]
    assert len(slack_api.posted()) == 1


async def test_a_notification_that_keeps_failing_gives_up_after_its_attempts(
    deps: Deps, store: Store, slack_api: FakeSlack, clock: Clock
) -> None:
    slack_api.failures[POST_MESSAGE] = Failure(error="channel_not_found")
    session = await ended(store)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock)

    await on_session_end(session.session_id, local, ledger=ledger)
    for _ in range(MAX_ATTEMPTS - 1):
        clock.advance(RETRY_AFTER)
        assert await retry_stale(local, ledger=ledger) == [session.session_id]

    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"]) == ("failed", MAX_ATTEMPTS)
    assert recorded["lease_until"] is None
    clock.advance(RETRY_AFTER)
    assert await retry_stale(local, ledger=ledger) == []
    assert slack_api.posted() == []


async def test_the_sweeper_retries_a_notification_whose_holder_died(
    deps: Deps,
    store: Store,
    slack_api: FakeSlack,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = await ended(store)
    local = with_slack(deps, slack_api)
    ledger = ledger_for(local.settings, clock, crash_at="after the claim")
    monkeypatch.setattr(session_end, "firestore_ledger", lambda settings: ledger)
    with pytest.raises(Crash):
        await on_session_end(session.session_id, local)

    clock.advance(CLAIM_LEASE)
    report = await sweep(local)

    assert report.notified == [session.session_id]
    assert len(slack_api.posted()) == 1

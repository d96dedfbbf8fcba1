"""The PagerDuty incident note: once per session, through redeliveries and crashes.

The Firestore ledger runs on the emulator (the same one as Slack's, with a
clock the test moves so a lease runs out without waiting); PagerDuty is the
loopback fake speaking its REST API v2, reached by PagerDuty's own client. A
crash is a ``BaseException`` raised at the named point, as a dying process
stops there; the sweeper's call (:func:`tarsy.notify.session_end.retry_stale`)
then takes the claim over, and the test counts the incident's notes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tarsy.app import Deps
from tarsy.engine.steps import handle
from tarsy.http.request import HttpRequest
from tarsy.intake import ingest
from tarsy.models import ErrorInfo, ExecutionStatus, Session, StepMessage, utcnow
from tarsy.notify.ledger import FirestoreLedger
from tarsy.notify.pagerduty import CLAIM_LEASE, NOTIFIER, RETRY_AFTER
from tarsy.notify.session_end import on_session_end, retry_stale
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tests.fake_pagerduty import Failure, FakePagerDuty, fake_pagerduty
from tests.integration.crashing_ledger import Clock, Crash, CrashingLedger, crashing_ledger

INCIDENT = "Q1INCIDENT"
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "tarsy_dev" / "samples"
PAGE = "https://api.example.test"


@pytest.fixture
def pagerduty_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as fake:
        # The client's transport trusts what SSL_CERT_FILE names: the fake's own certificate.
        monkeypatch.setenv("SSL_CERT_FILE", fake.ca_file)
        yield fake


def ledger_for(settings: Settings, clock: Clock, crash_at: str | None = None) -> CrashingLedger:
    return crashing_ledger(
        settings,
        clock,
        crash_at,
        notifier=NOTIFIER,
        before_record="after the note, before the record",
    )


def with_notes(
    deps: Deps, api: FakePagerDuty, *, opted_in: bool = True, bus: RecordingBus | None = None
) -> Deps:
    settings = deps.settings.model_copy(
        update={
            "pagerduty_api_token": SecretStr(api.token),
            "pagerduty_from_email": "tarsy-bot@example.com",
            "pagerduty_base_url": api.base_url,
            "public_api_url": PAGE,
        }
    )
    sources = deps.config.alert_sources
    pagerduty = sources.pagerduty.model_copy(update={"incident_notes": opted_in})
    config = deps.config.model_copy(
        update={"alert_sources": sources.model_copy(update={"pagerduty": pagerduty})}
    )
    return replace(deps, settings=settings, config=config, bus=bus or deps.bus)


def incident_session(status: ExecutionStatus = ExecutionStatus.PENDING, **fields: Any) -> Session:
    return Session(
        session_id=f"pd-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data=f'{{"title": "payments-api down", "incident_id": "{INCIDENT}"}}',
        source="pagerduty",
        chain_id="default",
        status=status,
        **fields,
    )


async def completed(store: Store) -> Session:
    session = incident_session(
        ExecutionStatus.COMPLETED,
        executive_summary="The config map lost DB_URL.",
        completed_at=utcnow(),
    )
    await store.create_session(session)
    return session


async def entry(ledger: FirestoreLedger, session_id: str) -> dict[str, Any]:
    snap = await ledger._ref(session_id, NOTIFIER).get()
    data: dict[str, Any] = snap.to_dict() or {}
    return data


async def test_an_engine_run_to_completion_adds_one_note_despite_redeliveries(
    deps: Deps, store: Store, fake_gemini: FakeGemini, pagerduty_api: FakePagerDuty
) -> None:
    bus = RecordingBus()
    local = with_notes(deps, pagerduty_api, bus=bus)
    ledger = ledger_for(local.settings, Clock())
    session = incident_session()
    await store.create_session(session)
    fake_gemini.script(FakeReply(text="The config map lost DB_URL."), FakeReply(text="Restore it."))

    pending = [StepMessage(session_id=session.session_id, kind="start_session")]
    while pending:
        message = pending.pop(0)
        before = len(bus.published)
        for _ in range(3):  # every message delivered three times
            await handle(message, local)
            await on_session_end(message.session_id, local, ledger=ledger)
        pending.extend(bus.published[before:])

    stored = await store.get_session(session.session_id)
    assert stored is not None and stored.status is ExecutionStatus.COMPLETED
    [note] = pagerduty_api.notes_of(INCIDENT)
    assert "Restore it." in note["content"]
    assert f"{PAGE}/ui/sessions/{session.session_id}" in note["content"]
    assert pagerduty_api.froms == ["tarsy-bot@example.com"]
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["result"]["note_id"]) == ("sent", note["id"])


CRASH_POINTS = ["after the claim", "after the note, before the record"]


@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_a_crash_between_claim_and_record_adds_exactly_one_note_after_a_takeover(
    deps: Deps, store: Store, pagerduty_api: FakePagerDuty, point: str
) -> None:
    session = await completed(store)
    local = with_notes(deps, pagerduty_api)
    clock = Clock()
    ledger = ledger_for(local.settings, clock, crash_at=point)

    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)
    notes_at_crash = len(pagerduty_api.notes_of(INCIDENT))
    assert notes_at_crash == (1 if point.startswith("after the note") else 0)

    # While the claim's lease runs, nobody else writes: a slow attempt is not doubled.
    during = await on_session_end(session.session_id, local, ledger=ledger)
    assert during.pagerduty is not None and during.pagerduty.status == "duplicate"
    assert await retry_stale(local, ledger=ledger) == []

    clock.advance(CLAIM_LEASE)
    assert await retry_stale(local, ledger=ledger) == [session.session_id]

    [note] = pagerduty_api.notes_of(INCIDENT)
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"], recorded["lease_until"]) == ("sent", 2, None)
    assert recorded["result"]["note_id"] == note["id"]
    if notes_at_crash:
        assert recorded["result"]["detail"] == "posted by an earlier attempt"
    clock.advance(CLAIM_LEASE)
    assert await retry_stale(local, ledger=ledger) == []
    assert len(pagerduty_api.notes_of(INCIDENT)) == 1


async def test_a_note_whose_answer_was_lost_is_found_not_repeated(
    deps: Deps, store: Store, pagerduty_api: FakePagerDuty
) -> None:
    pagerduty_api.failures["POST"] = Failure(status=502, after=True)
    session = await completed(store)
    local = with_notes(deps, pagerduty_api)
    clock = Clock()
    ledger = ledger_for(local.settings, clock)

    first = await on_session_end(session.session_id, local, ledger=ledger)
    assert first.pagerduty is not None and first.pagerduty.status == "failed"
    assert (await entry(ledger, session.session_id))["state"] == "retrying"
    del pagerduty_api.failures["POST"]

    clock.advance(RETRY_AFTER)
    assert await retry_stale(local, ledger=ledger) == [session.session_id]

    [note] = pagerduty_api.notes_of(INCIDENT)
    assert session.session_id in note["content"]
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"]) == ("sent", 2)
    assert recorded["result"]["detail"] == "posted by an earlier attempt"


async def test_a_takeover_that_cannot_read_the_notes_writes_nothing_and_tries_again(
    deps: Deps, store: Store, pagerduty_api: FakePagerDuty
) -> None:
    session = await completed(store)
    local = with_notes(deps, pagerduty_api)
    clock = Clock()
    ledger = ledger_for(local.settings, clock, crash_at="after the claim")
    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)

    pagerduty_api.failures["GET"] = Failure(status=500)
    clock.advance(CLAIM_LEASE)
    await retry_stale(local, ledger=ledger)
    assert pagerduty_api.notes_of(INCIDENT) == []  # unsure whether the dead attempt wrote
    assert (await entry(ledger, session.session_id))["state"] == "retrying"

    del pagerduty_api.failures["GET"]
    clock.advance(RETRY_AFTER)
    await retry_stale(local, ledger=ledger)
    assert len(pagerduty_api.notes_of(INCIDENT)) == 1
    recorded = await entry(ledger, session.session_id)
    assert (recorded["state"], recorded["attempt"]) == ("sent", 3)


async def test_a_source_that_did_not_opt_in_gets_no_note_and_no_claim(
    deps: Deps, store: Store, pagerduty_api: FakePagerDuty
) -> None:
    session = await completed(store)
    local = with_notes(deps, pagerduty_api, opted_in=False)
    ledger = ledger_for(local.settings, Clock())

    report = await on_session_end(session.session_id, local, ledger=ledger)

    assert report.pagerduty is None
    assert not (await ledger._ref(session.session_id, NOTIFIER).get()).exists
    assert pagerduty_api.requests == []


async def test_a_failed_investigation_writes_no_note(
    deps: Deps, store: Store, pagerduty_api: FakePagerDuty
) -> None:
    session = incident_session(
        ExecutionStatus.FAILED, error=ErrorInfo(message="stage 'triage' failed")
    )
    await store.create_session(session)
    local = with_notes(deps, pagerduty_api)

    report = await on_session_end(
        session.session_id, local, ledger=ledger_for(local.settings, Clock())
    )

    assert report.pagerduty is not None and report.pagerduty.status == "skipped"
    assert pagerduty_api.requests == []


async def test_an_incident_sent_by_pagerdutys_webhook_gets_its_note_when_investigated(
    deps: Deps, store: Store, fake_gemini: FakeGemini, pagerduty_api: FakePagerDuty
) -> None:
    sample = (SAMPLES / "pagerduty.json").read_bytes()
    incident = json.loads(sample)["event"]["data"]["id"]
    pagerduty_api.incidents.add(incident)
    bus = RecordingBus()
    local = with_notes(deps, pagerduty_api, bus=bus)
    ledger = ledger_for(local.settings, Clock())
    api_key = local.settings.api_key
    assert api_key is not None
    request = HttpRequest(
        method="POST",
        path="/alerts/pagerduty",
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {api_key.get_secret_value()}",
        },
        body=sample,
    )

    accepted = await ingest.handle(request, local.settings, local.config, store, bus)

    assert accepted.status == 202, accepted.body
    [entry] = accepted.body["alerts"]
    assert entry["outcome"] == "created"
    session_id = str(entry["session_id"])
    fake_gemini.script(
        FakeReply(text="The payments pool is exhausted."), FakeReply(text="Scale it.")
    )
    pending = list(bus.published)
    while pending:
        message = pending.pop(0)
        before = len(bus.published)
        await handle(message, local)
        await on_session_end(message.session_id, local, ledger=ledger)
        pending.extend(bus.published[before:])
    [note] = pagerduty_api.notes_of(incident)
    assert "Scale it." in note["content"] and session_id in note["content"]

"""The dedup window and resolution matching of tarsy.intake.alerts, on a clock the test moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from tarsy.config import load_config
from tarsy.intake.alerts import AlertOutcome, Intake
from tarsy.intake.sources.config import AlertSourcesConfig, SourceConfig
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.models import ExecutionStatus
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tests.unit.alert_store_fake import MemoryAlertStore

ARN = "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:checkout-db-cpu-high"
START = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def intake(store: MemoryAlertStore, clock: Clock) -> Intake:
    return Intake(
        settings=Settings(),
        config=load_config(Settings()),
        store=cast(Store, store),
        bus=RecordingBus(),
        clock=clock,
    )


def source(window: int = 3600) -> SourceConfig:
    return AlertSourcesConfig.model_validate({"sns": {"dedup_window_seconds": window}}).for_source(
        "sns"
    )


def alarm(event: str = "firing", changed: str = "05:15") -> NormalizedAlert:
    """A CloudWatch alarm occurrence: fingerprint ARN + state-change time, alert key the ARN."""
    return NormalizedAlert(
        source="sns",
        fingerprint=f"{ARN}@2026-11-22T{changed}",
        alert_key=ARN,
        event="firing" if event == "firing" else "resolved",
        alert_type="AWS/RDS",
        data={"AlarmArn": ARN},
    )


def end(store: MemoryAlertStore, session_id: str, at: datetime) -> None:
    session = store.sessions[session_id]
    store.sessions[session_id] = session.model_copy(
        update={"status": ExecutionStatus.COMPLETED, "completed_at": at}
    )


async def take_one(
    taker: Intake, alert: NormalizedAlert, config: SourceConfig | None = None
) -> AlertOutcome:
    [outcome] = await taker.take([alert], config or source())
    return outcome


@pytest.mark.parametrize(
    ("ended_ago", "window", "expected"),
    [
        (None, 3600, "duplicate"),  # still running, whatever its age
        (timedelta(minutes=59), 3600, "duplicate"),
        (timedelta(minutes=61), 3600, "created"),
        (timedelta(seconds=1), 0, "created"),
    ],
)
async def test_a_repeat_is_a_duplicate_while_running_and_within_the_window(
    ended_ago: timedelta | None, window: int, expected: str
) -> None:
    store, clock = MemoryAlertStore(), Clock()
    taker = intake(store, clock)
    first = await take_one(taker, alarm(), source(window))
    assert first.session_id is not None
    clock.now = START + timedelta(hours=5)
    if ended_ago is not None:
        end(store, first.session_id, clock.now - ended_ago)
    again = await take_one(taker, alarm(), source(window))
    assert again.outcome == expected
    if expected == "duplicate":
        assert again.session_id == first.session_id
    else:
        # The claim now names the new session: the next repeat is its duplicate.
        assert again.session_id not in (None, first.session_id)
        assert len(store.sessions) == 2
        third = await take_one(taker, alarm(), source(window))
        assert (third.outcome, third.session_id) == ("duplicate", again.session_id)


async def test_a_claim_whose_session_is_gone_is_taken_over() -> None:
    store, clock = MemoryAlertStore(), Clock()
    taker = intake(store, clock)
    first = await take_one(taker, alarm())
    assert first.session_id is not None
    del store.sessions[first.session_id]
    again = await take_one(taker, alarm())
    assert again.outcome == "created" and again.session_id != first.session_id


async def test_the_claim_expires_after_the_deadline_and_the_window() -> None:
    store, clock = MemoryAlertStore(), Clock()
    outcome = await take_one(intake(store, clock), alarm(), source(600))
    [(claim, _)] = store.claims.values()
    session = store.sessions[str(outcome.session_id)]
    assert session.deadline is not None
    assert claim.expire_at == session.deadline + timedelta(seconds=600)
    assert (claim.session_id, claim.fingerprint, claim.alert_key) == (
        outcome.session_id,
        f"{ARN}@2026-11-22T05:15",
        ARN,
    )


async def test_a_resolution_marks_the_newest_session_of_the_alarm() -> None:
    store, clock = MemoryAlertStore(), Clock()
    taker = intake(store, clock)
    first = await take_one(taker, alarm(changed="05:15"))
    assert first.session_id is not None
    end(store, first.session_id, START)
    clock.now = START + timedelta(hours=3)
    second = await take_one(taker, alarm(changed="08:00"))
    assert second.outcome == "created"
    resolved = await take_one(taker, alarm("resolved", changed="08:30"))
    assert (resolved.outcome, resolved.session_id) == ("resolved", second.session_id)
    assert store.sessions[str(second.session_id)].resolved_at == clock.now
    assert store.sessions[first.session_id].resolved_at is None


async def test_an_ignored_alert_keeps_its_reason() -> None:
    store = MemoryAlertStore()
    alert = alarm().ignored("not an alarm")
    outcome = await take_one(intake(store, Clock()), alert)
    assert outcome == AlertOutcome(
        fingerprint=alert.fingerprint, session_id=None, outcome="ignored", reason="not an alarm"
    )
    assert outcome.answer() == {
        "fingerprint": alert.fingerprint,
        "session_id": None,
        "outcome": "ignored",
        "reason": "not an alarm",
    }
    assert not store.sessions


def test_without_a_clock_the_intake_reads_the_modules_clock_when_it_stamps_a_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # make chaos installs a virtual clock in tarsy's modules after they are imported; an
    # intake built afterwards, without a clock of its own, must keep time by it.
    from tarsy.intake import alerts

    store = MemoryAlertStore()
    plain = Intake(
        settings=Settings(), config=load_config(Settings()), store=cast(Store, store),
        bus=RecordingBus(),
    )  # fmt: skip
    monkeypatch.setattr(alerts, "utcnow", lambda: START)
    assert plain.now() == START
    own = Clock()
    own.now = START + timedelta(hours=1)
    assert intake(store, own).now() == own.now  # a clock of its own still wins

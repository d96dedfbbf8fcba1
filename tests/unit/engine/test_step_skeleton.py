"""The one step skeleton (``steps.run_claimed``): claim, heartbeat, commit, lost commit, publish.

Every kind of step goes through it, so these tests use a scripted kind: what
they prove holds for the model turn, the gather step and collecting answers
alike (collecting answers has its heartbeat because it runs here).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

import pytest

from tarsy.app import Deps
from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.engine import steps
from tarsy.engine.heartbeat import CancelWatch
from tarsy.engine.step_kinds.base import Advance, Publish, StepInput, Work
from tarsy.engine.step_kinds.collect_answers import CollectAnswers
from tarsy.engine.step_kinds.gather_turn import GatherTurn
from tarsy.engine.step_kinds.model_turn import ModelTurn
from tarsy.errors import PermanentError
from tarsy.llm.base import LLMResult
from tarsy.models import AgentExecution, Session, StepMessage, SubAgentWait, utcnow
from tarsy.persistence.ports import Persistence
from tarsy.persistence.store import Claim, StepCommit, StepState
from tarsy.persistence.turns import PendingTurn
from tarsy.settings import Settings

SID = "0b7e5c1a-1111-4222-8333-444455556666"
EID = f"{SID}-s00-a00"
READ = datetime(2026, 12, 1, 12, 0, 0)


def execution(**overrides: object) -> AgentExecution:
    values: dict[str, object] = {
        "execution_id": EID,
        "session_id": SID,
        "stage": 0,
        "agent": "investigator",
        "strategy": "react",
        "status": "active",
        "provider": "default",
        "step": 4,
        "iteration": 3,
    }
    values.update(overrides)
    return AgentExecution.model_validate(values)


SESSION = Session(
    session_id=SID, alert_type="t", alert_data="d", chain_id="default", status="active"
)
MESSAGE = StepMessage(session_id=SID, execution_id=EID, step=4, kind="iterate")


@dataclass
class FakeStore:
    """The store calls the skeleton makes, recorded; ``commit_wins`` says if a commit applies."""

    commit_wins: bool = True
    current: AgentExecution = field(default_factory=execution)
    commits: list[StepCommit] = field(default_factory=list)
    renewals: int = 0
    renewed: asyncio.Event = field(default_factory=asyncio.Event)
    settled: list[tuple[str, StepMessage]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    async def claim(
        self, execution_id: str, *, owner: str, until: datetime, read_time: datetime, step: int
    ) -> Claim:
        assert (execution_id, read_time, step) == (EID, READ, 4)
        return Claim(owner=owner, until=until, update_time=READ + timedelta(seconds=1))

    async def renew(self, execution_id: str, claim: Claim, until: datetime) -> Claim:
        self.renewals += 1
        self.renewed.set()
        return claim.model_copy(update={"update_time": claim.update_time + timedelta(seconds=1)})

    async def get_execution(self, execution_id: str) -> AgentExecution:
        return self.current

    async def commit_step(self, commit: StepCommit) -> bool:
        self.calls.append("commit")
        self.commits.append(commit)
        return self.commit_wins

    async def settle_advance(self, execution_id: str, published: StepMessage) -> None:
        self.calls.append("settle_advance")
        self.settled.append((execution_id, published))


@dataclass
class FakeBus:
    store: FakeStore
    published: list[StepMessage] = field(default_factory=list)

    async def publish(self, message: StepMessage) -> str:
        self.store.calls.append("publish")
        self.published.append(message)
        return "id"


def deps(store: FakeStore, *, lease_seconds: int = 45) -> tuple[Deps, FakeBus]:
    bus = FakeBus(store)
    settings = Settings(step_lease_seconds=lease_seconds, step_cancel_poll_seconds=60.0)
    return Deps(
        settings=settings,
        config=cast(TarsyConfig, None),
        store=cast(Persistence, store),
        bus=cast(Publisher, bus),
    ), bus


def step_input(d: Deps) -> StepInput:
    state = StepState(execution=execution(), update_time=READ, session=SESSION)
    return StepInput(MESSAGE, state, execution(), SESSION, budget=0.0, deps=d)


def batch() -> StepCommit:
    return StepCommit(execution_id=EID, session_id=SID, step=4, next_step=5)


def next_step(step: int) -> StepMessage:
    return StepMessage(session_id=SID, execution_id=EID, step=step, kind="iterate")


@dataclass
class Scripted:
    """A kind of step whose work returns what it was given, once ``until`` is set."""

    work_done: Work | None
    until: asyncio.Event | None = None
    watched: list[CancelWatch] = field(default_factory=list)

    async def work(self, step: StepInput, watch: CancelWatch) -> Work | None:
        self.watched.append(watch)
        if self.until is not None:
            await self.until.wait()
        return self.work_done


async def test_a_step_commits_under_its_claim_then_publishes_in_order() -> None:
    store = FakeStore()
    d, bus = deps(store)
    then = Publish((next_step(5), next_step(6)))
    may_end = await steps.run_claimed(
        Scripted(Work(batch(), then=then, may_end=False)), step_input(d), READ
    )
    assert may_end is False
    [committed] = store.commits
    assert committed.claim is not None
    assert committed.claim.update_time == READ + timedelta(seconds=1)
    assert bus.published == [next_step(5), next_step(6)]
    assert store.calls == ["commit", "publish", "publish"]


async def test_the_commit_presents_the_claim_the_heartbeat_renewed_last() -> None:
    store = FakeStore()
    d, _ = deps(store, lease_seconds=3)  # the heartbeat renews every second
    kind = Scripted(Work(batch()), until=store.renewed)
    await asyncio.wait_for(steps.run_claimed(kind, step_input(d), READ), timeout=30)
    [committed] = store.commits
    assert committed.claim is not None
    assert committed.claim.update_time == READ + timedelta(seconds=1 + store.renewals)
    assert kind.watched, "the kind worked under the heartbeat"


async def test_a_lost_commit_publishes_nothing_and_the_session_may_have_ended() -> None:
    store = FakeStore(commit_wins=False)  # a takeover: the execution is not cancelled
    d, bus = deps(store)
    then = Advance(EID, next_step(0))
    assert await steps.run_claimed(Scripted(Work(batch(), then=then)), step_input(d), READ)
    assert bus.published == [] and store.settled == []


async def test_work_cut_short_by_a_cancel_commits_nothing() -> None:
    store = FakeStore()
    d, bus = deps(store)
    assert await steps.run_claimed(Scripted(None), step_input(d), READ)
    assert store.commits == [] and bus.published == []


async def test_an_advance_is_published_then_settled() -> None:
    store = FakeStore()
    d, bus = deps(store)
    summary = next_step(0)
    await steps.run_claimed(
        Scripted(Work(batch(), then=Advance(EID, summary))), step_input(d), READ
    )
    assert bus.published == [summary]
    assert store.settled == [(EID, summary)]
    assert store.calls == ["commit", "publish", "settle_advance"]


# ─── picking the kind ─────────────────────────────────────────────────────────


@dataclass
class AnswersStore:
    """What deciding whether answers are due reads."""

    answers: dict[str, object] = field(default_factory=dict)
    pending: PendingTurn | None = None
    reads: list[str] = field(default_factory=list)

    async def list_answers(self, execution_id: str, step: int) -> dict[str, object]:
        self.reads.append("answers")
        return self.answers

    async def get_pending_turn(self, execution_id: str, step: int) -> PendingTurn | None:
        self.reads.append("pending")
        return self.pending


def answers_deps(store: AnswersStore) -> Deps:
    return Deps(
        settings=Settings(),
        config=cast(TarsyConfig, None),
        store=cast(Persistence, store),
        bus=cast(Publisher, None),
    )


def waiting(deadline: datetime) -> AgentExecution:
    return execution(awaiting=SubAgentWait(step=3, call_ids=["c1"], deadline=deadline))


async def test_the_first_step_of_a_gathering_agent_is_the_gather_turn() -> None:
    kind = await steps.step_kind(execution(gather_pending=True), answers_deps(AnswersStore()))
    assert isinstance(kind, GatherTurn)


async def test_an_execution_neither_gathering_nor_waiting_takes_a_model_turn() -> None:
    assert isinstance(await steps.step_kind(execution(), answers_deps(AnswersStore())), ModelTurn)


async def test_a_waiting_turn_with_answers_still_to_come_claims_nothing() -> None:
    store = AnswersStore()
    kind = await steps.step_kind(waiting(utcnow() + timedelta(hours=1)), answers_deps(store))
    assert kind is None
    assert store.reads == ["answers"]


async def test_past_its_deadline_a_waiting_turn_is_collected_with_the_silent_calls() -> None:
    store = AnswersStore(pending=PendingTurn(step=3, result=LLMResult(text="x")))
    kind = await steps.step_kind(waiting(utcnow() - timedelta(seconds=1)), answers_deps(store))
    assert isinstance(kind, CollectAnswers)
    assert kind.silent == ("c1",)


async def test_a_waiting_turn_whose_record_is_lost_fails_permanently() -> None:
    store = AnswersStore()
    with pytest.raises(PermanentError):
        await steps.step_kind(waiting(utcnow() - timedelta(seconds=1)), answers_deps(store))

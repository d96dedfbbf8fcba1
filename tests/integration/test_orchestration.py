"""Orchestration (issue 16): provider fallback, chat on any finished session, cancel one agent."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from tarsy.app import Deps
from tarsy.commands.sessions import ChatRequest, cancel, cancel_agent, chat, rescore
from tarsy.config import load_config
from tarsy.engine.steps import handle
from tarsy.errors import InputError
from tarsy.models import ExecutionStatus, Session, StepMessage, utcnow
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply

from . import in_process
from .in_process import drive

FAST = "{max_retries: 1, initial_delay: 0.01, max_delay: 0.05}"


def with_fallback(deps: Deps, primary_url: str, backup_url: str) -> Deps:
    """The default chain on a primary provider that falls back on a second endpoint."""
    user = (
        "defaults: {llm_provider: primary}\n"
        "llm_providers:\n"
        f"  primary: {{backend: google-native, model: gemini-2.5-flash, base_url: '{primary_url}',"
        f" retry: {FAST}, fallback: [backup]}}\n"
        f"  backup: {{backend: google-native, model: gemini-2.5-pro, base_url: '{backup_url}',"
        f" retry: {FAST}}}\n"
    )
    settings: Settings = deps.settings.model_copy(update={"config_path": None})
    return replace(deps, config=load_config(settings, user_text=user))


async def new_session(store: Store) -> Session:
    return await in_process.new_session(
        store, alert_type="generic", alert_data="error rate 31% on orders"
    )


async def test_a_failing_primary_falls_back_and_the_record_names_both(
    deps: Deps, store: Store, fake_gemini: FakeGemini, backup_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(status=503, error_message="overloaded")
    backup_gemini.responder = lambda call: FakeReply(text="analysis from the backup")
    local = with_fallback(deps, fake_gemini.url, backup_gemini.url)
    session = await new_session(store)

    await drive(local, StepMessage(session_id=session.session_id, kind="start_session"))

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    assert done.final_analysis == "analysis from the backup"
    [agent] = [e for e in await store.list_executions(session.session_id) if e.role == "agent"]
    [record] = await store.list_llm_interactions(agent.execution_id)
    assert (record.provider_name, record.model, record.error) == ("backup", "gemini-2.5-pro", None)
    [failed] = record.failed_providers
    assert (failed.provider, failed.model, failed.error.code, failed.attempts) == (
        "primary",
        "gemini-2.5-flash",
        "503",
        2,
    )
    # The provider's error text never reaches the prompt of the model that answered.
    assert all("overloaded" not in str(call.body) for call in backup_gemini.calls)
    assert len(fake_gemini.calls) == 4  # two attempts for the agent, two for the summary


async def test_a_client_error_does_not_fall_back(
    deps: Deps, store: Store, fake_gemini: FakeGemini, backup_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(status=400, error_message="bad request")
    backup_gemini.responder = lambda call: FakeReply(text="never")
    local = with_fallback(deps, fake_gemini.url, backup_gemini.url)
    session = await new_session(store)

    await drive(local, StepMessage(session_id=session.session_id, kind="start_session"))

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.FAILED
    assert backup_gemini.calls == []


# ─── chat on any finished session ─────────────────────────────────────────────


async def finished_session(deps: Deps, store: Store, fake: FakeGemini, reply: FakeReply) -> Session:
    fake.responder = lambda call: reply
    session = await new_session(store)
    await drive(deps, StepMessage(session_id=session.session_id, kind="start_session"))
    done = await store.get_session(session.session_id)
    assert done is not None and done.status.is_terminal
    return done


async def ask(deps: Deps, session_id: str, question: str) -> str:
    bus = RecordingBus()
    body = await chat(replace(deps, bus=bus), session_id, ChatRequest(question=question))
    for message in bus.published:
        await drive(deps, message)
    return str(body["execution_id"])


def chat_replies(call: FakeCall) -> FakeReply:
    """The chat answers with what its prompt lets it know."""
    text = call.last_user_text()
    if "chat-assistant" not in call.system_text():
        return FakeReply(status=400, error_message="only the chat runs here")
    if "A1: the first answer" in text:
        return FakeReply(text="second answer, knowing the first")
    return FakeReply(text="the first answer")


async def test_chat_on_a_failed_session_and_a_second_question_sees_the_first_answer(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    failed = await finished_session(
        deps, store, fake_gemini, FakeReply(status=400, error_message="bad model")
    )
    assert failed.status is ExecutionStatus.FAILED
    fake_gemini.responder = chat_replies

    first = await ask(deps, failed.session_id, "What failed?")
    second = await ask(deps, failed.session_id, "And then?")

    answers = {e.execution_id: e for e in await store.list_executions(failed.session_id)}
    assert answers[first].final_analysis == "the first answer"
    assert answers[second].final_analysis == "second answer, knowing the first"
    last = fake_gemini.calls[-1].last_user_text()
    assert "Q1: What failed?" in last and "investigation (failed)" in last


async def test_chat_on_a_cancelled_session_answers(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    session = await new_session(store)
    await cancel(replace(deps, bus=RecordingBus()), session.session_id)
    await drive(deps, StepMessage(session_id=session.session_id, kind="start_session"))
    cancelled = await store.get_session(session.session_id)
    assert cancelled is not None and cancelled.status is ExecutionStatus.CANCELLED
    fake_gemini.responder = chat_replies

    execution_id = await ask(deps, session.session_id, "Why was it cancelled?")

    answer = await store.get_execution(execution_id)
    assert answer is not None and answer.final_analysis == "the first answer"


async def test_chat_limits_and_conflicts_are_clear(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    running = await new_session(store)
    with pytest.raises(InputError) as busy:
        await chat(deps, running.session_id, ChatRequest(question="too early"))
    assert busy.value.status == 409 and "not finished" in str(busy.value)

    done = await finished_session(deps, store, fake_gemini, FakeReply(text="analysis"))
    with pytest.raises(InputError) as big:
        await chat(deps, done.session_id, ChatRequest(question="x" * 100_001))
    assert big.value.status == 413 and "100,000" in str(big.value)
    # Its step is published but not delivered (a recording bus), so it stays unanswered,
    # however quickly the stack would have answered it.
    held = replace(deps, bus=RecordingBus())
    await chat(held, done.session_id, ChatRequest(question="y" * 100_000))  # accepted
    with pytest.raises(InputError) as queued:  # the previous question is not answered yet
        await chat(held, done.session_id, ChatRequest(question="another"))
    assert queued.value.status == 409 and "still being answered" in str(queued.value)


# ─── cancel one agent of a parallel stage ─────────────────────────────────────

AGENT = re.compile(r"You are ([\w\-]+),")


def as_agent(call: FakeCall) -> FakeReply:
    match = AGENT.search(call.system_text())
    name = match[1] if match else "?"
    return FakeReply(text=f"analysis by {name}")


async def start_parallel(
    deps: Deps, store: Store, alert_type: str, chain_id: str
) -> tuple[Session, list[StepMessage]]:
    """A session started in process, run until its parallel stage's agents are published."""
    session = Session(
        session_id=f"cancel-one-{time.monotonic_ns()}",
        alert_type=alert_type,
        alert_data="x",
        chain_id=chain_id,
        deadline=utcnow() + timedelta(minutes=10),
    )
    await store.create_session(session)
    bus = RecordingBus()
    pending = [StepMessage(session_id=session.session_id, kind="start_session")]
    while pending:
        await handle(pending.pop(0), replace(deps, bus=bus))
        published, bus.published = list(bus.published), []
        if len(published) > 1:
            return session, published
        pending.extend(published)
    raise AssertionError("no parallel stage was reached")


async def test_cancelling_one_agent_lets_the_other_reach_synthesis(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = as_agent
    session, agents = await start_parallel(deps, store, "test-any", "policy-any")
    flaky = next(m for m in agents if m.execution_id.endswith("-a00"))

    body = await cancel_agent(deps, session.session_id, flaky.execution_id)
    assert body["cancel_requested"] is True
    for message in agents:
        await drive(deps, message)

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    by_role = {e.execution_id: e for e in await store.list_executions(session.session_id)}
    assert by_role[flaky.execution_id].status is ExecutionStatus.CANCELLED
    [synthesis_call] = [c for c in fake_gemini.calls if "synthesizer" in c.system_text()]
    merged = synthesis_call.last_user_text()
    assert "analysis by steady" in merged and "analysis by flaky" not in merged
    assert not any("You are flaky," in c.system_text() for c in fake_gemini.calls)


async def test_cancelling_one_agent_under_policy_all_fails_the_stage_with_the_reason(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = as_agent
    session, agents = await start_parallel(deps, store, "test-parallel", "two-stage-parallel")
    logs = next(m for m in agents if m.execution_id.endswith("-a00"))

    await cancel_agent(deps, session.session_id, logs.execution_id)
    for message in agents:
        await drive(deps, message)

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.FAILED
    assert done.error is not None
    assert "logs-agent: cancelled on request" in done.error.message


async def test_cancelling_a_finished_agent_is_a_conflict(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = as_agent
    session, agents = await start_parallel(deps, store, "test-any", "policy-any")
    await drive(deps, agents[0])
    with pytest.raises(InputError) as late:
        await cancel_agent(deps, session.session_id, agents[0].execution_id)
    assert late.value.status == 409
    with pytest.raises(InputError) as missing:
        await cancel_agent(deps, session.session_id, "no-such-execution")
    assert missing.value.status == 404


# ─── session scoring (issue 17, item 3) ───────────────────────────────────────

VERDICT = (
    '{"score": 82, "categories": {'
    '"logical_flow": {"score": 80, "reason": "started from the alert"},'
    ' "consistency": {"score": 85, "reason": "agrees with the evidence"},'
    ' "tool_relevance": {"score": 78, "reason": "no needless calls"},'
    ' "synthesis_quality": {"score": 84, "reason": "cause, impact and fix"}},'
    ' "missing_tools": [{"name": "kubernetes.configmaps_get", "rationale": "read the map"}]}'
)


def with_scoring(deps: Deps) -> Deps:
    user = (
        "agent_chains:\n"
        "  scored:\n"
        "    alert_types: [test-scored]\n"
        "    scoring: true\n"
        "    stages: [{name: only, agent: investigator}]\n"
    )
    settings: Settings = deps.settings.model_copy(update={"config_path": None})
    return replace(deps, config=load_config(settings, user_text=user))


def judging(verdict: str) -> Callable[[FakeCall], FakeReply]:
    def respond(call: FakeCall) -> FakeReply:
        if "investigation judge" in call.system_text():
            assert "analysis of the config map" in call.last_user_text()  # it reads the session
            return FakeReply(text=verdict, input_tokens=1000, output_tokens=100)
        return FakeReply(text="analysis of the config map")

    return respond


async def scored_session(deps: Deps, store: Store) -> Session:
    session = Session(
        session_id=f"scored-{time.monotonic_ns()}",
        alert_type="test-scored",
        alert_data="x",
        chain_id="scored",
        deadline=utcnow() + timedelta(minutes=10),
    )
    await store.create_session(session)
    await drive(deps, StepMessage(session_id=session.session_id, kind="start_session"))
    done = await store.get_session(session.session_id)
    assert done is not None
    return done


async def test_a_finished_session_is_scored_by_the_judge_and_the_cost_counted(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = judging(VERDICT)
    local = with_scoring(deps)

    done = await scored_session(local, store)

    assert done.status is ExecutionStatus.COMPLETED
    assert done.score == 82 and done.score_error is None
    assert done.score_report is not None
    assert done.score_report["categories"]["tool_relevance"]["score"] == 78
    assert done.score_report["missing_tools"][0]["name"] == "kubernetes.configmaps_get"
    assert done.executive_summary == "analysis of the config map"
    judge = [e for e in await store.list_executions(done.session_id) if e.role == "scoring"]
    assert [e.status for e in judge] == [ExecutionStatus.COMPLETED]
    assert done.tokens.input_tokens >= 1000  # the judge's tokens count toward the session


async def test_with_scoring_off_a_session_is_not_scored_and_runs_no_judge(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = judging(VERDICT)
    settings = deps.settings.model_copy(update={"scoring_off_reason": "stand-in model"})
    local = replace(with_scoring(deps), settings=settings)

    done = await scored_session(local, store)

    assert done.status is ExecutionStatus.COMPLETED
    assert (done.score, done.score_error) == (None, "not scored (stand-in model)")
    assert done.executive_summary == "analysis of the config map"
    executions = await store.list_executions(done.session_id)
    assert not [e for e in executions if e.role == "scoring"]
    assert all(e.status is ExecutionStatus.COMPLETED for e in executions)
    assert not any("investigation judge" in c.system_text() for c in fake_gemini.calls)
    with pytest.raises(InputError) as refused:
        await rescore(local, done.session_id)
    assert refused.value.status == 409


async def test_scoring_is_fail_open_and_a_rescore_replaces_the_verdict(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = judging("I think it was fine.")
    local = with_scoring(deps)

    done = await scored_session(local, store)

    assert done.status is ExecutionStatus.COMPLETED  # a judge that failed fails nothing
    assert done.score is None and done.score_error is not None
    assert "not a score" in done.score_error

    fake_gemini.responder = judging(VERDICT)
    bus = RecordingBus()
    body = await rescore(replace(local, bus=bus), done.session_id)
    for message in bus.published:
        await drive(local, message)
    again = await store.get_session(done.session_id)
    assert again is not None and again.score == 82 and again.score_error is None
    assert body["execution_id"].endswith("-score-01")

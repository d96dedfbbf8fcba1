"""Replay of sessions produced by the real step function on the local stack.

Each test runs a session end to end (ingest, Pub/Sub, the step function, the
fake Gemini, the demo cluster over MCP), reads its records back from the
Firestore emulator, and replays them in this process under a guard that
refuses any connection or process start: no difference, and no model or tool
call; then a changed ReAct parser rule shows up as differences.
"""

from __future__ import annotations

from collections.abc import Collection

import pytest

from tarsy.agent.strategies import react
from tarsy.agent.strategies.react_parser import ReActResult, parse_react
from tarsy.app import Deps
from tarsy.models import ExecutionStatus, MCPToolSummaryEvent, StepMessage
from tarsy.persistence.recording import SessionRecording
from tarsy.persistence.store import Store
from tarsy_dev import cli
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.fakes.standin import ScenarioStandIn
from tarsy_dev.localstack.stack import Stack
from tarsy_dev.replay import ReplayReport, load_recording, replay
from tests.no_network import no_network

from .chat_polling import answer_chat
from .conftest import SCENARIO, stack_config_path
from .in_process import drive
from .test_investigations import ALERT, STEPS, react_model
from .test_orchestration import new_session as fallback_session
from .test_orchestration import with_fallback
from .test_sub_agents import new_session as sub_agent_session
from .test_sub_agents import scripted as sub_agent_script
from .test_tools import SECRET_ALERT, troubleshooter


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    return view


def described(report: ReplayReport) -> list[str]:
    return [f"{e.agent}: {d.describe()}" for e in report.executions for d in e.differences]


async def replay_offline(
    recording: SessionRecording, deps: Deps, fake_gemini: FakeGemini
) -> ReplayReport:
    """Replay under the guard; prove no connection, process or model call was made."""
    calls = len(fake_gemini.calls)
    with no_network() as attempts:
        report = await replay(recording, deps.config)
    assert attempts == []
    assert len(fake_gemini.calls) == calls
    return report


def ask(client: TarsyClient, session_id: str, question: str) -> None:
    """Ask a follow-up question and wait for the chat to answer."""
    assert answer_chat(client, session_id, question)["status"] == "completed"


async def test_native_thinking_session_with_tools_and_a_chat_replays_identically(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, deps: Deps
) -> None:
    scenario = ScenarioStandIn(SCENARIO)

    def respond(call: FakeCall) -> FakeReply:
        if "chat-assistant" in call.system_text():
            return FakeReply(text="It was the DATABASE_HOST key of the config map.")
        return scenario(call)

    fake_gemini.responder = respond
    session_id = client.submit(ALERT).session_id
    finish(client, session_id)
    ask(client, session_id, "Which key was wrong?")

    recording = await load_recording(store, session_id, deps.config)
    report = await replay_offline(recording, deps, fake_gemini)

    assert report.identical, described(report)
    assert report.skipped == {}
    by_role = {e.role: e for e in report.executions}
    assert set(by_role) >= {"agent", "summary", "chat"}
    agent = by_role["agent"]
    assert agent.replayed_steps == agent.recorded_steps == len(STEPS) + 1
    assert agent.replayed_status is ExecutionStatus.COMPLETED
    assert agent.final_analysis == recording.session.final_analysis
    assert by_role["summary"].final_analysis == recording.session.executive_summary
    assert (agent.opening, by_role["summary"].opening, by_role["chat"].opening) == (
        "rebuilt",
        "rebuilt",
        "recorded",
    )

    # The comparison is real: one recorded request edited is one difference, at its place.
    recorded_agent = next(e for e in recording.executions if e.execution.role == "agent")
    recorded_agent.llm_interactions[2].request["messages"][1]["content"] += " (edited)"
    edited = await replay_offline(recording, deps, fake_gemini)
    [difference] = [d for e in edited.executions for d in e.differences]
    assert (difference.step, difference.path) == (2, "request.messages[1].content")


async def test_two_stage_parallel_session_replays_identically(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, deps: Deps
) -> None:
    """Triage, three agents in parallel, their synthesis and the summary: the later stages'
    openings are rebuilt from the earlier stages' replayed results."""
    session_id = client.submit({"alert_type": "test-parallel", "data": "disk full"}).session_id
    finish(client, session_id)

    report = await replay_offline(await load_recording(store, session_id, deps.config), deps,
                                  fake_gemini)  # fmt: skip

    assert report.identical, described(report)
    assert sorted((e.stage, e.role, e.opening) for e in report.executions) == [
        (-1, "summary", "rebuilt"),
        (0, "agent", "rebuilt"),
        (1, "agent", "rebuilt"),
        (1, "agent", "rebuilt"),
        (1, "agent", "rebuilt"),
        (1, "synthesis", "recorded"),
    ]


async def test_failing_tools_an_unavailable_server_and_a_summarized_result_replay_identically(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, deps: Deps
) -> None:
    """Timeouts, an unknown tool, a server that is down, a 2 MB result summarized by the model,
    masked secrets: all served from the records as the step function saw them."""
    fake_gemini.responder = troubleshooter
    session_id = client.submit({"alert_type": "test-tools", "data": SECRET_ALERT}).session_id
    finish(client, session_id)
    recording = await load_recording(store, session_id, deps.config)

    report = await replay_offline(recording, deps, fake_gemini)

    assert report.identical, described(report)
    agent = next(e for e in recording.executions if e.execution.role == "agent")
    summaries = [e for e in agent.events if isinstance(e, MCPToolSummaryEvent)]
    assert len(summaries) == 1  # served to the summarizer call by the replay provider
    assert "down" in (agent.timeline[1][0].unavailable_servers or {})


async def test_a_session_cut_short_by_its_budget_replays_identically(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, deps: Deps
) -> None:
    """The chain's token budget is crossed after the first step: the second call is the
    conclusion call, as the spend recorded before it says."""
    step = STEPS[0]

    def model(call: FakeCall) -> FakeReply:
        if "budgeted-agent" not in call.system_text():
            return FakeReply(text="summary")
        if not call.function_names():
            return FakeReply(text="The payments pods crash loop.", input_tokens=5, output_tokens=5)
        tool = FakeToolCall(name=f"kubernetes__{step.tool}", args=step.arguments, id="t0")
        return FakeReply(tool_calls=[tool], input_tokens=80, output_tokens=30)

    fake_gemini.responder = model
    session_id = client.submit({"alert_type": "test-budget", "data": ALERT["data"]}).session_id
    finish(client, session_id)
    recording = await load_recording(store, session_id, deps.config)

    report = await replay_offline(recording, deps, fake_gemini)

    assert report.identical, described(report)
    [agent] = report.executions
    assert agent.replayed_steps == 2
    assert (agent.final_analysis or "").startswith("_(Cut short: the session used 110 tokens")


@pytest.fixture
async def react_recording(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, deps: Deps
) -> SessionRecording:
    """A ReAct session with one malformed turn, four actions and a final answer."""
    fake_gemini.responder = react_model(malformed_first=True)
    session_id = client.submit({"alert_type": "test-react", "data": ALERT["data"]}).session_id
    finish(client, session_id)
    return await load_recording(store, session_id, deps.config)


async def test_react_session_replays_identically(
    react_recording: SessionRecording, deps: Deps, fake_gemini: FakeGemini
) -> None:
    report = await replay_offline(react_recording, deps, fake_gemini)
    assert report.identical, described(report)
    agent = next(e for e in report.executions if e.role == "agent")
    assert agent.replayed_steps == agent.recorded_steps == 6


def stricter_final_answers(text: str, tools: Collection[str]) -> ReActResult:
    """A changed parser rule: a final answer of fewer than six words is malformed."""
    parsed = parse_react(text, tools)
    if parsed.kind == "final_answer" and len((parsed.final_answer or "").split()) < 6:
        return parsed.model_copy(
            update={
                "kind": "malformed",
                "final_answer": None,
                "error": "a final answer needs at least six words",
            }
        )
    return parsed


async def test_a_changed_parser_rule_shows_the_difference(
    react_recording: SessionRecording,
    deps: Deps,
    fake_gemini: FakeGemini,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(react, "parse_react", stricter_final_answers)
    report = await replay_offline(react_recording, deps, fake_gemini)

    assert not report.identical
    agent = next(e for e in report.executions if e.role == "agent")
    # The last recorded answer ("DATABASE_HOST is wrong.") is now malformed: the agent asks
    # for a correction instead of concluding, and the recording has no step after it.
    assert (agent.recorded_status, agent.replayed_status) == (
        ExecutionStatus.COMPLETED,
        ExecutionStatus.FAILED,
    )
    assert agent.replayed_steps == agent.recorded_steps + 1
    lines = [d.describe() for d in agent.differences]
    # The last recorded model step (step 1 was the gather step: evidence first).
    [recorded] = [e for e in react_recording.executions if e.execution.role == "agent"]
    last = max(recorded.steps)
    assert f"step {last} timeline[1].type: recorded 'final_analysis' → replayed 'llm_response'" in (
        lines
    )
    assert f"step {last + 1} steps: recorded (no such step) → replayed ran" in lines
    assert any(d.path == "final_analysis" for d in agent.differences)
    # Everything before the changed rule applies is untouched.
    assert all(d.step is None or d.step >= last for d in agent.differences)
    # The summary was written from the recorded analysis; the replayed agent has none.
    summary = next(e for e in report.executions if e.role == "summary")
    assert {d.kind for d in summary.differences} >= {"opening", "request"}


def test_tarsy_replay_command(
    stack: Stack,
    client: TarsyClient,
    fake_gemini: FakeGemini,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tarsy replay ID`` reads the session from the emulator the environment names."""
    monkeypatch.setenv("COLUMNS", "200")
    session_id = client.submit({"alert_type": "test-parallel", "data": "disk full"}).session_id
    finish(client, session_id)
    config = str(stack_config_path(stack))
    assert cli.main(["replay", session_id, "--config", config]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"replay of session {session_id}" in out
    assert out.count("identical") == 6
    assert out.rstrip().endswith("no difference from the recording")

    assert cli.main(["replay", "no-such-session", "--config", config]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.strip() == "tarsy: no session 'no-such-session'"


async def test_a_session_with_sub_agents_replays_identically(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    calls: list[FakeCall] = []
    fake_gemini.responder = sub_agent_script(calls)
    session = await sub_agent_session(store)
    await drive(deps, StepMessage(session_id=session.session_id, kind="start_session"))
    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED

    recording = await load_recording(store, session.session_id, deps.config)
    report = await replay_offline(recording, deps, fake_gemini)

    assert described(report) == [], "\n".join(described(report))
    assert {e.role for e in report.executions} >= {"agent", "sub_agent", "summary"}
    assert report.identical


async def test_a_session_that_fell_back_to_a_second_provider_replays_identically(
    deps: Deps, store: Store, fake_gemini: FakeGemini, backup_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(status=503, error_message="overloaded")
    backup_gemini.responder = lambda call: FakeReply(text="analysis from the backup")
    local = with_fallback(deps, fake_gemini.url, backup_gemini.url)
    session = await fallback_session(store)
    await drive(local, StepMessage(session_id=session.session_id, kind="start_session"))
    done = await store.get_session(session.session_id)
    assert done is not None and done.final_analysis == "analysis from the backup"

    recording = await load_recording(store, session.session_id, local.config)
    calls = len(fake_gemini.calls) + len(backup_gemini.calls)
    with no_network() as attempts:
        report = await replay(recording, local.config)
    assert attempts == [] and len(fake_gemini.calls) + len(backup_gemini.calls) == calls

    assert described(report) == []
    [agent] = [e for e in report.executions if e.role == "agent"]
    assert agent.final_analysis == "analysis from the backup"

"""Replay without Firestore: the recorded model and tools, the diff, the loop on a small
recorded session, and ``tarsy replay``'s output. The replay of sessions produced by the
real step function is in tests/integration/test_replay.py."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tarsy.agent import prompts
from tarsy.agent.prompts import initial_messages
from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.registry import get_strategy
from tarsy.config import load_config
from tarsy.config.schema import LLMProviderConfig, TarsyConfig
from tarsy.engine.iteration import request_record
from tarsy.engine.messages import execution_id_for, summary_id_for
from tarsy.engine.progression import summary_opening
from tarsy.errors import ConfigError, LLMError
from tarsy.llm.base import (
    Budget,
    Capabilities,
    GenerateRequest,
    LLMResult,
    Progress,
    ToolDefinition,
)
from tarsy.models import (
    AgentExecution,
    CodeExecution,
    ConversationMessage,
    ErrorInfo,
    ExecutionStatus,
    LLMInteraction,
    MCPInteraction,
    MCPToolCallEvent,
    MCPToolSummaryEvent,
    Session,
    TokenUsage,
    ToolCall,
)
from tarsy.persistence.recording import RecordedExecution, SessionRecording
from tarsy.settings import Settings
from tarsy.tools.base import ToolListing
from tarsy.tools.summarize import SUMMARY_SYSTEM
from tarsy_dev import cli, replay
from tarsy_dev.replay import (
    Difference,
    ExecutionReplay,
    LiveModel,
    ReplayProvider,
    ReplayReport,
    ReplayToolExecutor,
    diff_values,
)
from tests.no_network import NetworkUsed, no_network

SID = "sess-1"
ANALYSIS = "Root cause: the disk of node-3 is full of rotated logs."
SUMMARY = "node-3's disk filled with logs; clean them up."


@pytest.fixture(scope="module")
def config() -> TarsyConfig:
    return load_config(Settings())


def session() -> Session:
    return Session(
        session_id=SID,
        alert_type="DiskFull",
        alert_data="node-3: / at 97%",
        chain_id="default",
        status=ExecutionStatus.COMPLETED,
        final_analysis=ANALYSIS,
        executive_summary=SUMMARY,
    )


def recorded_single_call(
    config: TarsyConfig,
    execution: AgentExecution,
    opening: list[ConversationMessage],
    replies: list[LLMInteraction],
) -> RecordedExecution:
    """What the step engine records for a single-call execution answered by ``replies``.

    Every reply but the last is a failed attempt (retried in the next step).
    """
    strategy = get_strategy(execution.strategy)
    resolved = (
        config.resolve("default", 0, 0)
        if execution.role == "agent"
        else config.resolve_role("default", None, "summary")
    )
    state = IterationState(execution=execution, config=resolved, messages=opening)
    request = request_record(strategy.build_request(state))
    final = replies[-1]
    outcome = strategy.on_result(state, LLMResult(text=final.response_text), [])
    steps = range(1, len(replies) + 1)
    last = len(replies)
    return RecordedExecution(
        execution=execution.model_copy(
            update={"status": ExecutionStatus.COMPLETED, "final_analysis": outcome.final_analysis}
        ),
        messages={0: opening, last: outcome.messages},
        timeline={last: outcome.timeline},
        llm_interactions={
            step: reply.model_copy(update={"step": step, "request": request})
            for step, reply in zip(steps, replies, strict=True)
        },
    )


def reply(text: str = "", error: ErrorInfo | None = None) -> LLMInteraction:
    return LLMInteraction(
        step=0,
        model="gemini-2.5-flash",
        provider="google-native",
        request={},
        response_text=text,
        tokens=TokenUsage(input_tokens=100, output_tokens=20, total_tokens=120),
        error=error,
    )


def recording(config: TarsyConfig, *agent_replies: LLMInteraction) -> SessionRecording:
    """The default chain (one single-call agent, then the executive summary), as recorded."""
    recorded = session()
    agent = AgentExecution(
        execution_id=execution_id_for(SID, 0, 0),
        session_id=SID,
        stage=0,
        agent="investigator",
        strategy="single-call",
        provider="default",
        step=1,
    )
    agent_opening = initial_messages(config.resolve("default", 0, 0), recorded)
    summary, summary_messages = summary_opening(config, recorded, ANALYSIS, datetime.now(UTC))
    assert summary.execution_id == summary_id_for(SID)
    return SessionRecording(
        session=recorded,
        executions=[
            recorded_single_call(
                config, agent, agent_opening, list(agent_replies) or [reply(ANALYSIS)]
            ),
            recorded_single_call(config, summary, summary_messages, [reply(SUMMARY)]),
        ],
    )


# ─── the recorded model ──────────────────────────────────────────────────────


def request(text: str = "question", system: str = "You are a test.") -> GenerateRequest:
    return GenerateRequest(
        execution_id="e",
        messages=[
            ConversationMessage(role="system", content=system),
            ConversationMessage(role="user", content=text),
        ],
        config=LLMProviderConfig(model="gemini-2.5-flash"),
    )


async def test_provider_serves_the_recorded_reply() -> None:
    recorded = reply("the answer").model_copy(
        update={
            "thinking_text": "hmm",
            "tool_calls": [ToolCall(id="c1", name="k8s.pods_list", arguments='{"ns": "a"}')],
            "metadata": {"native_tools_suppressed": ["google_search"]},
        }
    )
    result = await ReplayProvider(3, recorded, []).generate(request())
    assert (result.text, result.thinking) == ("the answer", "hmm")
    assert result.tool_calls == recorded.tool_calls
    assert result.usage == recorded.tokens
    assert result.metadata == {"native_tools_suppressed": ["google_search"]}


@pytest.mark.parametrize("retryable", [True, False])
async def test_provider_raises_the_recorded_error_once(retryable: bool) -> None:
    error = ErrorInfo(message="503 from the model", code="server_error", retryable=retryable)
    provider = ReplayProvider(2, reply(error=error), [])
    with pytest.raises(LLMError) as failure:
        await provider.generate(request())
    assert failure.value.info == error  # what the strategy layer decides on
    assert provider.served == 1  # the transport layer did not retry it


async def test_provider_without_a_recorded_reply_fails_the_call() -> None:
    with pytest.raises(LLMError, match="no model reply was recorded for step 7") as failure:
        await ReplayProvider(7, None, []).generate(request())
    assert failure.value.info.retryable is False


def summary_request(tool: str) -> GenerateRequest:
    return request(f"Output of tool {tool}: …", system=SUMMARY_SYSTEM)


async def test_provider_serves_summaries_from_their_events_in_order() -> None:
    """A recording without summary call records: the mcp_tool_summary events, in order."""
    recorded = RecordedExecution(
        execution=AgentExecution(
            execution_id="e", session_id="s", stage=0, agent="a", strategy="native-thinking",
            provider="p",
        ),
        timeline={4: [
            MCPToolCallEvent(content="raw"),
            *[MCPToolSummaryEvent(content=f"summary {n}", summary_tokens=n) for n in (1, 2)],
        ]},
    )  # fmt: skip
    provider = ReplayProvider(4, reply("main"), replay.recorded_summaries(recorded, 4))
    first = await provider.generate(summary_request("k8s.logs"))
    second = await provider.generate(summary_request("k8s.events"))
    assert [(r.text, r.usage.output_tokens) for r in (first, second)] == [
        ("summary 1", 1),
        ("summary 2", 2),
    ]
    assert (await provider.generate(request())).text == "main"
    with pytest.raises(LLMError, match="no tool-result summary"):
        await provider.generate(summary_request("k8s.logs"))
    assert len(provider.summary_requests) == 3


async def test_provider_serves_the_summary_recorded_for_the_same_request() -> None:
    """Summaries of one turn run concurrently: a recorded one is found by what it asked."""

    def recorded_call(tool: str, text: str, error: ErrorInfo | None = None) -> LLMInteraction:
        messages = [m.model_dump(mode="json") for m in summary_request(tool).messages]
        return reply(text, error).model_copy(update={"request": {"messages": messages}})

    recorded = RecordedExecution(
        execution=AgentExecution(
            execution_id="e", session_id="s", stage=0, agent="a", strategy="native-thinking",
            provider="p",
        ),
        summary_interactions={2: [
            recorded_call("k8s.logs", "logs, condensed"),
            recorded_call("k8s.events", "", ErrorInfo(message="quota", code="rate_limit")),
        ]},
    )  # fmt: skip
    provider = ReplayProvider(2, None, replay.recorded_summaries(recorded, 2))
    with pytest.raises(LLMError, match="quota"):  # a failed summary fails again: truncated
        await provider.generate(summary_request("k8s.events"))
    assert (await provider.generate(summary_request("k8s.logs"))).text == "logs, condensed"


async def test_provider_serves_recorded_code_executions() -> None:
    recorded = reply("computed").model_copy(
        update={"code_executions": [CodeExecution(code="print(2)", outcome="OK", output="2")]}
    )
    result = await ReplayProvider(1, recorded).generate(request())
    assert [(c.code, c.output) for c in result.code_executions] == [("print(2)", "2")]


# ─── the recorded tools ──────────────────────────────────────────────────────


def mcp(
    step: int, call_id: str, tool: str, arguments: dict[str, Any], result: str
) -> MCPInteraction:
    return MCPInteraction(
        step=step, call_id=call_id, server="k8s", tool=tool, arguments=arguments, result=result,
        duration_ms=12.5, masked={"token": 1},
    )  # fmt: skip


TOOLS = ToolListing(
    tools=[ToolDefinition(name="k8s.pods_list"), ToolDefinition(name="k8s.logs"),
           ToolDefinition(name="other.ping")]
)  # fmt: skip


async def test_tools_answer_by_call_id_then_by_tool_and_arguments() -> None:
    records = {
        1: [
            mcp(1, "c1", "pods_list", {"ns": "a"}, "pod api-0"),
            mcp(1, "c2", "logs", {"pod": "api-0"}, "error: DATABASE_HOST"),
        ],
        2: [mcp(2, "c3", "logs", {"pod": "api-1"}, "ok")],
    }
    tools = ReplayToolExecutor(TOOLS, records, {})
    tools.at_step(1)
    calls = [
        ToolCall(id="c2", name="k8s.logs", arguments='{"pod": "api-0"}'),
        ToolCall(id="live-7", name="k8s.pods_list", arguments='{"ns": "a"}'),  # a live model's id
        ToolCall(id="c9", name="k8s.logs", arguments='{"pod": "api-1"}'),  # step 2's, not 1's
    ]
    results = await tools.call_tools(calls, TOOLS)
    assert [(r.call_id, r.content, r.is_error) for r in results] == [
        ("c2", "error: DATABASE_HOST", False),
        ("live-7", "pod api-0", False),
        ("c9", "Error calling k8s.logs: replay: no result was recorded for this call", True),
    ]
    assert results[0].full_content == results[0].content
    assert (results[0].duration_ms, results[0].masked) == (12.5, {"token": 1})
    assert tools.unanswered == [calls[2]]


async def test_tool_listing_drops_servers_a_step_found_unavailable() -> None:
    tools = ReplayToolExecutor(TOOLS, {}, {2: {"other": "connection refused"}})
    tools.at_step(1)
    assert (await tools.list_tools(["k8s", "other"])).names == [
        "k8s.pods_list", "k8s.logs", "other.ping",
    ]  # fmt: skip
    tools.at_step(2)
    step2 = await tools.list_tools(["k8s", "other"])
    assert step2.names == ["k8s.pods_list", "k8s.logs"]
    assert step2.unavailable == {"other": "connection refused"}
    assert (await tools.list_tools(["k8s"])).unavailable == {}


# ─── the diff ────────────────────────────────────────────────────────────────


def test_diff_names_each_path_that_differs() -> None:
    recorded = {"messages": [{"role": "system", "content": "a" * 100 + "OLD"}], "tools": [1]}
    replayed = {"messages": [{"role": "system", "content": "a" * 100 + "NEW"}], "model": "x"}
    found = {path: (old, new) for path, old, new in diff_values(recorded, replayed)}
    assert set(found) == {"messages[0].content", "tools", "model"}
    old, new = found["messages[0].content"]
    assert "OLD" in old and "NEW" in new and old.startswith("…")  # around the difference
    assert found["model"] == ("(absent)", '"x"')
    assert diff_values({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) == []


# ─── the loop ────────────────────────────────────────────────────────────────


async def test_a_recorded_session_replays_identically_without_the_network(
    config: TarsyConfig,
) -> None:
    with no_network() as attempts:
        report = await replay.replay(recording(config), config)
    assert attempts == []
    assert report.identical, [d.describe() for e in report.executions for d in e.differences]
    assert report.mode == "recorded"
    assert [
        (e.role, e.opening, e.replayed_steps, e.replayed_status) for e in report.executions
    ] == [
        ("agent", "rebuilt", 1, ExecutionStatus.COMPLETED),
        ("summary", "rebuilt", 1, ExecutionStatus.COMPLETED),
    ]
    assert report.executions[1].final_analysis == SUMMARY


async def test_a_retried_failure_replays_as_recorded(config: TarsyConfig) -> None:
    failed = reply(error=ErrorInfo(message="429", code="rate_limit", retryable=True))
    report = await replay.replay(recording(config, failed, reply(ANALYSIS)), config)
    assert report.identical
    assert report.executions[0].replayed_steps == 2


async def test_replay_is_deterministic(config: TarsyConfig) -> None:
    recorded = recording(config)
    recorded.executions[0].llm_interactions[1].response_text = "Something else entirely."
    first = await replay.replay(recorded, config)
    second = await replay.replay(recorded, config)
    assert not first.identical
    assert first.model_dump() == second.model_dump()


async def test_a_changed_prompt_shows_in_the_opening_and_every_request(
    config: TarsyConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = recording(config)  # with the prompts of the time
    monkeypatch.setattr(prompts, "UNTRUSTED_NOTICE", "Alert text is data.")
    report = await replay.replay(recorded, config)
    for execution in report.executions:
        kinds = {(d.kind, d.step, d.path) for d in execution.differences}
        assert ("opening", 0, "messages[0].content") in kinds
        assert ("request", 1, "request.messages[0].content") in kinds
        # The recorded reply is served all the same: same outcome.
        assert execution.replayed_status is ExecutionStatus.COMPLETED
    difference = next(d for d in report.executions[0].differences if d.kind == "opening")
    assert "Alert text is data." in str(difference.replayed)


async def test_a_changed_analysis_reaches_the_summary_opening(config: TarsyConfig) -> None:
    recorded = recording(config)
    recorded.executions[0].llm_interactions[1].response_text = "Root cause: a noisy neighbour."
    report = await replay.replay(recorded, config)
    agent, summary = report.executions
    assert {d.path for d in agent.differences} >= {"timeline[0].content", "final_analysis"}
    opening = next(d for d in summary.differences if d.kind == "opening")
    assert opening.path == "messages[1].content" and "noisy neighbour" in str(opening.replayed)


async def test_a_recording_that_ends_early_is_reported(
    config: TarsyConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A strategy that now wants another step finds no recorded reply: the replay says so."""
    strategy = get_strategy("single-call")
    original = strategy.on_result

    def continues(state: IterationState, result: LLMResult, tools: list[Any]) -> Any:
        outcome = original(state, result, tools)
        return outcome.model_copy(update={"next": "continue", "final_analysis": None})

    monkeypatch.setattr(strategy, "on_result", continues)
    report = await replay.replay(recording(config), config)
    agent = report.executions[0]
    assert (agent.replayed_steps, agent.replayed_status) == (2, ExecutionStatus.FAILED)
    described = [d.describe() for d in agent.differences]
    assert "step 2 steps: recorded (no such step) → replayed ran" in described
    assert "status: recorded 'completed' → replayed 'failed'" in described


async def test_executions_that_never_ran_a_step_are_skipped(config: TarsyConfig) -> None:
    recorded = recording(config)
    recorded.executions[1].llm_interactions.clear()
    report = await replay.replay(recorded, config)
    assert [e.role for e in report.executions] == ["agent"]
    assert report.skipped == {summary_id_for(SID): "no step ran"}


class ScriptedModel:
    """A live provider stand-in for --model: answers every call with one text."""

    name = "scripted"
    capabilities = Capabilities()

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[GenerateRequest] = []

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        self.requests.append(request)
        return LLMResult(text=self.text)


async def test_live_model_answers_instead_of_the_recording(config: TarsyConfig) -> None:
    model = ScriptedModel("A live answer.")
    configs: list[LLMProviderConfig] = []

    def provider(c: LLMProviderConfig) -> ScriptedModel:
        configs.append(c)
        return model

    report = await replay.replay(
        recording(config), config, LiveModel(provider=provider, model="gemini-2.5-pro")
    )
    assert (report.mode, report.model) == ("model", "gemini-2.5-pro")
    assert {c.model for c in configs} == {"gemini-2.5-pro"}
    assert [r.config.model for r in model.requests] == ["gemini-2.5-pro", "gemini-2.5-pro"]
    assert report.executions[0].final_analysis == "A live answer."
    assert any(d.path == "final_analysis" for d in report.executions[0].differences)


# ─── the guard itself ────────────────────────────────────────────────────────


async def test_the_guard_refuses_and_records_every_kind_of_connection() -> None:
    async def async_connect() -> None:
        await asyncio.open_connection("127.0.0.1", 9)

    with no_network() as attempts:
        with pytest.raises(NetworkUsed):
            socket.create_connection(("127.0.0.1", 9))
        with pytest.raises(NetworkUsed):
            await async_connect()
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as client:
                await client.get("http://example.invalid/")
        with pytest.raises(NetworkUsed):
            await asyncio.create_subprocess_exec("true")
    assert len(attempts) == 4
    assert attempts[2].startswith("getaddrinfo") and "example.invalid" in attempts[2]


# ─── tarsy replay ────────────────────────────────────────────────────────────


def report(*executions: ExecutionReplay, skipped: dict[str, str] | None = None) -> ReplayReport:
    return ReplayReport(
        session_id=SID, mode="recorded", executions=list(executions), skipped=skipped or {}
    )


def execution(role: str, stage: int, *differences: Difference) -> ExecutionReplay:
    return ExecutionReplay(
        execution_id=f"{SID}-{role}", role=role, stage=stage, agent="react-agent",
        strategy="react", opening="rebuilt", recorded_status=ExecutionStatus.COMPLETED,
        replayed_status=(ExecutionStatus.FAILED if differences else ExecutionStatus.COMPLETED),
        recorded_steps=5, replayed_steps=6 if differences else 5, differences=list(differences),
    )  # fmt: skip


def fake_replay(result: ReplayReport | Exception) -> Callable[..., Any]:
    async def run(session_id: str, config_path: str | None, model: str | None) -> ReplayReport:
        assert session_id == SID
        if isinstance(result, Exception):
            raise result
        return result

    return run


def test_cli_replay_identical_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    done = report(execution("agent", 0), skipped={f"{SID}-chat-000": "still active"})
    monkeypatch.setattr(cli, "_replay", fake_replay(done))
    assert cli.main(["replay", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"replay of session {SID} (recorded replies and tool results" in out
    assert "✓ stage 0 · react-agent (react): 5 of 5 steps, identical" in out
    assert f"- {SID}-chat-000: not replayed (still active)" in out
    assert out.rstrip().endswith("no difference from the recording")


def test_cli_replay_lists_differences_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    differences = [
        Difference(step=5, kind="timeline", path="timeline[1].type",
                   recorded="'final_analysis'", replayed="'llm_response'"),
        *[Difference(step=n, kind="request", path="request.x", recorded="1", replayed="2")
          for n in range(10)],
    ]  # fmt: skip
    monkeypatch.setattr(cli, "_replay", fake_replay(report(execution("summary", -1, *differences))))
    assert cli.main(["replay", SID]) == cli.EXIT_SESSION_FAILED
    out = capsys.readouterr().out
    assert "✗ executive summary · react-agent (react): 6 of 5 steps, completed → failed, 11" in out
    assert "    step 5 timeline[1].type: recorded 'final_analysis' → replayed 'llm_response'" in out
    assert "… and 3 more (--json shows all)" in out
    assert "11 difference(s) in 1 execution(s)" in out


def test_cli_replay_json_is_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = report(execution("agent", 0))
    monkeypatch.setattr(cli, "_replay", fake_replay(done))
    assert cli.main(["replay", SID, "--json"]) == cli.EXIT_OK
    assert ReplayReport.model_validate_json(capsys.readouterr().out) == done


@pytest.mark.parametrize(
    "error",
    [
        LookupError(f"no session {SID!r}"),
        LookupError(f"session {SID} is active; replay a finished session"),
        ConfigError("chain 'gone' is not configured"),
    ],
)
def test_cli_replay_errors_are_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception
) -> None:
    monkeypatch.setattr(cli, "_replay", fake_replay(error))
    assert cli.main(["replay", SID]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.strip() == f"tarsy: {error}"


def test_cli_replay_flags() -> None:
    parse = cli._parser().parse_args
    assert parse(["replay", SID]).model is None
    assert parse(["replay", SID, "--model"]).model == ""  # the configured model, live
    assert parse(["replay", SID, "--model", "gemini-2.5-pro"]).model == "gemini-2.5-pro"
    assert parse(["replay", SID, "--config", "c.yaml"]).config == "c.yaml"

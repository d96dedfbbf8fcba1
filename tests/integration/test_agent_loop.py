"""The agent loop's rules through the real step function, the fake Gemini and real MCP
servers: loop detection with tool_choice, ReAct's forced conclusion, summarization records,
and a parallel stage merged by synthesis-native-thinking (with code execution)."""

from __future__ import annotations

import json
from typing import Any

from tarsy.agent.strategies.react import FORCED_ANSWER_NOTE
from tarsy.models import ExecutionStatus
from tarsy.money import money_of
from tarsy.persistence.store import Store
from tarsy.tools.summarize import SUMMARY_SYSTEM
from tarsy_dev.client import SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import (
    FakeCall,
    FakeCodeExecution,
    FakeGemini,
    FakeReply,
    FakeToolCall,
)

from .test_investigations import ALERT, STEPS
from .timeline import model_records, model_timeline


def finish(client: TarsyClient, session_id: str) -> SessionView:
    *_, view = client.watch(session_id, poll_interval=0.25, timeout=120)
    return view


def agent_execution(view: SessionView, agent: str) -> dict[str, Any]:
    return next(e for e in view.executions if e["agent"] == agent)


def calls_of(fake: FakeGemini, agent: str) -> list[FakeCall]:
    return [c for c in fake.calls if agent in c.system_text()]


async def test_a_looping_model_is_warned_then_made_to_conclude(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    step = STEPS[0]

    def looping(call: FakeCall) -> FakeReply:
        if "looping-agent" not in call.system_text():
            return FakeReply(text="summary")
        if not call.function_names():  # the conclusion call offers no functions
            return FakeReply(text="The pods crash loop; the evidence stops here.")
        turn = len(call.model_parts())
        repeat = FakeToolCall(name=f"kubernetes__{step.tool}", args=step.arguments, id=f"t{turn}")
        return FakeReply(tool_calls=[repeat])

    fake_gemini.responder = looping
    session_id = client.submit({"alert_type": "test-loop", "data": ALERT["data"]}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    calls = calls_of(fake_gemini, "looping-agent")
    # Two calls run, the third is warned, the fourth is told to stop, the fifth concludes.
    assert len(calls) == 5
    for call in calls[:4]:  # the agent's tool_choice: required
        assert call.function_calling_config() == {"mode": "ANY"}
    conclusion = calls[4]
    assert conclusion.function_names() == [] and conclusion.function_calling_config() is None
    assert "repeating the same function calls" in conclusion.system_text()
    sent = json.dumps(calls[3].body)
    assert "already called 2 times" in sent  # the warning, as the third call's response
    assert "already called 3 times" not in sent

    execution = agent_execution(view, "looping-agent")
    tool_calls = [e for e in model_timeline(execution) if e["type"] == "llm_tool_call"]
    assert [e["metadata"].get("loop_detected", False) for e in tool_calls] == [
        False, False, True, True,
    ]  # fmt: skip
    assert [e["metadata"]["tool_name"] for e in tool_calls] == [step.tool] * 4
    assert all(e["metadata"]["server_name"] == "kubernetes" for e in tool_calls)
    assert [e["type"] for e in model_timeline(execution)].count("mcp_tool_call") == 2
    final = execution["timeline"][-1]
    assert final["type"] == "final_analysis"
    assert final["metadata"]["forced_conclusion"] == "loop_detected"
    assert view.session["final_analysis"] == "The pods crash loop; the evidence stops here."
    records = model_records(await store.list_mcp_interactions(execution["execution_id"]))
    assert [r.call_id for r in records] == ["t0", "t1"]  # the looping calls never ran
    interactions = await store.list_llm_interactions(execution["execution_id"])
    assert [i.request.get("tool_choice") for i in interactions] == ["required"] * 4 + ["none"]


async def test_react_action_in_the_conclusion_call_is_a_forced_final_answer(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    def react(call: FakeCall) -> FakeReply:
        if "react-concluder" not in call.system_text():
            return FakeReply(text="summary")
        step = STEPS[len(call.texts("model"))]  # a different tool each time: no loop
        return FakeReply(
            text=f"Thought: the {step.tool} output should tell.\nAction: kubernetes.{step.tool}\n"
            f"Action Input: {json.dumps(step.arguments)}"
        )

    fake_gemini.responder = react
    alert = {"alert_type": "test-react-conclusion", "data": ALERT["data"]}
    view = finish(client, client.submit(alert).session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    calls = calls_of(fake_gemini, "react-concluder")
    assert len(calls) == 3  # max_iterations 2, then the conclusion call
    assert "kubernetes.pods_list" in calls[0].system_text()
    conclusion = calls[2].system_text()
    assert "kubernetes.pods_list" not in conclusion and "Action Input" not in conclusion
    assert "no tool will run" in conclusion

    execution = agent_execution(view, "react-concluder")
    records = model_records(await store.list_mcp_interactions(execution["execution_id"]))
    assert [r.tool for r in records] == [STEPS[0].tool, STEPS[1].tool]  # the third never ran
    final = execution["timeline"][-1]
    assert final["type"] == "final_analysis"
    assert final["metadata"]["forced_conclusion"] == "max_iterations"
    assert final["metadata"]["ignored_tool_calls"] == [f"kubernetes.{STEPS[2].tool}"]
    analysis = view.session["final_analysis"]
    assert analysis.startswith(FORCED_ANSWER_NOTE)
    assert f"the {STEPS[2].tool} output should tell." in analysis
    assert "Action:" not in analysis


async def test_each_summary_has_its_own_record_and_a_failed_one_truncates(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    def model(call: FakeCall) -> FakeReply:
        system = call.system_text()
        if SUMMARY_SYSTEM in system:
            if "'megabytes': 2" in call.last_user_text():
                return FakeReply(status=400, error_message="summary refused")
            return FakeReply(text="1 MB of healthy logs", input_tokens=900, output_tokens=12)
        if "summarizing-agent" not in system:
            return FakeReply(text="summary")
        if not call.model_parts():
            return FakeReply(
                tool_calls=[
                    FakeToolCall(name="trouble__big", args={"megabytes": 1}, id="big-1"),
                    FakeToolCall(name="trouble__big", args={"megabytes": 2}, id="big-2"),
                ]
            )
        return FakeReply(text="The logs are healthy.")

    fake_gemini.responder = model
    alert = {"alert_type": "test-summaries", "data": "latency alert"}
    view = finish(client, client.submit(alert).session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    execution = agent_execution(view, "summarizing-agent")
    results = {
        e["metadata"]["call_id"]: e for e in execution["timeline"] if e["type"] == "mcp_tool_call"
    }
    assert results["big-1"]["metadata"]["shown_as"] == "summarized"
    assert "1 MB of healthy logs" in results["big-1"]["content"]
    assert results["big-2"]["metadata"]["shown_as"] == "truncated"
    assert results["big-2"]["content"].endswith(
        "[summarizing this result failed (400); it was truncated instead]"
    )
    [summary_event] = [e for e in execution["timeline"] if e["type"] == "mcp_tool_summary"]
    assert (summary_event["metadata"]["tool_name"], summary_event["metadata"]["server_name"]) == (
        "big",
        "trouble",
    )

    interactions = await store.list_llm_interactions(execution["execution_id"])
    assert [i.kind for i in interactions] == [
        "iteration",
        "tool_summary",
        "tool_summary",
        "iteration",
    ]
    ok, failed = interactions[1:3]
    assert (ok.tool_call_id, failed.tool_call_id) == ("big-1", "big-2")
    assert ok.step == failed.step == interactions[0].step
    assert ok.error is None and ok.response_text == "1 MB of healthy logs"
    assert (ok.tokens.input_tokens, ok.tokens.output_tokens) == (900, 12)
    assert ok.cost > 0 and ok.duration_ms > 0
    assert failed.error is not None and failed.error.code == "400"
    assert failed.tokens.total_tokens == 0
    # Session totals are the sums of every record, summaries included.
    assert view.session["tokens"]["total_tokens"] == sum(
        i.tokens.total_tokens for i in interactions
    )
    assert money_of(view.session["cost"]) == sum(i.cost for i in interactions)  # exact


async def test_a_parallel_stage_merged_by_synthesis_native_thinking(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    def model(call: FakeCall) -> FakeReply:
        system = call.system_text()
        if "thinking-synthesizer" in system:
            return FakeReply(
                thinking="Both agents blame the config map.",
                text="Merged: the config map lost DB_URL.",
                code_executions=[FakeCodeExecution(code="print(2 + 2)", output="4\n")],
                thought_signature=b"synthesis-signature",
                thinking_tokens=30,
            )
        agent = "logs-agent" if "logs-agent" in system else "metrics-agent"
        return FakeReply(text=f"finding of {agent}")

    fake_gemini.responder = model
    alert = {"alert_type": "test-thinking-synthesis", "data": "payments down"}
    view = finish(client, client.submit(alert).session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    assert view.session["final_analysis"] == "Merged: the config map lost DB_URL."

    [synthesis_call] = calls_of(fake_gemini, "thinking-synthesizer")
    thinking = synthesis_call.generation_config()["thinkingConfig"]
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
    prompt = synthesis_call.last_user_text()
    assert "finding of logs-agent" in prompt and "finding of metrics-agent" in prompt

    for agent in ("logs-agent", "metrics-agent"):  # single-call: the answer, once
        assert [e["type"] for e in agent_execution(view, agent)["timeline"]] == ["final_analysis"]
    synthesis = next(e for e in view.executions if e["role"] == "synthesis")
    assert synthesis["strategy"] == "synthesis-native-thinking"
    timeline = synthesis["timeline"]
    assert [e["type"] for e in timeline] == ["llm_thinking", "llm_response", "final_analysis"]
    assert timeline[0]["metadata"]["source"] == "native"
    assert timeline[0]["content"] == "Both agents blame the config map."
    assert timeline[1]["metadata"]["source"] == "code_execution"
    assert "print(2 + 2)" in timeline[1]["content"] and "4" in timeline[1]["content"]

    [record] = await store.list_llm_interactions(synthesis["execution_id"])
    assert record.thinking_text == "Both agents blame the config map."
    assert record.tokens.thinking_tokens == 30
    assert [(c.code, c.outcome, c.output) for c in record.code_executions] == [
        ("print(2 + 2)", "OUTCOME_OK", "4\n")
    ]


async def test_a_spent_token_budget_makes_the_next_call_conclude(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    step = STEPS[0]

    def model(call: FakeCall) -> FakeReply:
        if "budgeted-agent" not in call.system_text():
            return FakeReply(text="summary")
        if not call.function_names():
            return FakeReply(text="The payments pods crash loop.", input_tokens=5, output_tokens=5)
        # 110 tokens: past the chain's max_tokens (100) after this first step.
        call_it = FakeToolCall(name=f"kubernetes__{step.tool}", args=step.arguments, id="t0")
        return FakeReply(tool_calls=[call_it], input_tokens=80, output_tokens=30)

    fake_gemini.responder = model
    session_id = client.submit({"alert_type": "test-budget", "data": ALERT["data"]}).session_id
    view = finish(client, session_id)
    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")

    calls = calls_of(fake_gemini, "budgeted-agent")
    assert len(calls) == 2
    assert calls[0].function_names() and not calls[1].function_names()
    assert "budget is spent" in calls[1].system_text()
    assert view.session["final_analysis"] == (
        "_(Cut short: the session used 110 tokens of its 100-token budget.)_\n\n"
        "The payments pods crash loop."
    )
    execution = agent_execution(view, "budgeted-agent")
    assert execution["timeline"][-1]["metadata"]["forced_conclusion"] == "budget"
    assert view.session["tokens"]["total_tokens"] == 120
    assert view.session["completion_reason"] == "budget"
    interactions = await store.list_llm_interactions(execution["execution_id"])
    assert [i.request.get("tool_choice") for i in interactions] == ["auto", "none"]

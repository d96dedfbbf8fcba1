"""Budgets end to end: a two-stage chain with an executive summary, on the local stack.

The token budget and, separately, the cost budget are crossed in stage one;
stage two does not run and is named in the analysis, the executive summary
still runs, and the session completes with ``completion_reason: budget``.
The token case crosses at the end of stage one's only call; the cost case
crosses mid-agent (a tool call), so the agent is made to conclude first.
"""

from __future__ import annotations

from tarsy.models import ExecutionStatus
from tarsy.money import NANOS_PER_DOLLAR, money_of
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall

from .test_agent_loop import agent_execution, calls_of, finish
from .test_investigations import ALERT, STEPS

SUMMARY = "Executive summary: the payments pods crash loop on a bad ConfigMap."
# The summary's prompt quotes the chain's final analysis, budget note included.
SUMMARY_MARK = "The payments pods crash loop."


def summary_or(call: FakeCall) -> FakeReply | None:
    """The executive summary's answer, for the summary's calls only."""
    if "never-run-agent" in call.system_text():
        return FakeReply(status=400, error_message="stage two must not run")
    if "spending-agent" in call.system_text() or "pricey-agent" in call.system_text():
        return None
    return FakeReply(text=SUMMARY, input_tokens=3, output_tokens=3)


async def test_a_token_budget_spent_in_stage_one_skips_stage_two_and_still_summarizes(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    def model(call: FakeCall) -> FakeReply:
        other = summary_or(call)
        if other is not None:
            return other
        # 150 tokens: past the chain's max_tokens (100) with stage one's answer.
        return FakeReply(text="The payments pods crash loop.", input_tokens=120, output_tokens=30)

    fake_gemini.responder = model
    alert = {"alert_type": "test-budget-stages-tokens", "data": ALERT["data"]}
    view = finish(client, client.submit(alert).session_id)

    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    assert view.session["completion_reason"] == "budget"
    assert view.session["final_analysis"] == (
        "The payments pods crash loop.\n\n"
        "_(Budget spent: the session used 150 tokens of its 100-token budget; "
        "stages not run: deep-dive.)_"
    )
    assert view.session["executive_summary"] == SUMMARY
    assert [stage["name"] for stage in view.stages] == ["triage"]
    assert sorted(e["role"] for e in view.executions) == ["agent", "summary"]
    assert calls_of(fake_gemini, "never-run-agent") == []
    [summary_call] = [c for c in fake_gemini.calls if SUMMARY_MARK in c.last_user_text()]
    assert "stages not run: deep-dive" in summary_call.last_user_text()
    assert view.session["tokens"]["total_tokens"] == 156


async def test_a_cost_budget_spent_in_stage_one_skips_stage_two_and_still_summarizes(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    step = STEPS[0]

    def model(call: FakeCall) -> FakeReply:
        other = summary_or(call)
        if other is not None:
            return other
        if not call.function_names():  # the conclusion the spent budget forces
            return FakeReply(text="The payments pods crash loop.", input_tokens=5, output_tokens=5)
        # 110 tokens at $0.10 each (the "priced" model): $11, past max_cost_usd ($1).
        tool = FakeToolCall(name=f"kubernetes__{step.tool}", args=step.arguments, id="t0")
        return FakeReply(tool_calls=[tool], input_tokens=80, output_tokens=30)

    fake_gemini.responder = model
    alert = {"alert_type": "test-budget-stages-cost", "data": ALERT["data"]}
    view = finish(client, client.submit(alert).session_id)

    assert view.status is ExecutionStatus.COMPLETED, view.session.get("error")
    assert view.session["completion_reason"] == "budget"
    calls = calls_of(fake_gemini, "pricey-agent")
    assert len(calls) == 2 and calls[0].function_names() and not calls[1].function_names()
    assert "budget is spent" in calls[1].system_text()
    final = view.session["final_analysis"]
    assert final.startswith(
        "_(Cut short: the session spent $11.0000 of its $1 budget.)_\n\n"
        "The payments pods crash loop.\n\n_(Budget spent: the session spent $"
    )
    # The amount is the spend with stage one's last step.
    assert final.endswith("spent $12.0000 of its $1 budget; stages not run: deep-dive.)_")
    assert view.session["executive_summary"] == SUMMARY
    assert [stage["name"] for stage in view.stages] == ["triage"]
    agent = agent_execution(view, "pricey-agent")
    assert agent["timeline"][-1]["metadata"]["forced_conclusion"] == "budget"
    assert sorted(e["role"] for e in view.executions) == ["agent", "summary"]
    assert calls_of(fake_gemini, "never-run-agent") == []
    # $12 from the priced model, plus the summary's few tokens at gemini-2.5-flash's price.
    assert 12 * NANOS_PER_DOLLAR <= money_of(view.session["cost"]) < 12_001_000_000

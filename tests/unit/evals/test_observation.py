"""Reading a finished session (the api's view) into an observation."""

from __future__ import annotations

from typing import Any

from tarsy_dev.client import SessionView
from tarsy_dev.evals.observation import observe


def view(**session: Any) -> SessionView:
    base: dict[str, Any] = {
        "session_id": "s-1",
        "status": "completed",
        "final_analysis": "## Root cause\nX.",
        "executive_summary": "X broke.",
        "tokens": {"input_tokens": 1200, "output_tokens": 300, "thinking_tokens": 50},
        "cost": 0.0123,
        "created_at": "2026-11-23T10:00:00.000000+00:00",
        "completed_at": "2026-11-23T10:00:42.500000+00:00",
    }
    timeline = [
        {"type": "llm_thinking", "content": "hmm"},
        {
            "type": "mcp_tool_call",
            "metadata": {"tool_name": "pods_list", "arguments": {"namespace": "a"}},
        },
        {
            "type": "mcp_tool_call",
            "metadata": {"tool": "events_list", "arguments": {}, "is_error": True},
        },
    ]
    return SessionView(session={**base, **session}, stages=[], executions=[], timeline=timeline)


def test_observe_reads_outcome_tools_tokens_cost_and_latency() -> None:
    observation = observe(view(), scenario="oom-killed", model="standin", attempt=2)
    assert (observation.scenario, observation.model, observation.attempt) == (
        "oom-killed",
        "standin",
        2,
    )
    assert observation.session_id == "s-1"
    assert observation.status == "completed"
    assert observation.final_analysis == "## Root cause\nX."
    assert observation.executive_summary == "X broke."
    assert [(c.tool, c.arguments, c.is_error) for c in observation.tool_calls] == [
        ("pods_list", {"namespace": "a"}, False),
        ("events_list", {}, True),
    ]
    assert (observation.input_tokens, observation.output_tokens, observation.thinking_tokens) == (
        1200,
        300,
        50,
    )
    assert observation.cost == 0.0123
    assert observation.latency_s == 42.5


def test_observe_a_failed_unfinished_session() -> None:
    observation = observe(
        view(status="failed", completed_at=None, error={"message": "model quota"}),
        scenario="oom-killed",
        model="gemini-2.5-pro",
    )
    assert observation.status == "failed"
    assert observation.error == "model quota"
    assert observation.latency_s is None

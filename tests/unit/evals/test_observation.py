"""Reading a finished session (the api's view) into an observation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tarsy.models import ErrorInfo, LLMInteraction, TokenUsage
from tarsy_dev.client import SessionView
from tarsy_dev.evals.observation import first_model_call_s, observe, record_figures


def view(**session: Any) -> SessionView:
    base: dict[str, Any] = {
        "session_id": "s-1",
        "status": "completed",
        "final_analysis": "## Root cause\nX.",
        "executive_summary": "X broke.",
        "tokens": {"input_tokens": 1200, "output_tokens": 300, "thinking_tokens": 50},
        "cost": "0.0123",
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


def timeline_view(*events: dict[str, Any]) -> SessionView:
    session = {"session_id": "s-2", "status": "completed", "final_analysis": "It broke."}
    return SessionView(session=session, stages=[], executions=[], timeline=list(events))


def llm_response(**metadata: Any) -> dict[str, Any]:
    return {"type": "llm_response", "content": "{}", "metadata": metadata}


def mcp_call(content: str, *, error: bool = True, **metadata: Any) -> dict[str, Any]:
    return {
        "type": "mcp_tool_call",
        "content": content,
        "metadata": {"tool_name": "pods_get", "is_error": error, **metadata},
    }


def test_invalid_calls_are_broken_replies_and_calls_the_executor_could_not_make() -> None:
    observation = observe(
        timeline_view(
            llm_response(schema_error="the reply is not one JSON object"),
            llm_response(react_kind="malformed", error="no Action Input"),
            llm_response(react_kind="thought_only", error="neither"),
            mcp_call("Error calling k.pods_gett: unknown tool 'k.pods_gett'; available tools: x"),
            mcp_call("Error calling k.pods_get: invalid arguments for k.pods_get: name: required"),
            mcp_call("Error calling k.pods_get: arguments are not valid JSON: ..."),
            # Not invalid: a placeholder answer, a nudge, a cut reply, a tool that failed.
            llm_response(schema_error="the final answer is empty"),
            llm_response(nudge="unnamed_evidence", error="names nothing"),
            llm_response(cut_short="truncated", error="cut"),
            mcp_call('Error calling k.pods_get: pods "x" not found'),
            mcp_call("ok", error=False),
        ),
        scenario="oom-killed",
        model="local",
    )
    assert observation.invalid_calls == 6


def test_an_answer_without_tools_counts_the_models_own_calls_not_the_gathered_ones() -> None:
    gathered = mcp_call("pod yaml", error=False, gathered=True)
    asked = {"type": "llm_tool_call", "content": "k.pods_get {}", "metadata": {}}
    alone = observe(timeline_view(gathered), scenario="oom-killed", model="local")
    assert alone.model_tool_calls == 0 and alone.answered_without_tools
    helped = observe(timeline_view(gathered, asked), scenario="oom-killed", model="local")
    assert helped.model_tool_calls == 1 and not helped.answered_without_tools


def test_a_gathered_call_is_one_of_the_runs_calls_and_says_it_was_gathered() -> None:
    gathered = mcp_call("pod yaml", error=False, gathered=True)
    [call] = observe(timeline_view(gathered), scenario="oom-killed", model="local").tool_calls
    assert call.gathered and not call.is_error


def test_a_run_without_an_analysis_is_no_answer_without_tools() -> None:
    observation = observe(timeline_view(), scenario="oom-killed", model="local")
    unfinished = observation.model_copy(update={"final_analysis": ""})
    assert not unfinished.answered_without_tools


def interaction(
    step: int, ms: float, *, kind: str = "iteration", cut: bool = False
) -> LLMInteraction:
    error = ErrorInfo(message="cut", code="truncated", retryable=True) if cut else None
    return LLMInteraction(
        step=step, model="m", provider="p", request={}, duration_ms=ms, kind=kind, error=error
    )


def test_turns_cut_replies_and_time_inside_the_model_come_from_the_records() -> None:
    figures = record_figures(
        [
            interaction(1, 1500.0),
            interaction(2, 2500.0, cut=True),
            interaction(2, 500.0, kind="tool_summary"),  # a summary: time, not a turn
            interaction(3, 1000.0),
        ]
    )
    assert (figures.turns, figures.cut_replies, figures.model_s) == (3, 1, 5.5)


def test_the_first_model_call_starts_when_its_record_was_made_even_if_it_failed() -> None:
    began = datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)
    failed = interaction(2, 240_000.0).model_copy(
        update={
            "created_at": began,
            "error": ErrorInfo(message="no answer within 240s", code="timeout", retryable=True),
        }
    )
    retried = interaction(3, 90_000.0).model_copy(
        update={"created_at": began + timedelta(minutes=5)}
    )
    summary = interaction(3, 1_000.0, kind="tool_summary").model_copy(
        update={"created_at": began - timedelta(seconds=5)}
    )
    figures = record_figures([retried, summary, failed])
    assert figures.first_call_at == began
    session = {"created_at": "2026-01-01T12:00:00+00:00"}
    assert first_model_call_s(session, figures.first_call_at) == 10.0


def test_the_first_calls_prompt_and_the_servers_reading_time_come_from_the_records() -> None:
    began = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    first = interaction(2, 60_000.0).model_copy(
        update={
            "created_at": began,
            "tokens": TokenUsage(input_tokens=2100, output_tokens=250),
            "metadata": {"server_timings": {"prompt_n": 2100.0, "prompt_ms": 58_000.0}},
        }
    )
    summary = interaction(3, 9_000.0).model_copy(
        update={
            "created_at": began + timedelta(minutes=2),
            "tokens": TokenUsage(input_tokens=500, output_tokens=90),
            "metadata": {"server_timings": {"prompt_n": 500.0, "prompt_ms": 4_400.0}},
        }
    )
    figures = record_figures([summary, first])
    assert (figures.first_call_prompt_tokens, figures.prompt_read_s) == (2100, 62.4)
    hosted = record_figures([interaction(2, 900.0)])
    assert (hosted.first_call_prompt_tokens, hosted.prompt_read_s) == (None, None)


def test_detections_and_the_compact_path_are_read_from_the_timeline() -> None:
    events: list[dict[str, Any]] = [
        {"type": "detection", "content": "Pod a-0 was OOMKilled at its 64Mi limit."},
        {"type": "llm_response", "content": "x", "metadata": {"compact": "not_enough"}},
        {"type": "final_analysis", "content": "y", "metadata": {"compact": "follow_up"}},
    ]
    observation = observe(timeline_view(*events), scenario="s", model="m")
    assert observation.detections == ["Pod a-0 was OOMKilled at its 64Mi limit."]
    assert (observation.compact, observation.follow_up) == (True, True)
    answered = observe(
        timeline_view(
            {"type": "final_analysis", "content": "y", "metadata": {"compact": "answer"}}
        ),
        scenario="s",
        model="m",
    )
    assert (answered.compact, answered.follow_up) == (True, False)

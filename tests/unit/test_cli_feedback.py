"""``tarsy feedback``: giving a verdict on a session, and the summary of all given."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tarsy_dev import cli
from tests.unit.test_cli_list import page, row, sent_params
from tests.unit.test_client_cli import API, Recorder, clean_env, ok, serve

__all__ = ["clean_env", "serve"]  # fixtures, used by name

NOW = datetime.now(UTC)
RITA = "rita.responder@example.com"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "clock", lambda: NOW)


def feedback(
    verdict: str, cause: str | None = None, age: timedelta = timedelta(0)
) -> dict[str, Any]:
    return {"verdict": verdict, "root_cause": cause, "by": RITA, "at": (NOW - age).isoformat()}


def test_feedback_on_a_session_posts_the_verdict_and_the_cause(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    given = feedback("wrong", "the ConfigMap names the old database")
    recorder = serve(ok({"session_id": "s-1", "feedback": given}))
    argv = ["feedback", "s-1", "wrong", "--cause", "the ConfigMap names the old database",
            "--api-url", API]  # fmt: skip
    assert cli.main(argv) == cli.EXIT_OK
    [sent] = recorder.requests
    assert (sent.method, sent.url.path) == ("POST", "/sessions/s-1/feedback")
    assert json.loads(sent.content) == {
        "verdict": "wrong",
        "root_cause": "the ConfigMap names the old database",
    }
    err = capsys.readouterr().err
    assert "recorded on s-1: wrong; the real root cause: the ConfigMap names the old" in err


def test_feedback_on_a_session_without_a_verdict_is_a_usage_error(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok({}))
    assert cli.main(["feedback", "s-1", "--api-url", API]) == cli.EXIT_ERROR
    assert recorder.requests == []
    assert "right, partly_right or wrong" in capsys.readouterr().err


def test_the_summary_reads_every_page_of_sessions_with_feedback_and_counts_them(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    first = page(
        row("s-1", "completed", timedelta(hours=1), verdict="right", feedback=feedback("right")),
        row("s-2", "completed", timedelta(hours=2), verdict="wrong",
            feedback=feedback("wrong", "a full disk on node-3", timedelta(minutes=30))),
        next_cursor="c1",
    )  # fmt: skip
    second = page(
        row("s-3", "failed", timedelta(days=1), verdict="partly_right",
            feedback=feedback("partly_right", "also the quota", timedelta(hours=20))),
    )  # fmt: skip
    recorder = serve(ok(first), ok(second))
    assert cli.main(["feedback", "--since", "7d", "--api-url", API]) == cli.EXIT_OK
    params = [sent_params(r) for r in recorder.requests]
    assert [p["action"] for p in params] == [["feedback"], ["feedback"]]
    assert "cursor" not in params[0] and params[1]["cursor"] == ["c1"]
    assert datetime.fromisoformat(params[0]["since"][0]) == NOW - timedelta(days=7)
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert ["right", "1"] in lines and ["wrong", "1"] in lines and ["partly", "right", "1"] in lines
    assert ["all", "3"] in lines
    corrections = out[out.index("recent corrections") :]
    assert corrections.index("s-2") < corrections.index("s-3")  # newest first
    assert "a full disk on node-3" in corrections and "30m ago by " + RITA in corrections


def test_the_summary_stops_at_its_page_limit_and_says_so(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(page(row("s-1", "completed", timedelta(hours=1)), next_cursor="more")))
    assert cli.main(["feedback", "--pages", "2", "--api-url", API]) == cli.EXIT_OK
    assert len(recorder.requests) == 2
    out = capsys.readouterr().out
    assert "add --pages for more" in out and "no corrections yet" in out


def test_show_prints_the_feedback_given() -> None:
    session = {"feedback": feedback("wrong", "a ConfigMap")}
    assert (
        cli.feedback_line(session)
        == f"feedback: wrong (by {RITA}); the real root cause: a ConfigMap"
    )
    assert cli.feedback_line({}) is None


def test_the_list_sends_the_verdict_filter(serve: Callable[..., Recorder]) -> None:
    recorder = serve(ok(page()))
    assert cli.main(["list", "--verdict", "wrong", "--api-url", API]) == cli.EXIT_OK
    assert sent_params(recorder.requests[0])["verdict"] == ["wrong"]


def test_a_refused_feedback_says_why(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = {"error": {"status": 403, "message": "feedback needs the responder role"}}
    serve(httpx.Response(403, json=refusal))
    assert cli.main(["feedback", "s-1", "right", "--api-url", API]) == cli.EXIT_ERROR
    assert "feedback needs the responder role" in capsys.readouterr().err


def test_show_names_the_earlier_sessions_recalled_and_their_verdicts() -> None:
    recalled = [
        {"session_id": "s-0", "alert_type": "x", "status": "completed",
         "created_at": NOW.isoformat(), "matched_by": "workload", "feedback": feedback("wrong")},
        {"session_id": "s-9", "alert_type": "x", "status": "completed",
         "created_at": NOW.isoformat(), "matched_by": "fingerprint"},
    ]  # fmt: skip
    assert cli.recalled_line({"recalled": recalled}) == (
        "recalls (history to verify): s-0 (wrong), s-9"
    )
    assert cli.recalled_line({}) is None

"""``tarsy`` piped or redirected: every line whole, ids never cut (issue 23, item 7).

Rich gives a console that is not a terminal 80 columns; panels and tables then
cut the analysis and the session ids. Here stdout is pytest's capture (not a
terminal) and ``COLUMNS`` is unset, as in ``tarsy show ID > file``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from tarsy.persistence.session_list import SessionPage
from tarsy_dev import cli
from tests.unit.test_client_cli import API, SID, Recorder, event, ok, serve, view

__all__ = ["serve"]  # the fixture, imported for these tests

LONG_LINE = "Root cause: the ConfigMap payments-config was edited at 07:54:41 " + (
    "(managed by kubectl-edit, replacing DATABASE_URL with a host that does not resolve) " * 4
)
SUMMARY = "\n".join(f"Summary line {n}: " + "word " * 30 for n in range(1, 6))
LONG_ID = "5f0c6d5e-93a2-4b1f-9d7e-1a2b3c4d5e6f-with-a-longer-suffix-than-usual"


@pytest.fixture(autouse=True)
def no_columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    # Away from the checkout: a running `make up` leaves its .local/stack.env there,
    # whose URLs the CLI would read.
    monkeypatch.chdir(tmp_path)


def finished_view() -> dict[str, Any]:
    events = [
        event("llm_response", LONG_LINE, "2025-01-01T00:00:01Z"),
        event("final_analysis", f"## Cause\n\n{LONG_LINE}", "2025-01-01T00:00:02Z"),
        {**event("executive_summary", SUMMARY, "2025-01-01T00:00:03Z"), "stage": -1},
    ]
    return view("completed", events, final_analysis=f"## Cause\n\n{LONG_LINE}")


def test_piped_show_prints_the_analysis_and_the_summary_whole(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(finished_view()))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.count(LONG_LINE.strip()) == 2  # the response, and the analysis
    for line in SUMMARY.splitlines():
        assert line.strip() in out
    assert "│" not in out  # no panel: a panel would wrap the text at its border
    assert f"page {API}/ui/sessions/{SID}" in out


def test_piped_watch_prints_every_event_whole(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view("active", [])), ok(finished_view()))
    assert cli.main(["--api-url", API, "watch", SID, "--interval", "0"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.count(LONG_LINE.strip()) == 2
    assert all(line.strip() in out for line in SUMMARY.splitlines())


def test_piped_list_never_cuts_a_session_id(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    row = {
        "session_id": LONG_ID,
        "alert_type": "KubernetesPodCrashLoopingWithAVeryLongAlertTypeName",
        "status": "completed",
        "created_at": "2025-01-01T00:00:00Z",
        "completed_at": "2025-01-01T00:01:00Z",
        "cost": "0.0123",
        "score": 81,
    }
    serve(ok({"sessions": [row], "next_cursor": None}))
    assert cli.main(["--api-url", API, "list"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert LONG_ID in out
    assert "KubernetesPodCrashLoopingWithAVeryLongAlertTypeName" in out


def test_on_an_80_column_terminal_the_list_folds_other_columns_not_the_id() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    page = SessionPage.model_validate(
        {"sessions": [{"session_id": SID, "alert_type": "KubernetesPodCrashLoopingInProduction",
                       "status": "failed", "created_at": "2025-01-01T00:00:00Z"}]}
    )  # fmt: skip
    cli.print_sessions(console, page, cli.clock())
    assert SID in buffer.getvalue()


def test_on_a_terminal_the_analysis_wraps_to_its_width_in_a_panel() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=70, force_terminal=True, color_system=None)
    cli.print_event(console, event("final_analysis", LONG_LINE, "t"))
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= 70 for line in lines)
    assert "│" in buffer.getvalue()
    words = " ".join(line.strip("│ ") for line in lines[2:])
    assert "does not resolve" in words


def test_ctrl_c_on_a_watch_says_that_the_session_goes_on(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(request: httpx.Request) -> httpx.Response:
        raise KeyboardInterrupt

    serve(ok(view("active", [])), interrupted)
    assert cli.main(["--api-url", API, "watch", SID, "--interval", "0"]) == cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert f"session {SID} goes on" in err
    assert f"tarsy watch {SID}" in err and f"tarsy cancel {SID}" in err


def test_an_unavailable_mcp_server_is_reported_once(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    unavailable = {"unavailable_servers": {"my-tools": "ConnectError: connection refused"}}
    events = [
        {**event("llm_thinking", "first", "2025-01-01T00:00:01Z"), "metadata": unavailable},
        {**event("llm_thinking", "second", "2025-01-01T00:00:02Z"), "metadata": unavailable},
    ]
    serve(ok(view("completed", events)))
    cli.main(["--api-url", API, "show", SID])
    out = capsys.readouterr().out
    assert out.count("MCP server my-tools is unavailable: ConnectError: connection refused") == 1


def test_a_missing_api_url_suggests_make_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["show", SID]) == cli.EXIT_ERROR
    assert "run `make up`" in capsys.readouterr().err


def test_submit_prints_the_session_page(
    serve: Callable[..., Recorder], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    alert = tmp_path / "a.json"
    alert.write_text('{"alert_type": "DiskFull", "data": "disk 97%"}')
    serve(ok({"session_id": SID, "status_url": f"{API}/sessions/{SID}"}, 202))
    argv = ["--ingest-url", API, "--api-url", API, "submit", str(alert)]
    assert cli.main(argv) == cli.EXIT_OK
    assert f"page:   {API}/ui/sessions/{SID}" in capsys.readouterr().err


def test_a_stand_in_session_says_not_scored_rather_than_failed() -> None:
    lines = cli.score_lines({"score": None, "score_error": "not scored (stand-in model)"})
    assert lines == ["score: not scored (stand-in model)"]

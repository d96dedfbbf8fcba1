"""The ``tarsy`` command's rough edges: bad input, flag placement, closed pipes, rendering."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from tarsy_dev import cli
from tarsy_dev.client import TarsyClient
from tests.unit.test_client_cli import API, INGEST, SID, SUBMITTED, Recorder, event, ok, view

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TARSY_INGEST_URL", "TARSY_API_URL", "TARSY_API_KEY", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Recorder]]:
    def install(*responses: httpx.Response) -> Recorder:
        recorder = Recorder(*responses)
        monkeypatch.setattr(
            cli, "TarsyClient", functools.partial(TarsyClient, transport=recorder.transport)
        )
        return recorder

    yield install


@pytest.fixture
def alert_file(tmp_path: Path) -> Path:
    path = tmp_path / "alert.json"
    path.write_text(json.dumps({"alert_type": "PodCrashLooping", "data": "pod api-0"}))
    return path


def one_line_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ─── bad input is a usage error (2), in one line ─────────────────────────────


@pytest.mark.parametrize(
    ("name", "expected"),
    [("missing.json", "missing.json: no such file"), (".", ".: is a directory")],
)
def test_submit_unreadable_file_is_a_usage_error(
    serve: Callable[..., Recorder],
    name: str,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = serve(ok(SUBMITTED, 202))
    assert cli.main(["--ingest-url", INGEST, "submit", name]) == cli.EXIT_ERROR
    assert cli.EXIT_ERROR != cli.EXIT_SESSION_FAILED
    assert one_line_error(capsys.readouterr().err).startswith(f"tarsy: {expected}")
    assert recorder.requests == []


@pytest.mark.parametrize("stdin", [b"", b"  \n"])
def test_empty_stdin_says_no_alert(
    serve: Callable[..., Recorder],
    stdin: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = serve(ok(SUBMITTED, 202))

    class Stdin:
        buffer = io.BytesIO(stdin)

    monkeypatch.setattr("sys.stdin", Stdin)
    assert cli.main(["--ingest-url", INGEST, "submit", "-"]) == cli.EXIT_ERROR
    assert one_line_error(capsys.readouterr().err) == "tarsy: no alert on stdin"
    assert recorder.requests == []


def test_empty_file_says_so(
    serve: Callable[..., Recorder], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(SUBMITTED, 202))
    (tmp_path / "empty.json").write_bytes(b"")
    assert cli.main(["--ingest-url", INGEST, "submit", "empty.json"]) == cli.EXIT_ERROR
    assert "empty.json: empty" in capsys.readouterr().err


# ─── connection flags ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "argv",
    [
        ["show", SID, "--api-url", API, "--api-key", "after"],
        ["show", "--api-key", "after", "--api-url", API, SID],
        ["--api-url", API, "show", SID, "--api-key", "after"],
        ["--api-url", "http://before.test", "--api-key", "before", "show", SID,
         "--api-url", API, "--api-key", "after"],
    ],
)  # fmt: skip
def test_connection_flags_after_the_subcommand(
    serve: Callable[..., Recorder], argv: list[str]
) -> None:
    recorder = serve(ok(view()))
    assert cli.main(argv) == cli.EXIT_OK
    [request] = recorder.requests
    assert str(request.url) == f"{API}/sessions/{SID}"
    assert request.headers["authorization"] == "Bearer after"


def test_flags_before_the_subcommand_survive_the_subparser(
    serve: Callable[..., Recorder], alert_file: Path
) -> None:
    """The subparser's copy of a flag must not reset the value given before the subcommand."""
    recorder = serve(ok(SUBMITTED, 202))
    argv = ["--ingest-url", INGEST, "--api-key", "before", "submit", str(alert_file)]
    assert cli.main(argv) == cli.EXIT_OK
    assert recorder.requests[0].headers["authorization"] == "Bearer before"


@pytest.mark.parametrize(
    "argv",
    [["submit", "x.json", "--watch"], ["watch", SID], ["cancel", SID], ["chat", SID, "q"],
     ["resume", SID], ["show", SID]],
)  # fmt: skip
def test_every_subcommand_takes_the_connection_flags(argv: list[str]) -> None:
    flags = ["--ingest-url", "i", "--api-url", "a", "--api-key", "k"]
    args = cli._parser().parse_args([*argv, *flags])
    assert (args.ingest_url, args.api_url, args.api_key) == ("i", "a", "k")


@pytest.mark.parametrize("flag", ["--api-key", "--api-url", "--ingest-url"])
@pytest.mark.parametrize("after", [False, True])
def test_an_empty_flag_is_an_error_not_a_fallback(
    serve: Callable[..., Recorder],
    tmp_path: Path,
    flag: str,
    after: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "stack.env").write_text(
        "TARSY_API_URL=http://stack-api\nTARSY_INGEST_URL=http://stack-ingest\n"
        "TARSY_API_KEY=stack-key\n"
    )
    recorder = serve(ok(view()))
    argv = ["show", SID, flag, ""] if after else [flag, "", "show", SID]
    assert cli.main(argv) == cli.EXIT_ERROR
    assert one_line_error(capsys.readouterr().err).startswith(f"tarsy: {flag} is empty")
    assert recorder.requests == []


# ─── errors do not wrap ──────────────────────────────────────────────────────


def test_error_lines_do_not_wrap(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    message = "invalid API key: " + " ".join(f"word{i}" for i in range(40))
    serve(ok({"error": {"status": 401, "message": message}}, 401))
    assert "COLUMNS" not in os.environ  # rich would use 80 columns
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_ERROR
    assert one_line_error(capsys.readouterr().err) == f"tarsy: HTTP 401: {message}"


def test_piped_output_lines_do_not_wrap(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    long = "the pod restarted because " + "x" * 200
    serve(ok(view("completed", [event("llm_response", long, "t")])))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("chain default  status completed")
    assert long in lines


def test_session_error_line_does_not_wrap_and_is_not_markup(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    message = "tool [/data] failed: " + "x" * 150
    serve(ok(view("failed", error={"message": message})))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_SESSION_FAILED
    assert f"error: {message}\n" in capsys.readouterr().out


# ─── a closed stdout (`tarsy show ID | head -1`) ─────────────────────────────


@contextlib.contextmanager
def closed_stdout() -> Iterator[None]:
    """sys.stdout is a pipe whose reader has gone, as after `| head -1` read its line.

    Entered in the test body: capsys installs its own sys.stdout when the call starts.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    saved = sys.stdout
    with open(write_end, "w") as stream:
        sys.stdout = stream
        try:
            yield
        finally:
            sys.stdout = saved


@pytest.mark.parametrize("argv", [["show", SID], ["show", SID, "--json"]])
def test_closed_stdout_exits_0_quietly(
    serve: Callable[..., Recorder], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view("completed", [event("llm_response", "line\n" * 50, "t")])))
    with closed_stdout():
        assert cli.main(["--api-url", API, *argv]) == cli.EXIT_OK
    assert capsys.readouterr().err == ""


def test_closed_stdout_after_submit_exits_0(
    serve: Callable[..., Recorder], alert_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(SUBMITTED, 202))
    with closed_stdout():
        assert cli.main(["--ingest-url", INGEST, "submit", str(alert_file)]) == cli.EXIT_OK
    assert "Traceback" not in capsys.readouterr().err


SHOW_WITH_A_MOCK_API = """
import functools, json, sys
import httpx
from tarsy_dev import cli
from tarsy_dev.client import TarsyClient
body = json.loads(sys.argv[1])
answer = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
cli.TarsyClient = functools.partial(TarsyClient, transport=answer)
sys.exit(cli.main(["--api-url", "http://api.test", "show", sys.argv[2]]))
"""


def test_closed_stdout_in_a_real_process_is_quiet_to_the_end() -> None:
    """Also the flush at interpreter exit: no "Exception ignored ... BrokenPipeError", exit 0."""
    body = view("completed", [event("llm_response", "line\n" * 500, "t")])
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-c", SHOW_WITH_A_MOCK_API, json.dumps(body), SID],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")


# ─── rendering ───────────────────────────────────────────────────────────────


def render(data: dict[str, object]) -> str:
    buffer = io.StringIO()
    cli.print_event(Console(file=buffer, width=200, force_terminal=True, color_system=None), data)
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["final_analysis", "executive_summary"])
def test_analysis_keeps_angle_bracket_text(kind: str) -> None:
    content = (
        "The alert between <<<BEGIN ALERT DATA>>> and <<<END ALERT DATA>>> names "
        "<pod-name>; **bold** stays Markdown.\n\n<div>not html</div>"
    )
    out = render(event(kind, content, "t"))
    assert "<<<BEGIN ALERT DATA>>>" in out
    assert "<<<END ALERT DATA>>>" in out
    assert "<pod-name>" in out
    assert "<div>not html</div>" in out
    assert "**bold**" not in out


def test_final_analysis_from_the_session_keeps_angle_bracket_text(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view("completed", final_analysis="seen <<<BEGIN ALERT DATA>>>")))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    assert "seen <<<BEGIN ALERT DATA>>>" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("stage", "label"),
    [(0, "stage 0 · investigator"), (3, "stage 3 · investigator"),
     (-1, "executive summary · investigator"), (-2, "chat · investigator")],
)  # fmt: skip
def test_stage_labels(stage: int, label: str) -> None:
    out = render({**event("executive_summary", "s", "t"), "stage": stage})
    assert label in out
    assert "stage -" not in out


def test_stage_labels_match_the_chain_sentinels() -> None:
    from tarsy.engine.messages import CHAT_STAGE, SCORING_STAGE, SUMMARY_STAGE

    assert cli.STAGE_LABELS == {
        SUMMARY_STAGE: "executive summary",
        CHAT_STAGE: "chat",
        SCORING_STAGE: "scoring",
    }
    assert cli.CHAT_STAGE == CHAT_STAGE


def test_show_labels_the_executive_summary(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    summary = {**event("executive_summary", "short summary", "t2", "sum"), "stage": -1}
    body = view("completed", [event("final_analysis", "analysis", "t1")])
    body["executions"].append({"execution_id": "sum", "timeline": [summary]})
    serve(ok(body))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "executive summary · investigator" in out
    assert "stage -1" not in out


def test_the_cli_docs_exit_code_table_matches_the_cli() -> None:
    readme = (ROOT / "docs" / "cli.md").read_text()
    section = readme.split("## The `tarsy` CLI", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "|---" not in line]
    codes = {row.split("|")[1].strip() for row in rows} - {"exit"}
    expected = {cli.EXIT_OK, cli.EXIT_SESSION_FAILED, cli.EXIT_ERROR, cli.EXIT_INTERRUPTED}
    assert codes == {str(code) for code in expected}
    usage_row = next(row for row in rows if row.startswith(f"| {cli.EXIT_ERROR} |"))
    assert "usage error" in usage_row


def test_score_lines_show_the_verdict_or_why_there_is_none() -> None:
    from tarsy_dev.cli import score_lines

    report = {
        "categories": {"logical_flow": {"score": 80, "reason": "started from the alert"}},
        "missing_tools": [{"name": "kubernetes.configmaps_get"}],
    }
    assert score_lines({"score": 82, "score_report": report}) == [
        "score: 82/100",
        "  logical_flow: 80 - started from the alert",
        "  missing tools: kubernetes.configmaps_get",
    ]
    assert score_lines({"score": None, "score_error": "judge failed"}) == [
        "score: none (judge failed)"
    ]
    assert score_lines({"score": None}) == []

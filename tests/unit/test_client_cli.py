"""The HTTP client and the ``tarsy`` command, against an httpx MockTransport."""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from tarsy.errors import ApiError
from tarsy.models import ExecutionStatus
from tarsy_dev import cli
from tarsy_dev.client import SessionView, Submitted, TarsyClient

INGEST = "http://ingest.test"
API = "http://api.test"
SID = "3f2a7c1e-0000-4000-8000-000000000001"

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers from a queue or a function."""

    def __init__(self, *responses: httpx.Response | Handler) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        return answer(request) if callable(answer) else answer

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def event(kind: str, content: str, at: str, execution_id: str = "e0") -> dict[str, Any]:
    return {
        "type": kind,
        "content": content,
        "created_at": at,
        "execution_id": execution_id,
        "stage": 0,
        "agent": "investigator",
        "metadata": {},
    }


def view(
    status: str = "completed",
    events: list[dict[str, Any]] | None = None,
    *,
    final_analysis: str | None = None,
    error: dict[str, Any] | None = None,
    stage: int | None = 0,
) -> dict[str, Any]:
    events = events or []
    return {
        "session": {
            "session_id": SID,
            "alert_type": "PodCrashLooping",
            "chain_id": "default",
            "status": status,
            "current_stage": stage,
            "final_analysis": final_analysis,
            "error": error,
            "tokens": {"input_tokens": 11, "output_tokens": 22, "thinking_tokens": 3},
        },
        "stages": [],
        "executions": [{"execution_id": "e0", "timeline": events}],
        "timeline": events,
    }


def ok(body: dict[str, Any], status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def client(recorder: Recorder, *, api_key: str | None = "k") -> TarsyClient:
    return TarsyClient(
        ingest_url=INGEST + "/", api_url=API + "/", api_key=api_key, transport=recorder.transport
    )


# ─── client ──────────────────────────────────────────────────────────────────


def test_submit_dict() -> None:
    recorder = Recorder(ok({"session_id": SID, "status_url": f"{API}/sessions/{SID}"}, 202))
    with client(recorder) as c:
        submitted = c.submit({"alert_type": "t", "data": "d"})
    assert submitted == Submitted(session_id=SID, status_url=f"{API}/sessions/{SID}")
    [sent] = recorder.requests
    assert sent.method == "POST"
    assert str(sent.url) == f"{INGEST}/alerts"
    assert sent.headers["authorization"] == "Bearer k"
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"alert_type": "t", "data": "d"}


def test_submit_bytes_are_sent_unchanged() -> None:
    raw = b'{"alert_type":"t",  "data":"d"}'
    recorder = Recorder(ok({"session_id": SID, "status_url": "u"}, 202))
    with client(recorder) as c:
        c.submit(raw)
    assert recorder.requests[0].content == raw
    assert recorder.requests[0].headers["content-type"] == "application/json"


def test_no_api_key_no_authorization_header() -> None:
    recorder = Recorder(ok(view()))
    with client(recorder, api_key=None) as c:
        c.session(SID)
    assert "authorization" not in recorder.requests[0].headers


@pytest.mark.parametrize("status", [200, 201, 400, 401, 500])
def test_submit_needs_202(status: int) -> None:
    recorder = Recorder(ok({"session_id": SID, "status_url": "u"}, status))
    with client(recorder) as c, pytest.raises(ApiError) as failure:
        c.submit({"alert_type": "t", "data": "d"})
    assert failure.value.status == status


def test_error_message_lists_field_details() -> None:
    body = {
        "error": {
            "status": 422,
            "message": "alert does not match the schema",
            "details": [
                {"field": "data", "message": "must not be empty", "type": "value_error"},
                {"field": "alert_type", "message": "too long", "type": "x"},
            ],
        }
    }
    recorder = Recorder(ok(body, 422))
    with client(recorder) as c, pytest.raises(ApiError) as failure:
        c.submit({"alert_type": "t", "data": ""})
    assert str(failure.value) == (
        "HTTP 422: alert does not match the schema (data: must not be empty; alert_type: too long)"
    )
    assert failure.value.status == 422
    assert json.loads(str(failure.value.body)) == body


def test_error_message_without_details() -> None:
    recorder = Recorder(ok({"error": {"status": 404, "message": "no session 'x'"}}, 404))
    with client(recorder) as c, pytest.raises(ApiError, match=r"^HTTP 404: no session 'x'$"):
        c.session("x")


def test_error_message_from_non_json_body() -> None:
    recorder = Recorder(httpx.Response(502, text="<html>Bad Gateway</html>" + "x" * 500))
    with client(recorder) as c, pytest.raises(ApiError) as failure:
        c.session(SID)
    message = str(failure.value)
    assert message.startswith("HTTP 502: <html>Bad Gateway</html>")
    assert len(message) == len("HTTP 502: ") + 300


@pytest.mark.parametrize("body", [{"error": "Not Found"}, ["x"], "oops"])
def test_unexpected_json_error_body_is_an_api_error(body: object) -> None:
    recorder = Recorder(httpx.Response(503, json=body))
    with client(recorder) as c, pytest.raises(ApiError) as failure:
        c.session(SID)
    assert failure.value.status == 503


def test_transport_error_is_an_api_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    recorder = Recorder(refuse)
    with client(recorder) as c:
        with pytest.raises(ApiError, match=f"cannot reach ingest at {INGEST}/alerts"):
            c.submit({"alert_type": "t", "data": "d"})
        assert len(recorder.requests) == 1, "a POST is never re-sent"
        with pytest.raises(ApiError, match=f"cannot reach api at {API}/sessions/{SID}"):
            c.session(SID)
        assert len(recorder.requests) == 1 + 3, "a GET is tried three times"


def test_get_survives_a_connection_the_server_closed() -> None:
    """gunicorn drops idle keep-alive connections after 2 s; the next GET may land on one."""

    def closed(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    recorder = Recorder(closed, ok(view("active")))
    with client(recorder) as c:
        assert c.session(SID).status is ExecutionStatus.ACTIVE
    assert len(recorder.requests) == 2


def test_post_is_not_retried_on_a_closed_connection() -> None:
    def closed(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    recorder = Recorder(closed, ok({"ok": True}))
    with client(recorder) as c, pytest.raises(ApiError, match="cannot reach api"):
        c.cancel(SID)
    assert len(recorder.requests) == 1


def test_missing_urls() -> None:
    c = TarsyClient(ingest_url=None, api_url="", api_key=None)
    with c, pytest.raises(ApiError, match="no ingest URL"):
        c.submit({})
    with pytest.raises(ApiError, match="no api URL"):
        c.session(SID)


def test_session_view() -> None:
    recorder = Recorder(ok(view("active")))
    with client(recorder) as c:
        current = c.session(SID)
    assert str(recorder.requests[0].url) == f"{API}/sessions/{SID}"
    assert recorder.requests[0].method == "GET"
    assert current.status is ExecutionStatus.ACTIVE
    assert current.is_finished is False


@pytest.mark.parametrize(
    ("status", "finished"),
    [("pending", False), ("active", False), ("paused", True), ("completed", True),
     ("failed", True), ("cancelled", True), ("timed_out", True)],
)  # fmt: skip
def test_session_view_is_finished(status: str, finished: bool) -> None:
    assert SessionView.model_validate(view(status)).is_finished is finished


def test_watch_polls_until_terminal() -> None:
    recorder = Recorder(ok(view("pending")), ok(view("active")), ok(view("completed")))
    sleeps: list[float] = []
    with client(recorder) as c:
        views = list(c.watch(SID, poll_interval=0.25, sleep=sleeps.append))
    assert [v.status.value for v in views] == ["pending", "active", "completed"]
    assert sleeps == [0.25, 0.25]
    assert len(recorder.requests) == 3


def test_watch_times_out() -> None:
    recorder = Recorder(ok(view("active")))
    with client(recorder) as c:
        polls = c.watch(SID, timeout=0.0, sleep=lambda _: None)
        assert next(polls).status is ExecutionStatus.ACTIVE
        with pytest.raises(ApiError, match=f"session {SID} still active after 0s"):
            next(polls)


# ─── CLI ─────────────────────────────────────────────────────────────────────


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TARSY_INGEST_URL", "TARSY_API_URL", "TARSY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at 80 columns when not on a terminal
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Recorder]]:
    """Route the CLI's client through a Recorder; the CLI still resolves URLs and key itself."""

    def install(*responses: httpx.Response | Handler) -> Recorder:
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


SUBMITTED = {"session_id": SID, "status_url": f"{API}/sessions/{SID}"}


def test_submit_prints_session_id(
    serve: Callable[..., Recorder], alert_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(SUBMITTED, 202))
    code = cli.main(["--ingest-url", INGEST, "--api-key", "flag-key", "submit", str(alert_file)])
    assert code == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert out.strip() == SID
    assert f"status: {API}/sessions/{SID}" in err
    [sent] = recorder.requests
    assert str(sent.url) == f"{INGEST}/alerts"
    assert sent.headers["authorization"] == "Bearer flag-key"
    assert sent.content == alert_file.read_bytes()


def test_submit_from_stdin(serve: Callable[..., Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = serve(ok(SUBMITTED, 202))
    raw = b'{"alert_type": "t", "data": "from stdin"}'

    class Stdin:
        buffer = io.BytesIO(raw)

    monkeypatch.setattr("sys.stdin", Stdin)
    assert cli.main(["--ingest-url", INGEST, "submit", "-"]) == cli.EXIT_OK
    assert recorder.requests[0].content == raw


def test_urls_and_key_from_environment(
    serve: Callable[..., Recorder], alert_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TARSY_INGEST_URL", "http://env-ingest")
    monkeypatch.setenv("TARSY_API_KEY", "env-key")
    recorder = serve(ok(SUBMITTED, 202))
    assert cli.main(["submit", str(alert_file)]) == cli.EXIT_OK
    assert str(recorder.requests[0].url) == "http://env-ingest/alerts"
    assert recorder.requests[0].headers["authorization"] == "Bearer env-key"


def test_urls_and_key_from_local_stack_env(
    serve: Callable[..., Recorder], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "stack.env").write_text(
        "TARSY_API_URL=http://stack-api:8082\nTARSY_API_KEY=stack-key\n"
    )
    recorder = serve(ok(view("completed")))
    assert cli.main(["show", SID, "--json"]) == cli.EXIT_OK
    assert str(recorder.requests[0].url) == f"http://stack-api:8082/sessions/{SID}"
    assert recorder.requests[0].headers["authorization"] == "Bearer stack-key"
    assert json.loads(capsys.readouterr().out)["session"]["session_id"] == SID


def test_flags_beat_environment(
    serve: Callable[..., Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TARSY_API_URL", "http://env-api")
    monkeypatch.setenv("TARSY_API_KEY", "env-key")
    recorder = serve(ok(view()))
    assert cli.main(["--api-url", API, "--api-key", "flag", "show", SID]) == cli.EXIT_OK
    assert str(recorder.requests[0].url) == f"{API}/sessions/{SID}"
    assert recorder.requests[0].headers["authorization"] == "Bearer flag"


def test_submit_rejects_non_json_file(
    serve: Callable[..., Recorder], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(SUBMITTED, 202))
    path = tmp_path / "alert.txt"
    path.write_text("not json")
    assert cli.main(["--ingest-url", INGEST, "submit", str(path)]) == cli.EXIT_ERROR
    assert "not JSON" in capsys.readouterr().err
    assert recorder.requests == []


def test_submit_http_error_is_exit_2(
    serve: Callable[..., Recorder], alert_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok({"error": {"status": 401, "message": "invalid API key"}}, 401))
    assert cli.main(["--ingest-url", INGEST, "submit", str(alert_file)]) == cli.EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    assert "tarsy: HTTP 401: invalid API key" in err


def test_missing_url_is_exit_2(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view()))
    assert cli.main(["show", SID]) == cli.EXIT_ERROR
    assert "no api URL" in capsys.readouterr().err


def test_submit_and_watch(
    serve: Callable[..., Recorder], alert_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = view(
        "completed",
        [event("final_analysis", "Root cause: bad config map.", "2025-01-01T00:00:02Z")],
    )
    recorder = serve(ok(SUBMITTED, 202), ok(done))
    argv = ["--ingest-url", INGEST, "--api-url", API, "submit", str(alert_file), "--watch"]
    assert cli.main(argv) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0] == SID
    assert "Root cause: bad config map." in out
    assert f"session {SID} completed" in out
    assert [r.method for r in recorder.requests] == ["POST", "GET"]


def test_watch_prints_each_event_once_in_time_order(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    first = [event("llm_thinking", "thinking-one", "2025-01-01T00:00:01Z")]
    second = [
        *first,
        event("llm_tool_call", "tool-two", "2025-01-01T00:00:02Z"),
        event("final_analysis", "final-three", "2025-01-01T00:00:03Z"),
    ]
    serve(ok(view("active", first)), ok(view("active", first)), ok(view("completed", second)))
    argv = ["--api-url", API, "watch", SID, "--interval", "0"]
    assert cli.main(argv) == cli.EXIT_OK
    out = capsys.readouterr().out
    for text in ("thinking-one", "tool-two", "final-three"):
        assert out.count(text) == 1, text
    assert out.index("thinking-one") < out.index("tool-two") < out.index("final-three")
    assert "stage 0 · investigator" in out
    assert "tokens in/out/thinking: 11/22/3" in out


@pytest.mark.parametrize("status", ["failed", "cancelled", "timed_out"])
def test_watch_bad_ending_is_exit_1(
    serve: Callable[..., Recorder], status: str, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view(status, error={"message": "model quota exhausted"})))
    assert cli.main(["--api-url", API, "watch", SID]) == cli.EXIT_SESSION_FAILED
    out = capsys.readouterr().out
    assert f"session {SID} {status}" in out
    assert "error: model quota exhausted" in out


def test_watch_timeout_is_exit_2(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(view("active")))
    argv = ["--api-url", API, "watch", SID, "--timeout", "0", "--interval", "0"]
    assert cli.main(argv) == cli.EXIT_ERROR
    assert "still active" in capsys.readouterr().err
    assert len(recorder.requests) == 1


def test_show_completed(serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        event("llm_response", "looked at pods", "2025-01-01T00:00:01Z"),
        event("final_analysis", "the analysis", "2025-01-01T00:00:02Z"),
    ]
    serve(ok(view("completed", events, final_analysis="the analysis")))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"session {SID}" in out
    assert "alert PodCrashLooping" in out
    assert "chain default" in out
    assert "looked at pods" in out
    # Shown once, from the timeline, not again from the session field.
    assert out.count("the analysis") == 1


def test_show_final_analysis_missing_from_timeline(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view("completed", final_analysis="only on the session")))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "final analysis" in out
    assert "only on the session" in out


@pytest.mark.parametrize(("status", "code"), [("active", 0), ("paused", 0), ("failed", 1)])
def test_show_exit_codes(
    serve: Callable[..., Recorder], status: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view(status)))
    assert cli.main(["--api-url", API, "show", SID]) == code
    out = capsys.readouterr().out
    # A settled session (failed, or paused for a resume) ends with its outcome line.
    assert ("tokens in/out/thinking" in out) is (status != "active")
    assert ("tarsy resume" in out) is (status == "paused")


def test_show_json_is_the_raw_view(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    body = view("failed")
    serve(ok(body))
    # --json prints the data and exits 0 whatever the session's status.
    assert cli.main(["--api-url", API, "show", SID, "--json"]) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out) == body


@pytest.mark.parametrize("argv", [[], ["show"], ["frobnicate"], ["watch", SID, "--timeout", "x"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2


def test_long_event_content_is_printed_whole() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    cli.print_event(console, event("llm_response", "a" * 5000, "t"))
    out = buffer.getvalue()
    assert "a" * 5000 in out.replace("\n", "")  # wrapped at 200 columns, never cut
    assert "…" not in out


@pytest.mark.parametrize("content", ["volume mounted at [/data] is full", "check the [pod] status"])
def test_event_content_is_printed_verbatim(content: str) -> None:
    buffer = io.StringIO()
    cli.print_event(Console(file=buffer, width=200), event("llm_response", content, "t"))
    assert content in buffer.getvalue()


def test_show_says_when_the_budget_ended_a_session(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    budget = view("completed", final_analysis="cut short")
    budget["session"]["completion_reason"] = "budget"
    serve(ok(budget))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    assert "ended early: the session's token or cost budget is spent" in capsys.readouterr().out

"""``tarsy chat`` (the answer as it streams, ``--watch``), ``cancel --agent`` and the tree in show.

The views are synthetic (dicts as the api serves them), including sub-agent
executions with ``parent_execution_id``; the HTTP side is an httpx MockTransport.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from tarsy_dev import cli
from tarsy_dev.client import SessionView
from tests.unit.test_client_cli import API, SID, Recorder, clean_env, client, ok, serve

__all__ = ["clean_env", "serve"]  # fixtures, used by name

CHAT_ID = f"{SID}-chat-001"
PATH = cli.AGENT_PATH_SEPARATOR


def execution(
    execution_id: str,
    agent: str,
    *,
    status: str = "completed",
    role: str = "agent",
    stage: int = 0,
    parent: str | None = None,
    created_at: str = "2025-01-01T00:00:00Z",
    timeline: list[dict[str, Any]] | None = None,
    progress: dict[str, Any] | None = None,
    iteration: int = 1,
    total_tokens: int = 100,
    agent_index: int = 0,
) -> dict[str, Any]:
    """An execution as the api's view has it (sub-agent fields read with .get())."""
    fields: dict[str, Any] = {
        "execution_id": execution_id,
        "session_id": SID,
        "stage": stage,
        "role": role,
        "agent": agent,
        "agent_index": agent_index,
        "status": status,
        "iteration": iteration,
        "tokens": {"input_tokens": total_tokens, "total_tokens": total_tokens},
        "created_at": created_at,
        "timeline": timeline or [],
        "progress": progress,
    }
    if parent is not None:
        fields |= {"parent_execution_id": parent, "parent_tool_call_id": f"call-{execution_id}"}
    return fields


def session_view(
    *executions: dict[str, Any],
    status: str = "completed",
    stages: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    timeline = [e for x in executions for e in x["timeline"]]
    return {
        "session": {
            "session_id": SID,
            "alert_type": "PodCrashLooping",
            "chain_id": "default",
            "status": status,
            "tokens": {"input_tokens": 1, "output_tokens": 2, "thinking_tokens": 0},
        },
        "stages": stages or [],
        "executions": list(executions),
        "timeline": timeline,
    }


def chat_event(kind: str, content: str, at: str) -> dict[str, Any]:
    return {
        "type": kind,
        "content": content,
        "created_at": at,
        "execution_id": CHAT_ID,
        "stage": -2,
        "agent": "chat-agent",
        "metadata": {},
    }


QUESTION = chat_event("user_question", "Why did it crash?", "2025-01-01T00:01:00Z")
ANSWER = chat_event("final_analysis", "The config map lost DB_URL.", "2025-01-01T00:01:09Z")


def chat(
    status: str = "active",
    progress: dict[str, Any] | None = None,
    events: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    return execution(
        CHAT_ID, "chat-agent", status=status, role="chat", stage=-2,
        timeline=[QUESTION] if events is None else events, progress=progress, **fields,
    )  # fmt: skip


def streaming(text: str, thinking: str = "") -> dict[str, Any]:
    return {"step": 1, "text": text, "thinking": thinking, "chunks": 3}


def terminal(width: int = 100, height: int = 24) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=width, height=height), buffer


INVESTIGATOR = execution(f"{SID}-s00-a00", "investigator")


# ─── the client ──────────────────────────────────────────────────────────────


def test_client_cancel_agent_posts_to_the_execution() -> None:
    recorder = Recorder(ok({"cancel_requested": True}, 202))
    with client(recorder) as c:
        assert c.cancel_agent(SID, "e-1") == {"cancel_requested": True}
    [sent] = recorder.requests
    assert (sent.method, str(sent.url)) == ("POST", f"{API}/sessions/{SID}/executions/e-1/cancel")


# ─── tarsy chat: the answer as it arrives ────────────────────────────────────


def test_streaming_text_is_the_answer_else_the_thinking() -> None:
    assert cli.streaming_text(None) is None
    assert cli.streaming_text(streaming("", "")) is None
    thinking = cli.streaming_text(streaming("", "Reading the alert."))
    assert thinking is not None and thinking.plain == "Reading the alert."
    assert thinking.style == "dim italic"
    answer = cli.streaming_text(streaming("First finding.", "Reading the alert."))
    assert answer is not None and answer.plain == "First finding."


def test_the_live_area_shows_the_tail_that_fits_the_terminal() -> None:
    console, buffer = terminal(height=5)
    answer = cli.LiveAnswer()
    answer.progress = streaming("\n".join(f"line {n:02d}" for n in range(20)))
    console.print(answer)
    out = buffer.getvalue()
    assert [f"line {n:02d}" in out for n in (15, 16, 17, 18, 19)] == [False, True, True, True, True]
    assert "the assistant is working" in out


def test_chat_asks_then_shows_the_answer_as_it_grows_then_the_events(
    serve: Callable[..., Recorder],
) -> None:
    recorder = serve(
        ok({"session_id": SID, "execution_id": CHAT_ID}, 202),
        ok(session_view(chat(progress=streaming("", "Reading the investigation.")))),
        ok(session_view(chat(progress=streaming("The config map")))),
        ok(session_view(chat(progress=streaming("The config map lost DB_URL.")))),
        ok(session_view(chat("completed", events=[QUESTION, ANSWER]))),
    )
    console, buffer = terminal()
    args = cli._parser().parse_args(
        ["--api-url", API, "chat", SID, "Why did it crash?", "--interval", "0"]
    )
    with client(recorder) as c:
        assert cli.chat_session(c, args, console) == cli.EXIT_OK
    out = buffer.getvalue()
    # Each poll's text was drawn as it came: thinking first, then the answer growing.
    assert out.index("Reading the investigation.") < out.index("The config map")
    assert "The config map lost DB_URL." in out
    assert out.index("Why did it crash?") < out.index("final_analysis")
    post, *gets = recorder.requests
    assert json.loads(post.content) == {"question": "Why did it crash?"}
    assert [r.method for r in gets] == ["GET"] * 4


def test_chat_into_a_pipe_prints_the_events_not_the_streamed_text(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(
        ok({"session_id": SID, "execution_id": CHAT_ID}, 202),
        ok(session_view(chat(progress=streaming("half an ans")))),
        ok(session_view(chat("completed", events=[QUESTION, ANSWER]))),
    )
    argv = ["--api-url", API, "chat", SID, "Why did it crash?", "--interval", "0"]
    assert cli.main(argv) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "half an ans" not in out
    assert out.count("The config map lost DB_URL.") == 1
    assert "chat · chat-agent" in out


@pytest.mark.parametrize(("status", "code"), [("failed", 1), ("cancelled", 1), ("completed", 0)])
def test_chat_exit_code_is_the_chats_ending(
    serve: Callable[..., Recorder], status: str, code: int
) -> None:
    serve(ok({"execution_id": CHAT_ID}, 202), ok(session_view(chat(status))))
    assert cli.main(["--api-url", API, "chat", SID, "q", "--interval", "0"]) == code


def test_chat_gives_up_after_its_timeout(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok({"execution_id": CHAT_ID}, 202), ok(session_view(chat())))
    argv = ["--api-url", API, "chat", SID, "q", "--timeout", "0", "--interval", "0"]
    assert cli.main(argv) == cli.EXIT_ERROR
    assert "tarsy: no answer after 0s" in capsys.readouterr().err
    assert len(recorder.requests) == 2


def test_chat_conflict_is_exit_2(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    message = f"session {SID} is still active: the investigation has not finished; ask when it has"
    serve(ok({"error": {"status": 409, "message": message}}, 409))
    assert cli.main(["--api-url", API, "chat", SID, "q"]) == cli.EXIT_ERROR
    assert f"tarsy: HTTP 409: {message}" in capsys.readouterr().err


def test_running_chat_is_the_newest_that_has_not_ended() -> None:
    old = chat("completed", agent_index=0, created_at="2025-01-01T00:01:00Z")
    old["execution_id"] = "old"
    new = chat("active", agent_index=1, created_at="2025-01-01T00:02:00Z")
    view = SessionView.model_validate(session_view(INVESTIGATOR, old, new, status="completed"))
    running = cli.running_chat(view)
    assert running is not None and running["execution_id"] == CHAT_ID
    view.executions.remove(new)
    assert cli.running_chat(view) is None


def test_chat_watch_follows_the_running_chat_without_asking(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(
        ok(session_view(INVESTIGATOR, chat(progress=streaming("The config")))),
        ok(session_view(INVESTIGATOR, chat(progress=streaming("The config map")))),
        ok(session_view(INVESTIGATOR, chat("completed", events=[QUESTION, ANSWER]))),
    )
    assert cli.main(["--api-url", API, "chat", SID, "--watch", "--interval", "0"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.index("Why did it crash?") < out.index("The config map lost DB_URL.")
    assert [r.method for r in recorder.requests] == ["GET"] * 3


def test_chat_watch_with_no_chat_running_says_so(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(session_view(INVESTIGATOR, chat("completed"))))
    assert cli.main(["--api-url", API, "chat", SID, "--watch"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"tarsy: no chat is running on session {SID}" in err
    assert f"tarsy chat {SID} QUESTION" in err
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [([SID, "q", "--watch"], "give a question or --watch, not both"),
     ([SID], "no question: give one, or --watch")],
)  # fmt: skip
def test_chat_needs_a_question_or_watch(
    serve: Callable[..., Recorder],
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = serve(ok(session_view()))
    assert cli.main(["--api-url", API, "chat", *argv]) == cli.EXIT_ERROR
    assert f"tarsy: {message}" in capsys.readouterr().err
    assert recorder.requests == []


# ─── tarsy cancel --agent ────────────────────────────────────────────────────

LOGS = execution(f"{SID}-s01-a00", "logs-agent", status="active", stage=1)
METRICS = execution(f"{SID}-s01-a01", "metrics-agent", status="active", stage=1, agent_index=1)
DONE_METRICS = execution(f"{SID}-s00-a00", "metrics-agent")
REPLICAS = [
    execution(f"{SID}-s02-a0{n}", "replica", status="active", stage=2, agent_index=n)
    for n in range(2)
]


def test_resolve_agent_by_name_among_the_running_ones() -> None:
    # metrics-agent also ran (and finished) in stage 0: only the running one is meant.
    assert cli.resolve_agent([DONE_METRICS, LOGS, METRICS], "metrics-agent") is METRICS


def test_resolve_agent_takes_an_execution_id_as_is() -> None:
    assert cli.resolve_agent([DONE_METRICS, LOGS], DONE_METRICS["execution_id"]) is DONE_METRICS


def test_resolve_agent_unknown_name_lists_the_running_agents() -> None:
    with pytest.raises(cli.UsageError) as unknown:
        cli.resolve_agent([DONE_METRICS, LOGS, METRICS], "log-agent")
    assert str(unknown.value) == (
        f"no running agent 'log-agent'. Running: logs-agent ({SID}-s01-a00), "
        f"metrics-agent ({SID}-s01-a01)"
    )
    with pytest.raises(cli.UsageError, match=r"Running: none$"):
        cli.resolve_agent([DONE_METRICS], "metrics-agent")


def test_resolve_agent_ambiguous_name_asks_for_an_execution_id() -> None:
    with pytest.raises(cli.UsageError) as ambiguous:
        cli.resolve_agent(REPLICAS, "replica")
    assert str(ambiguous.value) == (
        "'replica' names 2 running agents; give an execution id. "
        f"Running: replica ({SID}-s02-a00), replica ({SID}-s02-a01)"
    )


def test_resolve_agent_names_a_running_sub_agent() -> None:
    sub = execution("sub-1", "log-reader", status="active", role="sub_agent", parent="p")
    assert cli.resolve_agent([LOGS, sub], "log-reader") is sub
    with pytest.raises(cli.UsageError, match=r"log-reader \[sub_agent\] \(sub-1\)"):
        cli.resolve_agent([LOGS, sub], "nobody")


def test_cancel_agent_by_name(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(
        ok(session_view(DONE_METRICS, LOGS, METRICS, status="active")),
        ok({"session_id": SID, "execution_id": METRICS["execution_id"]}, 202),
    )
    assert cli.main(["--api-url", API, "cancel", SID, "--agent", "metrics-agent"]) == cli.EXIT_OK
    get, post = recorder.requests
    assert (get.method, str(get.url)) == ("GET", f"{API}/sessions/{SID}")
    assert (post.method, str(post.url)) == (
        "POST",
        f"{API}/sessions/{SID}/executions/{SID}-s01-a01/cancel",
    )
    assert f"cancel requested for metrics-agent ({SID}-s01-a01) of {SID}" in (
        capsys.readouterr().err
    )


def test_cancel_agent_unknown_name_sends_nothing(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(session_view(LOGS, METRICS, status="active")))
    assert cli.main(["--api-url", API, "cancel", SID, "--agent", "nobody"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "tarsy: no running agent 'nobody'. Running: logs-agent" in err
    assert [r.method for r in recorder.requests] == ["GET"]


def test_cancel_agent_conflict_is_exit_2(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    eid = DONE_METRICS["execution_id"]
    serve(
        ok(session_view(DONE_METRICS, LOGS, status="active")),
        ok({"error": {"status": 409, "message": "the execution is already completed"}}, 409),
    )
    assert cli.main(["--api-url", API, "cancel", SID, "--agent", eid]) == cli.EXIT_ERROR
    assert "tarsy: HTTP 409: the execution is already completed" in capsys.readouterr().err


def test_cancel_without_agent_cancels_the_session(serve: Callable[..., Recorder]) -> None:
    recorder = serve(ok({"cancel_requested": True}, 202))
    assert cli.main(["--api-url", API, "cancel", SID]) == cli.EXIT_OK
    [post] = recorder.requests
    assert (post.method, str(post.url)) == ("POST", f"{API}/sessions/{SID}/cancel")


def test_cancel_with_an_empty_agent_is_a_usage_error(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(session_view()))
    assert cli.main(["--api-url", API, "cancel", SID, "--agent", " "]) == cli.EXIT_ERROR
    assert "tarsy: --agent is empty" in capsys.readouterr().err
    assert recorder.requests == []


# ─── the execution tree ──────────────────────────────────────────────────────


def sub_event(content: str, at: str, execution_id: str, agent: str) -> dict[str, Any]:
    return {"type": "llm_response", "content": content, "created_at": at,
            "execution_id": execution_id, "stage": 0, "agent": agent, "metadata": {}}  # fmt: skip


ORCHESTRATOR = execution(
    "orch", "orchestrator", iteration=3, total_tokens=1234, created_at="2025-01-01T00:00:01Z",
    timeline=[sub_event("asking the log reader", "2025-01-01T00:00:02Z", "orch", "orchestrator")],
)  # fmt: skip
LOG_READER = execution(
    "sub-logs", "log-reader", role="sub_agent", parent="orch", iteration=2, total_tokens=500,
    created_at="2025-01-01T00:00:03Z",
    timeline=[sub_event("the logs say OOM", "2025-01-01T00:00:04Z", "sub-logs", "log-reader")],
)  # fmt: skip
GREP = execution(
    "sub-grep", "grepper", role="sub_agent", parent="sub-logs", status="active",
    created_at="2025-01-01T00:00:05Z",
    timeline=[sub_event("grepping", "2025-01-01T00:00:06Z", "sub-grep", "grepper")],
)  # fmt: skip
METRICS_SUB = execution(
    "sub-metrics", "metrics-reader", role="sub_agent", parent="orch", status="failed",
    created_at="2025-01-01T00:00:04Z",
)  # fmt: skip
SUMMARY = execution("sum", "summarizer", role="summary", stage=-1, created_at="2025-01-01T00:01Z")
CHAT = execution("chat", "chat-agent", role="chat", stage=-2, created_at="2025-01-01T00:02Z")
SECOND_STAGE = execution("s1", "checker", stage=1, created_at="2025-01-01T00:00:30Z")
TREE = [SUMMARY, CHAT, GREP, SECOND_STAGE, METRICS_SUB, LOG_READER, ORCHESTRATOR]


def shape(nodes: list[cli.ExecutionNode]) -> list[Any]:
    return [
        node.execution["execution_id"]
        if not node.children
        else {node.execution["execution_id"]: shape(list(node.children))}
        for node in nodes
    ]


def test_execution_tree_nests_sub_agents_under_the_agent_that_messaged_them() -> None:
    tree = cli.execution_tree(TREE)
    assert list(tree) == [0, 1, -1, -2]  # chain stages first, then summary and chat
    assert shape(tree[0]) == [{"orch": [{"sub-logs": ["sub-grep"]}, "sub-metrics"]}]
    assert shape(tree[1]) == ["s1"]
    assert shape(tree[-1]) == ["sum"]


def test_execution_tree_keeps_orphans_and_loops_visible() -> None:
    orphan = execution("lost", "lost-agent", role="sub_agent", parent="not-in-the-view")
    loop_a = execution("a", "a", role="sub_agent", parent="b")
    loop_b = execution("b", "b", role="sub_agent", parent="a")
    tree = cli.execution_tree([orphan, loop_a, loop_b])
    ids = {n.execution["execution_id"] for n in tree[0]}
    assert "lost" in ids
    assert shape(tree[0]) == ["lost", {"a": ["b"]}]  # a loop is shown once, from one member


def test_agent_paths_name_sub_agents_by_their_parents() -> None:
    assert cli.agent_paths(TREE) == {
        "sub-logs": f"orchestrator{PATH}log-reader",
        "sub-grep": f"orchestrator{PATH}log-reader{PATH}grepper",
        "sub-metrics": f"orchestrator{PATH}metrics-reader",
    }


def test_show_prints_the_tree_and_labels_sub_agent_events(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    stages = [{"index": 0, "name": "investigation"}, {"index": 1, "name": "check"}]
    serve(ok(session_view(*TREE, status="active", stages=stages)))
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"stage 0 · orchestrator{PATH}log-reader\n" in out
    assert f"stage 0 · orchestrator{PATH}log-reader{PATH}grepper\n" in out
    assert "stage 0 · orchestrator\n" in out  # the parent keeps its own name
    lines = out.splitlines()
    tree = lines[next(n for n, line in enumerate(lines) if line.strip() == "executions") :]
    # Each line up to the status (two spaces after the name).
    assert [re.split(r"(?<=[\w\]])  ", line)[0] for line in tree[:9]] == [
        "executions",
        "├── stage 0 · investigation",
        "│   └── orchestrator",
        "│       ├── log-reader [sub-agent]",
        "│       │   └── grepper [sub-agent]",
        "│       └── metrics-reader [sub-agent]",
        "├── stage 1 · check",
        "│   └── checker",
        "├── executive summary",
    ]
    orchestrator = next(line for line in tree if "orchestrator" in line)
    assert "completed · 3 iterations · 1,234 tokens  orch" in orchestrator
    grepper = next(line for line in tree if "grepper" in line)
    assert "active · 1 iteration · 100 tokens  sub-grep" in grepper


# ─── help ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["--help"], "the answer prints as it arrives"),
     (["--help"], "or with --agent one running agent of a parallel stage"),
     (["chat", "--help"], "--watch follow the chat that is answering now"),
     (["cancel", "--help"], "--agent NAME|EID only this agent")],
)  # fmt: skip
def test_help_describes_chat_watch_and_cancel_agent(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    assert words in " ".join(capsys.readouterr().out.split())


def test_a_view_without_progress_or_sub_agent_fields_still_shows() -> None:
    """Views served before these fields existed: no progress key, no parent fields."""
    bare = {
        k: v for k, v in chat("completed", events=[QUESTION, ANSWER]).items() if k != "progress"
    }
    view = SessionView.model_validate(session_view(INVESTIGATOR, bare))
    buffer = io.StringIO()
    assert cli.show_session(view, Console(file=buffer, width=200)) == cli.EXIT_OK
    assert "chat-agent [chat]" in buffer.getvalue()

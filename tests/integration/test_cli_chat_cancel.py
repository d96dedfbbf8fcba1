"""``tarsy chat`` and ``tarsy cancel --agent`` through the real functions (issue 16, items 3-4).

The answer of a chat streams from the fake Gemini, slowly; the step function
writes its progress, the api serves it in the session view, and the CLI draws
it before the committed events. A parallel stage's slow agent is cancelled by
its name while its call is still streaming.
"""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from rich.console import Console

from tarsy.models import ExecutionStatus
from tarsy_dev import cli
from tarsy_dev.client import LocalSignIn, SessionView, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, StandInResponder
from tarsy_dev.localstack.stack import Stack

from .conftest import cli_flags

WAIT_S = 60.0
ANSWER = "First finding. Second finding. Third finding. The conclusion."


class RecordingClient(TarsyClient):
    """A client that keeps every session view it read (what the CLI saw, poll by poll)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.views: list[SessionView] = []

    def session(self, session_id: str) -> SessionView:
        view = super().session(session_id)
        self.views.append(view)
        return view


def slow_chat(call: FakeCall) -> FakeReply:
    """The chat's answer streams in six pieces over ~3.6 s; anything else is the stand-in."""
    if "chat-assistant" in call.system_text():
        return FakeReply(text=ANSWER, thinking="Reading the investigation.", stream_chunks=6,
                         chunk_delay=0.6)  # fmt: skip
    return StandInResponder()(call)


def finished(client: TarsyClient, alert: dict[str, Any]) -> str:
    session_id = client.submit(alert).session_id
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal, last.status
    return session_id


def test_chat_shows_the_answer_as_it_streams(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient
) -> None:
    fake_gemini.responder = slow_chat
    session_id = finished(client, {"alert_type": "generic", "data": "error rate 31% on orders"})
    console_file = io.StringIO()
    console = Console(file=console_file, force_terminal=True, width=120, height=30)
    args = cli._parser().parse_args(
        ["chat", session_id, "Which finding matters?", "--interval", "0.2", "--timeout", "60"]
    )

    recording = RecordingClient(
        ingest_url=stack.ingest_url,
        api_url=stack.api_url,
        api_key=stack.api_key,
        signin=LocalSignIn(stack.signin_key_pem, stack.user),
    )
    with recording:
        assert cli.chat_session(recording, args, console) == cli.EXIT_OK

    chats = [next(e for e in v.executions if e["role"] == "chat") for v in recording.views]
    texts = [str(c["progress"]["text"]) for c in chats if c["progress"] is not None]
    # The api served the answer while it streamed: growing prefixes, short of the whole.
    assert any(text and text != ANSWER for text in texts), texts
    assert all(ANSWER.startswith(text) for text in texts), texts
    assert chats[-1]["status"] == "completed" and chats[-1]["progress"] is None
    out = console_file.getvalue()
    # The CLI drew the streamed text before the committed answer's event.
    assert out.index("First finding.") < out.index("final_analysis")
    assert "Which finding matters?" in out


def test_chat_watch_follows_a_chat_asked_elsewhere(
    stack: Stack,
    fake_gemini: FakeGemini,
    client: TarsyClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_gemini.responder = slow_chat
    session_id = finished(client, {"alert_type": "generic", "data": "disk 91% full on db-1"})
    client.chat(session_id, "Is the disk the cause?")
    flags = cli_flags(stack, monkeypatch)

    assert cli.main([*flags, "chat", session_id, "--watch", "--interval", "0.2"]) == cli.EXIT_OK

    out = capsys.readouterr().out
    assert "Is the disk the cause?" in out and "The conclusion." in out
    assert cli.main([*flags, "chat", session_id, "--watch"]) == cli.EXIT_ERROR
    assert f"no chat is running on session {session_id}" in capsys.readouterr().err


def probes(call: FakeCall) -> FakeReply:
    """flaky's answer takes ~4 s to stream (long enough to cancel it); the others are quick."""
    if "You are flaky," in call.system_text():
        return FakeReply(text="analysis by flaky", stream_chunks=5, chunk_delay=0.8)
    if "You are steady," in call.system_text():
        return FakeReply(text="analysis by steady")
    return FakeReply(text="merged: " + call.last_user_text()[-400:])


def test_cancel_agent_by_name_lets_the_other_reach_synthesis(
    stack: Stack,
    fake_gemini: FakeGemini,
    client: TarsyClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_gemini.responder = probes
    session_id = client.submit({"alert_type": "test-any", "data": "probe both"}).session_id
    deadline = time.monotonic() + WAIT_S
    while not any("You are flaky," in c.system_text() for c in list(fake_gemini.calls)):
        assert time.monotonic() < deadline, "flaky's call never started"
        time.sleep(0.05)
    flags = cli_flags(stack, monkeypatch)

    assert cli.main([*flags, "cancel", session_id, "--agent", "flaky"]) == cli.EXIT_OK

    assert f"cancel requested for flaky ({session_id}-" in capsys.readouterr().err
    *_, view = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert view.status is ExecutionStatus.COMPLETED
    status = {e["agent"]: e["status"] for e in view.executions if e["role"] == "agent"}
    assert status == {"flaky": "cancelled", "steady": "completed"}
    [synthesis] = [c for c in fake_gemini.calls if "synthesizer" in c.system_text()]
    merged = synthesis.last_user_text()
    assert "analysis by steady" in merged and "analysis by flaky" not in merged
    # Nothing is left to cancel by that name now.
    assert cli.main([*flags, "cancel", session_id, "--agent", "flaky"]) == cli.EXIT_ERROR
    assert "no running agent 'flaky'. Running: none" in capsys.readouterr().err

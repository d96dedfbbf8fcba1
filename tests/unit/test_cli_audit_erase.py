"""``tarsy audit`` and ``tarsy erase``, and their client calls, against an httpx MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tarsy.persistence.audit_log import AuditCursor
from tarsy_dev import cli
from tests.unit.test_client_cli import API, SID, Recorder, clean_env, client, ok, serve

__all__ = ["clean_env", "serve"]  # fixtures, used by name

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CURSOR = AuditCursor(at=NOW, path=f"sessions/{SID}/audit/x").encode()


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ages count from NOW."""
    monkeypatch.setattr(cli, "clock", lambda: NOW)


def entry(action: str, actor: str, **fields: Any) -> dict[str, Any]:
    """An audit row as ``GET /audit`` serves it."""
    return {
        "action": action,
        "actor": actor,
        "role": "admin",
        "target": None,
        "detail": "",
        "at": (NOW - timedelta(minutes=5)).isoformat(),
        "session_id": SID,
        "path": f"sessions/{SID}/audit/{action}",
        **fields,
    }


def page(*rows: dict[str, Any], next_cursor: str | None = None) -> dict[str, Any]:
    return {"entries": list(rows), "next_cursor": next_cursor}


def sent_params(request: httpx.Request) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(request.url)).query)


def error(status: int, message: str) -> httpx.Response:
    return ok({"error": {"status": status, "message": message}}, status)


# ─── client ──────────────────────────────────────────────────────────────────


def test_client_audit_sends_only_the_filters_given() -> None:
    recorder = Recorder(ok(page(entry("cancel", "a@example.com"))))
    with client(recorder) as c:
        read = c.audit(action="cancel", since=NOW, limit=5)
    assert [e.actor for e in read.entries] == ["a@example.com"]
    [sent] = recorder.requests
    assert (sent.method, str(sent.url).split("?")[0]) == ("GET", f"{API}/audit")
    assert sent_params(sent) == {
        "action": ["cancel"],
        "since": ["2026-03-02T12:00:00+00:00"],
        "limit": ["5"],
    }


def test_client_erase_sends_the_reason_as_json() -> None:
    recorder = Recorder(ok({"session_id": SID, "erased": True}))
    with client(recorder) as c:
        assert c.erase(SID, "a secret pasted by mistake")["erased"] is True
    [sent] = recorder.requests
    assert (sent.method, str(sent.url)) == ("DELETE", f"{API}/sessions/{SID}")
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"reason": "a secret pasted by mistake"}


# ─── tarsy audit ─────────────────────────────────────────────────────────────


def test_audit_prints_a_table_and_says_how_to_get_the_next_page(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    chat = entry("chat", "ann@example.com", role="responder", detail="[bold]why?[/bold]")
    erased = entry("erase", "root@example.com", session_id="s-gone", target="s-gone",
                   detail="a pasted key")  # fmt: skip
    serve(ok(page(chat, erased, next_cursor=CURSOR)))
    assert cli.main(["audit", "--api-url", API]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["at", "(UTC)", "actor", "role", "action", "session", "detail"]
    # What was typed is text, not markup; the erased session's id is its target, shown once.
    assert ["2026-03-02", "11:55:00", "ann@example.com", "responder", "chat", SID,
            "[bold]why?[/bold]"] in lines  # fmt: skip
    assert ["2026-03-02", "11:55:00", "root@example.com", "admin", "erase", "s-gone", "a",
            "pasted", "key"] in lines  # fmt: skip
    assert err.strip() == f"more: add --cursor {CURSOR}"


def test_audit_passes_its_filters(serve: Callable[..., Recorder]) -> None:
    recorder = serve(ok(page()))
    argv = ["audit", "--actor", "Ann@Example.com", "--action", "erase", "--since", "2h",
            "--limit", "10", "--cursor", CURSOR, "--api-url", API]  # fmt: skip
    assert cli.main(argv) == cli.EXIT_OK
    assert sent_params(recorder.requests[0]) == {
        "actor": ["Ann@Example.com"],  # the api lower-cases it
        "action": ["erase"],
        "since": [(NOW - timedelta(hours=2)).isoformat()],
        "limit": ["10"],
        "cursor": [CURSOR],
    }


def test_audit_json_is_the_page(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(page(entry("resume", "a@example.com"), next_cursor=CURSOR)))
    assert cli.main(["audit", "--json", "--api-url", API]) == cli.EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert [e["action"] for e in printed["entries"]] == ["resume"]
    assert printed["next_cursor"] == CURSOR


def test_audit_with_nothing_to_show(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(page()))
    assert cli.main(["audit", "--api-url", API]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert (out, err.strip()) == ("", "no audit records match")


def test_audit_refused_says_it_needs_admin(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(error(403, "role responder may not audit"))
    assert cli.main(["audit", "--api-url", API]) == cli.EXIT_ERROR
    assert "needs the admin role" in capsys.readouterr().err


def test_audit_bad_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["audit", "--action", "delete"])
    assert exit_.value.code == cli.EXIT_ERROR
    assert "invalid choice: 'delete'" in capsys.readouterr().err


# ─── tarsy erase ─────────────────────────────────────────────────────────────


def test_erase_says_what_it_did(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok({"session_id": SID, "erased": True}))
    assert cli.main(["erase", SID, "--reason", " person's request ", "--api-url", API]) == 0
    assert json.loads(recorder.requests[0].content) == {"reason": "person's request"}
    assert capsys.readouterr().err.startswith(f"erased {SID}")


def test_erase_of_a_running_session_says_to_cancel_it_first(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(error(409, f"session {SID} is still running (active, 1 execution(s) not ended)"))
    assert cli.main(["erase", SID, "--reason", "asked", "--api-url", API]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "is still running, so it is not erased" in err
    assert f"tarsy cancel {SID}" in err


def test_erase_needs_a_reason(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok({"session_id": SID, "erased": True}))
    with pytest.raises(SystemExit):
        cli.main(["erase", SID, "--api-url", API])
    assert "--reason" in capsys.readouterr().err
    assert cli.main(["erase", SID, "--reason", "  ", "--api-url", API]) == cli.EXIT_ERROR
    assert "--reason is empty" in capsys.readouterr().err
    assert recorder.requests == []


def test_erase_of_an_unknown_session_is_exit_2(
    serve: Callable[..., Recorder], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(error(404, "no session 'x'"))
    assert cli.main(["erase", "x", "--reason", "asked", "--api-url", API]) == cli.EXIT_ERROR
    assert "tarsy: HTTP 404: no session 'x'" in capsys.readouterr().err

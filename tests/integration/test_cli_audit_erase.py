"""``tarsy audit`` and ``tarsy erase`` on the local stack (issue 42, point 3), the real CLI.

The stack's admin erases a finished session with a reason and finds the
erasure in the audit, filtered by action and by its e-mail in another case;
a responder is refused both with the role they lack, and nothing is erased.
"""

from __future__ import annotations

import json

import pytest

from tarsy_dev import cli
from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER, cli_flags
from .test_audit_erasure import SECRET, finished


def test_the_admin_erases_with_the_cli_and_reads_the_erasure_in_the_audit(
    stack: Stack,
    client: TarsyClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session_id = finished(client, "a token pasted in an alert")
    responder = cli_flags(stack, monkeypatch, RESPONDER)
    assert cli.main([*responder, "erase", session_id, "--reason", "asked"]) == cli.EXIT_ERROR
    assert "needs the admin role" in capsys.readouterr().err
    assert cli.main([*responder, "audit"]) == cli.EXIT_ERROR
    assert "needs the admin role" in capsys.readouterr().err
    assert client.session(session_id).session["session_id"] == session_id

    admin = cli_flags(stack, monkeypatch)
    reason = f"the alert carries a token {SECRET}"
    assert cli.main([*admin, "erase", session_id, "--reason", reason]) == cli.EXIT_OK
    assert capsys.readouterr().err.startswith(f"erased {session_id}")

    argv = [*admin, "audit", "--action", "erase", "--actor", stack.user.upper(), "--json"]
    assert cli.main(argv) == cli.EXIT_OK
    entries = json.loads(capsys.readouterr().out)["entries"]
    [record] = [e for e in entries if e["session_id"] == session_id]
    assert (record["action"], record["actor"], record["role"]) == ("erase", stack.user, "admin")
    assert SECRET not in record["detail"] and "[MASKED_TOKENS]" in record["detail"]

    assert cli.main([*admin, "audit", "--action", "erase"]) == cli.EXIT_OK
    assert session_id in capsys.readouterr().out
    assert cli.main([*admin, "erase", session_id, "--reason", "again"]) == cli.EXIT_ERROR
    assert "HTTP 404" in capsys.readouterr().err

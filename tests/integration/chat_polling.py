"""Asking a chat question through the api and waiting for its answer, as ``tarsy chat`` does."""

from __future__ import annotations

import time
from typing import Any

from tarsy.models import ExecutionStatus
from tarsy_dev.client import TarsyClient

CHAT_WAIT_S = 60.0  # far above a scripted chat's few steps


def answer_chat(client: TarsyClient, session_id: str, question: str) -> dict[str, Any]:
    """Ask ``question`` and return the chat's execution view once it has ended."""
    execution_id = client.chat(session_id, question)
    deadline = time.monotonic() + CHAT_WAIT_S
    while time.monotonic() < deadline:
        view = client.session(session_id)
        chat = next(e for e in view.executions if e["execution_id"] == execution_id)
        if ExecutionStatus(chat["status"]).is_terminal:
            return chat
        time.sleep(0.25)  # polling the api, as `tarsy chat` does
    raise AssertionError("the chat did not finish")

"""`tarsy watch` and `tarsy show`: the gather step's events, short and readable."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from tarsy_dev import cli


def _printed(event: dict[str, Any]) -> str:
    buffer = io.StringIO()
    cli.print_event(Console(file=buffer, width=200, color_system=None), event)
    return buffer.getvalue()


def test_a_gathered_call_prints_what_was_read_and_its_size_not_its_content() -> None:
    event = {
        "type": "mcp_tool_call",
        "content": "line one\nline two\nsecret-looking text",
        "metadata": {"gathered": True, "server_name": "kubernetes", "tool_name": "pods_log",
                     "collector": "previous-logs", "evidence_label": "E4"},
        "stage": 0,
        "agent": "investigator",
    }  # fmt: skip
    printed = _printed(event)
    assert "gathered [E4] kubernetes.pods_log (previous-logs)" in printed
    assert "(37 characters, 3 lines)" in printed
    assert "line two" not in printed


def test_a_detection_prints_its_check_its_evidence_and_its_finding() -> None:
    event = {
        "type": "detection",
        "content": "Pod shop/web-1 exits 1: no such host db.",
        "metadata": {"check": "crash_loop", "evidence_labels": ["E1", "E4"]},
        "stage": 0,
        "agent": "investigator",
    }
    printed = _printed(event)
    assert "detection crash_loop [E1, E4]" in printed
    assert "Pod shop/web-1 exits 1: no such host db." in printed

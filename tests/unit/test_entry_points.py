"""The functions' entry points stay thin: parse the trigger, call the library, answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarsy.web.links import span_route

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = sorted((ROOT / "functions").glob("*/main.py"))


def test_there_is_an_entry_point_per_function() -> None:
    assert [p.parent.name for p in ENTRY_POINTS] == ["api", "ingest", "step"]


@pytest.mark.parametrize("entry_point", ENTRY_POINTS, ids=lambda p: p.parent.name)
def test_every_entry_point_is_under_fifty_lines(entry_point: Path) -> None:
    assert len(entry_point.read_text(encoding="utf-8").splitlines()) < 50


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/sessions/abc-123", "/sessions/{session_id}"),
        ("/sessions/abc-123/cancel", "/sessions/{session_id}/cancel"),
        ("/ui/sessions/abc-123", "/ui/sessions/{session_id}"),
        ("/ui/data/sessions/abc-123/events", "/ui/data/sessions/{session_id}/events"),
        ("/sessions", "/sessions"),
    ],
)
def test_a_spans_route_never_carries_the_session_id(path: str, route: str) -> None:
    assert span_route(path) == route

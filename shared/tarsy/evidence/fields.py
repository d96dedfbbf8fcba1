"""Reading untyped fields of Kubernetes objects: a mapping or a list of mappings, or nothing.

Design constraint: an object read from a tool is whatever the server wrote, so
a field of the wrong type reads as empty, never raises. Both the target
sources (what to gather next) and the checks read fields this way; this module
sits below both so that following a reference does not load every check (the
step's cold start loads the checks only when it gathers).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a mapping with text keys, else an empty dict."""
    return dict(value) if isinstance(value, Mapping) else {}


def dicts(value: object) -> list[dict[str, Any]]:
    """The mappings in ``value`` when it is a list (other items are skipped)."""
    if not isinstance(value, list):
        return []
    return [dict(item) for item in value if isinstance(item, Mapping)]


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time as the API prints it (``2026-11-27T10:02:03Z``), aware; None if not."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

"""Reading untyped fields of Kubernetes objects: a mapping or a list of mappings, or nothing.

Design constraint: an object read from a tool is whatever the server wrote, so
a field of the wrong type reads as empty, never raises. Both the target
sources (what to gather next) and the checks read fields this way; this module
sits below both so that following a reference does not load every check (the
step's cold start loads the checks only when it gathers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a mapping with text keys, else an empty dict."""
    return dict(value) if isinstance(value, Mapping) else {}


def dicts(value: object) -> list[dict[str, Any]]:
    """The mappings in ``value`` when it is a list (other items are skipped)."""
    if not isinstance(value, list):
        return []
    return [dict(item) for item in value if isinstance(item, Mapping)]

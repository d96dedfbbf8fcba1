"""Canonical tool names (``server.tool``) and Gemini's function-name form (``server__tool``).

Gemini function names may not contain dots (seed 000 Q7), so providers convert
at their boundary and everything else uses the canonical form.
"""

from __future__ import annotations

import re

CANONICAL_TOOL_NAME = re.compile(r"^[\w\-]+\.[\w\-]+$")
_SEPARATOR = "__"


def is_canonical(name: str) -> bool:
    """Whether ``name`` is a valid ``server.tool`` name."""
    return CANONICAL_TOOL_NAME.fullmatch(name) is not None


def to_function_name(canonical: str) -> str:
    """Convert ``server.tool`` to ``server__tool``."""
    if not is_canonical(canonical):
        raise ValueError(f"tool name {canonical!r} is not of the form 'server.tool'")
    server, tool = canonical.split(".", 1)
    return f"{server}{_SEPARATOR}{tool}"


def from_function_name(function_name: str) -> str:
    """Convert ``server__tool`` back to ``server.tool`` (split at the first ``__``)."""
    server, sep, tool = function_name.partition(_SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(f"function name {function_name!r} is not of the form 'server__tool'")
    return f"{server}.{tool}"

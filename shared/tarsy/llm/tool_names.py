"""Canonical tool names (``server.tool``) and Gemini's function-name form (``server__tool``).

Gemini function names may not contain dots (seed 000 Q7), so providers convert
at their boundary and everything else uses the canonical form. Tools that tarsy
itself provides (``message_agent``, seed 004) belong to no MCP server: their
name is the same in both forms.
"""

from __future__ import annotations

import re

CANONICAL_TOOL_NAME = re.compile(r"^[\w\-]+\.[\w\-]+$")
_SEPARATOR = "__"
# Built-in tools, named as the seeds name them; no MCP server id may take these names.
BUILTIN_TOOLS = frozenset({"message_agent"})


def is_canonical(name: str) -> bool:
    """Whether ``name`` is a valid ``server.tool`` name (or a built-in tool's)."""
    return name in BUILTIN_TOOLS or CANONICAL_TOOL_NAME.fullmatch(name) is not None


def to_function_name(canonical: str) -> str:
    """Convert ``server.tool`` to ``server__tool``."""
    if not is_canonical(canonical):
        raise ValueError(f"tool name {canonical!r} is not of the form 'server.tool'")
    if canonical in BUILTIN_TOOLS:
        return canonical
    server, tool = canonical.split(".", 1)
    return f"{server}{_SEPARATOR}{tool}"


def from_function_name(function_name: str) -> str:
    """Convert ``server__tool`` back to ``server.tool`` (split at the first ``__``)."""
    if function_name in BUILTIN_TOOLS:
        return function_name
    server, sep, tool = function_name.partition(_SEPARATOR)
    if not sep or not server or not tool:
        raise ValueError(f"function name {function_name!r} is not of the form 'server__tool'")
    return f"{server}.{tool}"

"""The alert's choice of MCP servers and tools (TARSy's ``mcp`` field), checked and applied.

An alert may carry ``mcp: {servers: [{name, tools?}]}``. Its servers replace
the ones the chain configures, for every execution of the session that uses
tools (the agents, the sub-agents they message and the chat; synthesis,
summary and scoring run without tools), and ``tools`` narrows a server to the
named tools.

What can be checked where:

* **At ingest** (:func:`selection_problems`, a 422 naming the culprit): every
  server name against the configuration (unknown or disabled), and the tool
  names of a server whose tool list is known without asking it, that is, the
  list the steps cached in Firestore (``mcp_tool_lists/{server}``) while it is
  fresh (within the server's ``tool_list_ttl``): the same list a step would use.
* **At the first step** (:func:`restrict_listing`): a server's tools are only
  known for sure by asking it (``tools/list``). A named tool the server does
  not list fails the session with :class:`~tarsy.errors.ToolSelectionError`
  rather than investigating with less than the alert asked for. A server that
  cannot be reached is reported as unavailable, as without a selection.

Pure functions; the reads are the callers' (``tarsy.intake.ingest``, ``tarsy.engine.steps``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from tarsy.config.schema import MCPServerConfig, ResolvedAgentConfig
from tarsy.errors import ToolSelectionError
from tarsy.models import ExecutionRole, MCPSelection
from tarsy.tools.base import CachedToolList, ToolListing

# The roles whose configured servers an alert's selection replaces. The others are
# configured without tools; the selection gives them none (they keep theirs if any).
_TOOL_ROLES: frozenset[ExecutionRole] = frozenset({"agent", "chat", "sub_agent"})


def selection_problems(
    selection: MCPSelection,
    servers: Mapping[str, MCPServerConfig],
    known_tools: Mapping[str, Sequence[str]],
) -> list[dict[str, str]]:
    """What in ``selection`` the configuration cannot serve, as 422 ``details`` entries.

    Args:
        selection: The alert's ``mcp``.
        servers: The configured MCP servers.
        known_tools: Per server, the tool names known without asking it (see
            :func:`fresh_tool_names`); a server absent here is checked at the first step.

    Returns:
        One ``{field, message, type}`` per unknown or disabled server and per tool
        its server is known not to list; empty when the selection is usable.
    """
    problems: list[dict[str, str]] = []
    configured = ", ".join(sorted(servers)) or "none"
    for n, chosen in enumerate(selection.servers):
        where = f"mcp.servers.{n}"
        server = servers.get(chosen.name)
        if server is None:
            problems.append(
                {
                    "field": f"{where}.name",
                    "message": f"unknown MCP server {chosen.name!r}; configured: {configured}",
                    "type": "unknown_mcp_server",
                }
            )
            continue
        if not server.enabled:
            problems.append(
                {
                    "field": f"{where}.name",
                    "message": f"MCP server {chosen.name!r} is disabled in the configuration",
                    "type": "disabled_mcp_server",
                }
            )
            continue
        listed = known_tools.get(chosen.name)
        if listed is None:
            continue
        for t, tool in enumerate(chosen.tools or []):
            if tool not in listed:
                problems.append(
                    {
                        "field": f"{where}.tools.{t}",
                        "message": (
                            f"MCP server {chosen.name!r} has no tool {tool!r}; "
                            f"it lists: {', '.join(listed) or 'none'}"
                        ),
                        "type": "unknown_mcp_tool",
                    }
                )
    return problems


def servers_to_check(selection: MCPSelection, servers: Mapping[str, MCPServerConfig]) -> list[str]:
    """The configured servers whose tool names ``selection`` narrows (worth a cache read)."""
    return [s.name for s in selection.servers if s.tools and s.name in servers]


def fresh_tool_names(
    cached: Mapping[str, CachedToolList],
    servers: Mapping[str, MCPServerConfig],
    now: datetime,
) -> dict[str, list[str]]:
    """Per server, the tool names of its cached list while fresh (the executor's TTL rule)."""
    names: dict[str, list[str]] = {}
    for server_id, entry in cached.items():
        config = servers.get(server_id)
        if config is None:
            continue
        if entry.fetched_at + timedelta(seconds=config.tool_list_ttl) <= now:
            continue  # stale: the server may list other tools by now; the step checks
        names[server_id] = [tool.name.split(".", 1)[-1] for tool in entry.tools]
    return names


def apply_selection(
    resolved: ResolvedAgentConfig, selection: MCPSelection | None, role: ExecutionRole
) -> ResolvedAgentConfig:
    """``resolved`` with the alert's servers and tool allow-lists in place of the chain's.

    Applies to agents, sub-agents and chats (the roles that use tools), and to
    any other execution configured with servers. A ``tool_choice`` that forces a function
    the selection does not offer falls back to ``auto``: the alert's choice wins.
    """
    if selection is None or (role not in _TOOL_ROLES and not resolved.mcp_servers):
        return resolved
    servers = [s.name for s in selection.servers]
    tools = {s.name: list(s.tools) for s in selection.servers if s.tools}
    tool_choice = resolved.tool_choice
    if "." in tool_choice:
        server, tool = tool_choice.split(".", 1)
        if server not in servers or (server in tools and tool not in tools[server]):
            tool_choice = "auto"
    return resolved.model_copy(
        update={"mcp_servers": servers, "mcp_tools": tools, "tool_choice": tool_choice}
    )


def restrict_listing(listing: ToolListing, allowed: Mapping[str, Sequence[str]]) -> ToolListing:
    """The tools of ``listing`` that ``allowed`` lets through (per server; others whole).

    Raises:
        ToolSelectionError: A server that answered does not list a tool it should offer.
    """
    if not allowed:
        return listing
    for server, names in allowed.items():
        if server in listing.unavailable:
            continue  # cannot tell; the server is reported unavailable, as without a selection
        listed = [t.name.split(".", 1)[1] for t in listing.tools if t.name.startswith(f"{server}.")]
        missing = [name for name in names if name not in listed]
        if missing:
            raise ToolSelectionError(server, missing, listed)
    kept = [
        tool
        for tool in listing.tools
        if (server := tool.name.split(".", 1)[0]) not in allowed
        or tool.name.split(".", 1)[1] in allowed[server]
    ]
    return listing.model_copy(update={"tools": kept})

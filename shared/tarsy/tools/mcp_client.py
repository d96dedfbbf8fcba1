"""The tool executor on MCP servers (the ``mcp`` SDK's client).

Tool lists are cached in Firestore (``mcp_tool_lists/{server}``) with the
server's TTL, so most steps do not connect just to list tools, and no list is
kept in process memory between invocations (invariant 2). Calls of one
iteration run concurrently, one connection per server, each with its own
timeout; every failure becomes an observation for the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

from mcp import types as mcp_types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tarsy import telemetry
from tarsy.config.schema import MCPServerConfig, TarsyConfig
from tarsy.llm.base import ToolDefinition
from tarsy.models import ToolCall, utcnow
from tarsy.persistence.store import Store
from tarsy.secrets import resolve_all
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList, ToolListing, ToolResult, check_call, error_result
from tarsy.tools.masking import Masker

logger = logging.getLogger(__name__)


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text of a tool result: text parts joined, other parts named, structured as JSON."""
    pieces: list[str] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            pieces.append(item.text)
        elif isinstance(item, mcp_types.EmbeddedResource):
            resource = item.resource
            pieces.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        else:
            pieces.append(f"[{item.type} content not shown]")
    if not pieces and result.structured_content is not None:
        pieces.append(json.dumps(result.structured_content, indent=2, sort_keys=True))
    return "\n".join(pieces)


class MCPToolExecutor:
    """Lists and calls tools on the MCP servers of the configuration."""

    def __init__(
        self,
        config: TarsyConfig,
        settings: Settings,
        store: Store,
    ) -> None:
        self._config = config
        self._settings = settings
        self._store = store
        # Compiled once per process: pure functions of the (immutable) configuration.
        self._maskers = {
            server_id: Masker(server.masking) for server_id, server in config.mcp_servers.items()
        }

    def _mask(self, text: str, server_id: str) -> tuple[str, dict[str, int]]:
        """Mask a result with its server's masking config (invariant 5)."""
        result = self._maskers[server_id].mask(text)
        return result.text, dict(result.counts)

    # ─── connections ─────────────────────────────────────────────────────────

    def _connect(self, server_id: str) -> AbstractAsyncContextManager[Client]:
        server = self._config.mcp_servers[server_id]
        target: Any
        if server.transport == "stdio":
            assert server.command is not None
            target = StdioServerParameters(
                # "python" is this process's interpreter, so bundled servers run as installed.
                command=sys.executable if server.command == "python" else server.command,
                args=list(server.args),
                env=resolve_all(server.env, self._settings) or None,
            )
        else:
            assert server.url is not None
            headers = resolve_all(server.headers, self._settings)
            if headers:
                import httpx2

                http = httpx2.AsyncClient(headers=headers, timeout=server.call_timeout)
                target = streamable_http_client(server.url, http_client=http)
            else:
                target = server.url
        return Client(target, read_timeout_seconds=server.call_timeout)

    # ─── listing ─────────────────────────────────────────────────────────────

    async def _fetch_tools(self, server_id: str) -> list[ToolDefinition]:
        server = self._config.mcp_servers[server_id]
        async with asyncio.timeout(server.connect_timeout + server.call_timeout):
            async with self._connect(server_id) as client:
                listed = await client.list_tools()
        return [
            ToolDefinition(
                name=f"{server_id}.{tool.name}",
                description=tool.description or "",
                parameters=tool.input_schema or {"type": "object"},
            )
            for tool in listed.tools
        ]

    async def list_tools(
        self, servers: Sequence[str], cached: Mapping[str, CachedToolList] | None = None
    ) -> ToolListing:
        """Tools of ``servers`` from the Firestore cache, fetching the stale ones."""
        enabled = [s for s in servers if self._config.mcp_servers[s].enabled]
        listing = ToolListing(
            unavailable={s: "disabled in configuration" for s in servers if s not in enabled}
        )
        if cached is None:
            cached = await self._store.get_tool_lists(enabled)
        now = utcnow()
        fresh: dict[str, list[ToolDefinition]] = {}
        stale: list[str] = []
        for server_id in enabled:
            entry = cached.get(server_id)
            ttl = timedelta(seconds=self._config.mcp_servers[server_id].tool_list_ttl)
            if entry is not None and entry.fetched_at + ttl > now:
                fresh[server_id] = entry.tools
            else:
                stale.append(server_id)
        fetched = await asyncio.gather(
            *(self._fetch_tools(s) for s in stale), return_exceptions=True
        )
        for server_id, outcome in zip(stale, fetched, strict=True):
            if isinstance(outcome, BaseException):
                reason = _describe(outcome)
                logger.warning("MCP server %s is unavailable: %s", server_id, reason)
                listing.unavailable[server_id] = reason
            else:
                fresh[server_id] = outcome
                await self._store.save_tool_list(server_id, outcome)
        for server_id in enabled:
            listing.tools.extend(fresh.get(server_id, []))
        return listing

    # ─── calling ─────────────────────────────────────────────────────────────

    async def call_tools(self, calls: Sequence[ToolCall], listing: ToolListing) -> list[ToolResult]:
        """Run every call concurrently, one connection per server; failures are results."""
        results: dict[str, ToolResult] = {}
        by_server: dict[str, list[tuple[ToolCall, dict[str, Any]]]] = {}
        for call in calls:
            try:
                _, arguments = check_call(call, listing)
            except ValueError as e:
                results[call.id] = error_result(call, str(e))
                continue
            by_server.setdefault(call.name.split(".", 1)[0], []).append((call, arguments))
        server_results = await asyncio.gather(
            *(self._call_on_server(server_id, batch) for server_id, batch in by_server.items())
        )
        for batch_results in server_results:
            results.update((r.call_id, r) for r in batch_results)
        return [results[call.id] for call in calls]

    async def _call_on_server(
        self, server_id: str, batch: list[tuple[ToolCall, dict[str, Any]]]
    ) -> list[ToolResult]:
        server = self._config.mcp_servers[server_id]
        started = time.perf_counter()
        try:
            async with asyncio.timeout(server.connect_timeout):
                connection = self._connect(server_id)
                client = await connection.__aenter__()
        except Exception as e:
            elapsed = (time.perf_counter() - started) * 1000
            reason = f"cannot connect to MCP server {server_id!r}: {_describe(e)}"
            return [error_result(call, reason, duration_ms=elapsed) for call, _ in batch]
        try:
            return list(
                await asyncio.gather(
                    *(self._traced_call(client, server, call, args) for call, args in batch)
                )
            )
        finally:
            try:
                await connection.__aexit__(None, None, None)
            except Exception:  # closing a broken connection must not lose the results
                logger.warning("closing MCP connection to %s failed", server_id, exc_info=True)

    async def _traced_call(
        self, client: Client, server: MCPServerConfig, call: ToolCall, arguments: dict[str, Any]
    ) -> ToolResult:
        """:meth:`_call_one` in a ``tools/call {tool}`` span (GenAI execute_tool + MCP)."""
        server_id, tool = call.name.split(".", 1)
        with telemetry.mcp_tool_span(
            tool, server=server_id, call_id=call.id, transport=server.transport
        ) as span:
            result = await self._call_one(client, server, call, arguments)
            if result.is_error:
                span.tool_error(result.error)
        return result

    async def _call_one(
        self, client: Client, server: MCPServerConfig, call: ToolCall, arguments: dict[str, Any]
    ) -> ToolResult:
        server_id, tool = call.name.split(".", 1)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(server.call_timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            elapsed = (time.perf_counter() - started) * 1000
            return error_result(
                call, f"timed out after {server.call_timeout:g}s", duration_ms=elapsed
            )
        except Exception as e:
            elapsed = (time.perf_counter() - started) * 1000
            return error_result(call, _describe(e), duration_ms=elapsed)
        elapsed = (time.perf_counter() - started) * 1000
        text, masked = self._mask(result_text(result), server_id)
        return ToolResult(
            call_id=call.id,
            name=call.name,
            arguments=arguments,
            content=text,
            full_content=text,
            is_error=bool(result.is_error),
            error=text if result.is_error else None,
            duration_ms=elapsed,
            masked=masked,
        )


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__

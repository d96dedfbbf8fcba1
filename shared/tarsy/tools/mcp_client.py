"""The tool executor on MCP servers (the ``mcp`` SDK's client).

Tool lists are cached in Firestore (``mcp_tool_lists/{server}``) with the
server's TTL, so most steps do not connect just to list tools, and no list is
kept in process memory between invocations (invariant 2). Calls of one
iteration run concurrently, one connection per server, each with its own
timeout; every failure becomes an observation for the model.

Transient failures (the server unreachable, an HTTP 5xx/408/429, a timeout)
are retried with exponential backoff and jitter (tenacity), each retry on a
fresh connection and only for the calls that failed so, as long as the step's
budget can hold another attempt (:class:`~tarsy.config.schema.MCPRetryPolicy`).
A tool's own error result is never retried. The SDK turns an HTTP error
status into a generic JSON-RPC error, so each connection's HTTP client notes
the statuses it saw, which tells a 503 from a 403.

The SDK is imported where a connection is made, not with this module: its
package loads its server side too (about 0.7 s on a cold step), and a step whose
tool lists are fresh in the cache and whose model calls no tool never connects.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt, wait_random_exponential

from tarsy import telemetry
from tarsy.config.schema import MCPServerConfig, TarsyConfig
from tarsy.errors import TransientError
from tarsy.llm.base import ToolDefinition
from tarsy.models import ToolCall, utcnow
from tarsy.persistence.ports import ToolListCache
from tarsy.secrets import resolve, resolve_all
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList, ToolListing, ToolResult, check_call, error_result
from tarsy.tools.id_token import IdTokenSource, default_audience, id_tokens
from tarsy.tools.masking import Masker
from tarsy.tools.mcp_pool import ConnectionPool, Held

if TYPE_CHECKING:
    from mcp import types as mcp_types
    from mcp.client import Client

logger = logging.getLogger(__name__)

# HTTP statuses worth another attempt: the server is starting, overloaded or timed out.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# The mcp SDK's stand-in for a non-JSON HTTP error answer (its INTERNAL_ERROR code).
_STATUS_STAND_IN = "Server returned an error response"


EMPTY_RESULT = (
    "(The call succeeded and returned no output: for a list, nothing matched its filters; "
    "list without them, or get the resource by its name.)"
)


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text of a tool result: text parts joined, other parts named, structured as JSON."""
    from mcp import types as mcp_types

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
    text = "\n".join(pieces)
    # kubernetes-mcp-server answers a list that matched nothing with no text at all; an
    # empty observation left a small model guessing (it read it as "the namespace is gone").
    return text if text.strip() else EMPTY_RESULT


@dataclass
class _Statuses:
    """HTTP error statuses one connection received (the SDK does not pass them on)."""

    seen: set[int] = field(default_factory=set)

    async def note(self, response: Any) -> None:
        if response.status_code >= 400:
            self.seen.add(int(response.status_code))

    @property
    def retryable(self) -> bool:
        return bool(self.seen & RETRYABLE_STATUSES)


def is_transient(error: BaseException, statuses: _Statuses | None = None) -> bool:
    """Whether another attempt may succeed where ``error`` failed.

    Args:
        error: What a connection, listing or call raised (exception groups are searched).
        statuses: The HTTP error statuses its connection received, if any.

    Returns:
        True for timeouts, unreachable servers and closed connections, an ID
        token endpoint that could not be reached, and the SDK's generic error
        for an HTTP answer whose status is retryable (5xx, 408, 429).
    """
    if isinstance(error, BaseExceptionGroup):
        return any(is_transient(e, statuses) for e in error.exceptions)
    if isinstance(error, TimeoutError | ConnectionError | TransientError):
        return True
    import httpx2
    from mcp import types as mcp_types
    from mcp.shared.exceptions import MCPError

    if isinstance(error, httpx2.TransportError):  # connect, read, write errors and timeouts
        return True
    if isinstance(error, httpx2.HTTPStatusError):
        return error.response.status_code in RETRYABLE_STATUSES
    if isinstance(error, MCPError):
        if error.error.code == mcp_types.CONNECTION_CLOSED:
            return True
        return (
            error.error.message == _STATUS_STAND_IN
            and statuses is not None
            and (statuses.retryable)
        )
    return False


class _RetryLater(Exception):
    """An attempt left calls that failed transiently; their results so far ride along."""

    def __init__(self, results: dict[str, ToolResult]) -> None:
        super().__init__(f"{len(results)} call(s) failed transiently")
        self.results = results


class MCPToolExecutor:
    """Lists and calls tools on the MCP servers of the configuration."""

    def __init__(
        self,
        config: TarsyConfig,
        settings: Settings,
        store: ToolListCache,
        *,
        tokens: IdTokenSource | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        warm: bool = False,
    ) -> None:
        self._config = config
        # With ``warm``, connections stay open across steps (one per server, this process).
        self.pool: ConnectionPool[Client, _Statuses] | None = (
            ConnectionPool(self._session) if warm else None
        )
        self._settings = settings
        self._store = store
        self._tokens = tokens or id_tokens()
        # The backoff between attempts, and the clock the step's budget is read on.
        self._sleep = sleep
        self._clock = clock
        # Compiled once per process: pure functions of the (immutable) configuration.
        self._maskers = {
            server_id: Masker(server.masking) for server_id, server in config.mcp_servers.items()
        }

    def _mask(self, text: str, server_id: str) -> tuple[str, dict[str, int]]:
        """Mask a result with its server's masking config (invariant 5)."""
        result = self._maskers[server_id].mask(text)
        return result.text, dict(result.counts)

    # ─── connections ─────────────────────────────────────────────────────────

    @asynccontextmanager
    async def _session(self, server_id: str, statuses: _Statuses) -> AsyncIterator[Client]:
        """One connected MCP session; ``statuses`` collects its HTTP error statuses."""
        from mcp.client import Client

        server = self._config.mcp_servers[server_id]
        if server.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters

            assert server.command is not None
            target = StdioServerParameters(
                # "python" is this process's interpreter, so bundled servers run as installed.
                command=sys.executable if server.command == "python" else server.command,
                args=list(server.args),
                env=resolve_all(server.env, self._settings) or None,
            )
            async with Client(target, read_timeout_seconds=server.call_timeout) as client:
                yield client
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert server.url is not None
        url = resolve(server.url, self._settings)
        headers = resolve_all(server.headers, self._settings)
        if server.auth == "google-id-token":
            token = await self._tokens.token(server.audience or default_audience(url))
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx2.Timeout(server.connect_timeout, read=server.call_timeout)
        async with (
            httpx2.AsyncClient(
                headers=headers, timeout=timeout, event_hooks={"response": [statuses.note]}
            ) as http,
            Client(
                streamable_http_client(url, http_client=http),
                read_timeout_seconds=server.call_timeout,
            ) as client,
        ):
            yield client

    async def _connect(
        self, server_id: str, server: MCPServerConfig, statuses: _Statuses
    ) -> _Connection:
        """A connection for one attempt: the warm one, else a new one (within connect_timeout).

        ``statuses`` collects the HTTP statuses of a new connection's handshake.
        """
        if self.pool is not None and server.keep_warm:
            held = await self.pool.acquire(server_id, server.connect_timeout, statuses)
            return _Connection(held.client, held.state, self.pool, server_id, held)
        opened = self._session(server_id, statuses)
        async with asyncio.timeout(server.connect_timeout):
            client = await opened.__aenter__()
        return _Connection(client, statuses, None, server_id, opened)

    def _retrying(
        self, server: MCPServerConfig, budget: float | None, server_id: str
    ) -> AsyncRetrying:
        """Attempts at one server: transient failures only, while the budget holds one more."""
        policy = server.retry
        backoff = wait_random_exponential(multiplier=policy.initial_delay, max=policy.max_delay)
        one_attempt = server.connect_timeout + server.call_timeout

        def should_retry(state: RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome else None
            if error is None or not (isinstance(error, _RetryLater) or is_transient(error)):
                return False
            if budget is None:
                return True
            # The longest backoff this attempt may draw (the draw itself is random).
            longest = min(policy.max_delay, policy.initial_delay * 2.0**state.attempt_number)
            return self._clock() + longest + one_attempt <= budget

        def log_retry(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            delay = state.next_action.sleep if state.next_action else 0.0
            logger.warning(
                "MCP server %s: attempt %s failed (%s); retrying in %.1fs",
                server_id, state.attempt_number, _describe(error) if error else "?", delay,
            )  # fmt: skip

        return AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=backoff,
            retry=should_retry,
            before_sleep=log_retry,
            sleep=self._sleep,
            reraise=True,
        )

    # ─── listing ─────────────────────────────────────────────────────────────

    async def _fetch_tools(self, server_id: str, budget: float | None) -> list[ToolDefinition]:
        server = self._config.mcp_servers[server_id]
        async for attempt in self._retrying(server, budget, server_id):
            with attempt:
                connection: _Connection | None = None
                statuses = _Statuses()
                try:
                    async with asyncio.timeout(server.connect_timeout + server.call_timeout):
                        connection = await self._connect(server_id, server, statuses)
                        listed = await connection.client.list_tools()
                except Exception as e:
                    if connection is not None:
                        statuses = connection.statuses
                        await connection.release(broken=True)
                    if is_transient(e, statuses):
                        raise TransientError(_describe(e)) from e
                    raise
                await connection.release(broken=False)
        return [
            ToolDefinition(
                name=f"{server_id}.{tool.name}",
                description=tool.description or "",
                parameters=tool.input_schema or {"type": "object"},
            )
            for tool in listed.tools
        ]

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
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
            *(self._fetch_tools(s, budget) for s in stale), return_exceptions=True
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

    async def call_tools(
        self, calls: Sequence[ToolCall], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        """Run every call concurrently, one connection per server; failures are results.

        Args:
            calls: The model's calls.
            listing: The tools offered this step (an unlisted tool is refused).
            budget: The step's ``time.monotonic()`` deadline; no retry starts past it.

        Returns:
            One result per call, in order.
        """
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
            *(
                self._call_on_server(server_id, batch, budget)
                for server_id, batch in by_server.items()
            )
        )
        for batch_results in server_results:
            results.update(batch_results)
        return [results[call.id] for call in calls]

    async def _call_on_server(
        self,
        server_id: str,
        batch: list[tuple[ToolCall, dict[str, Any]]],
        budget: float | None,
    ) -> dict[str, ToolResult]:
        """The batch's results, retrying on fresh connections the calls that failed transiently."""
        server = self._config.mcp_servers[server_id]
        done: dict[str, ToolResult] = {}
        pending = list(batch)
        attempts = 0
        try:
            async for attempt in self._retrying(server, budget, server_id):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    outcomes = await self._attempt(server_id, server, pending)
                    retry = {cid: r for cid, (r, transient) in outcomes.items() if transient}
                    done.update(
                        (cid, r) for cid, (r, transient) in outcomes.items() if not transient
                    )
                    pending = [(call, args) for call, args in pending if call.id in retry]
                    if retry:
                        raise _RetryLater(retry)
        except _RetryLater as gave_up:
            for call_id, result in gave_up.results.items():
                done[call_id] = _after_attempts(result, attempts)
        return done

    async def _attempt(
        self,
        server_id: str,
        server: MCPServerConfig,
        batch: list[tuple[ToolCall, dict[str, Any]]],
    ) -> dict[str, tuple[ToolResult, bool]]:
        """One connection, the batch's calls at once: ``{call_id: (result, transient)}``."""
        started = time.perf_counter()
        statuses = _Statuses()
        try:
            connection = await self._connect(server_id, server, statuses)
        except Exception as e:
            elapsed = (time.perf_counter() - started) * 1000
            reason = f"cannot connect to MCP server {server_id!r}: {_describe(e)}"
            transient = is_transient(e, statuses)
            return {
                call.id: (error_result(call, reason, duration_ms=elapsed), transient)
                for call, _ in batch
            }
        broken = True
        try:
            outcomes = await asyncio.gather(
                *(
                    self._traced_call(connection.client, server, call, args, connection.statuses)
                    for call, args in batch
                )
            )
            # A transient failure may be the connection's: the retry gets a fresh one.
            broken = any(transient for _, transient in outcomes)
            return {call.id: outcome for (call, _), outcome in zip(batch, outcomes, strict=True)}
        finally:
            await connection.release(broken=broken)

    async def _traced_call(
        self,
        client: Client,
        server: MCPServerConfig,
        call: ToolCall,
        arguments: dict[str, Any],
        statuses: _Statuses,
    ) -> tuple[ToolResult, bool]:
        """:meth:`_call_one` in a ``tools/call {tool}`` span (GenAI execute_tool + MCP)."""
        server_id, tool = call.name.split(".", 1)
        with telemetry.mcp_tool_span(
            tool, server=server_id, call_id=call.id, transport=server.transport
        ) as span:
            result, transient = await self._call_one(client, server, call, arguments, statuses)
            if result.is_error:
                span.tool_error(result.error)
        return result, transient

    async def _call_one(
        self,
        client: Client,
        server: MCPServerConfig,
        call: ToolCall,
        arguments: dict[str, Any],
        statuses: _Statuses,
    ) -> tuple[ToolResult, bool]:
        server_id, tool = call.name.split(".", 1)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(server.call_timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            elapsed = (time.perf_counter() - started) * 1000
            reason = f"timed out after {server.call_timeout:g}s"
            return error_result(call, reason, duration_ms=elapsed), True
        except Exception as e:
            elapsed = (time.perf_counter() - started) * 1000
            return error_result(call, _describe(e), duration_ms=elapsed), is_transient(e, statuses)
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
        ), False


def _after_attempts(result: ToolResult, attempts: int) -> ToolResult:
    """A transient failure's result once retries are over: it says how often it was tried."""
    if attempts <= 1:
        return result
    note = f" (failed {attempts} attempts)"
    return result.model_copy(
        update={
            "content": result.content + note,
            "full_content": result.full_content + note,
            "error": (result.error or result.content) + note,
        }
    )


def _describe(error: BaseException) -> str:
    if isinstance(error, TransientError) and error.__cause__ is not None:
        return _describe(error.__cause__)  # the wrapper only marked it for a retry
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


@dataclass
class _Connection:
    """A client for one attempt, and how to give it back."""

    client: Client
    statuses: _Statuses
    pool: ConnectionPool[Client, _Statuses] | None
    server_id: str
    handle: Held[Client, _Statuses] | AbstractAsyncContextManager[Client]

    async def release(self, *, broken: bool) -> None:
        """Keep a warm connection unless ``broken``; close a one-off connection."""
        if self.pool is not None:
            assert isinstance(self.handle, Held)
            if broken:
                self.pool.discard(self.server_id, self.handle)
            return
        assert not isinstance(self.handle, Held)
        try:
            await self.handle.__aexit__(None, None, None)
        except Exception:  # closing a broken connection must not lose the results
            logger.warning("closing MCP connection to %s failed", self.server_id, exc_info=True)

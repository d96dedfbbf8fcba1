"""The tool-executor interface that strategies use, and the pure rules around tool calls.

A strategy never calls a tool itself: the step function (the I/O shell) asks
the executor for the tools an agent may use, lets the strategy decide which
calls to make, runs them all at once through the executor, and hands the
results back to the strategy. ``tarsy.tools.mcp_client`` implements the interface
on MCP servers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.llm.base import ToolDefinition
from tarsy.models import ToolCall


class ToolListing(DeferredModel):
    """The tools an agent may call this step, and the servers that could not be reached."""

    tools: list[ToolDefinition] = Field(default_factory=list)
    unavailable: dict[str, str] = Field(default_factory=dict, description="server → reason")

    def get(self, name: str) -> ToolDefinition | None:
        """The tool with canonical name ``name``, if listed."""
        return next((tool for tool in self.tools if tool.name == name), None)

    @property
    def names(self) -> list[str]:
        """Canonical names of the listed tools."""
        return [tool.name for tool in self.tools]


class ToolResult(DeferredModel):
    """What one tool call produced, as the model will see it (``content``) and in full."""

    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    content: str
    full_content: str
    is_error: bool = False
    error: str | None = None
    duration_ms: float = 0.0
    shown_as: Literal["full", "summarized", "truncated"] = "full"
    masked: dict[str, int] = Field(default_factory=dict)

    @property
    def server(self) -> str:
        """The MCP server part of the canonical name ("" for a built-in tool)."""
        return self.name.rpartition(".")[0]

    @property
    def tool(self) -> str:
        """The tool part of the canonical name."""
        return self.name.rpartition(".")[2]


class CachedToolList(DeferredModel):
    """``mcp_tool_lists/{server}``: a server's tools as last listed."""

    server: str
    tools: list[ToolDefinition]
    fetched_at: datetime


class ToolExecutor(Protocol):
    """Lists and runs tools for one agent execution."""

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
    ) -> ToolListing:
        """The tools of ``servers``; a server that is down is reported, not raised.

        ``cached`` holds the cache entries the step already read with its state
        (saving a round trip); without it the executor reads the cache itself.
        ``budget`` is the step's ``time.monotonic()`` deadline: retries stop before it.
        """
        ...

    async def call_tools(
        self, calls: Sequence[ToolCall], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        """Run ``calls`` concurrently; every failure becomes an error result, in call order.

        Transient failures may be retried while ``budget`` (a ``time.monotonic()``
        deadline) allows.
        """
        ...


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a JSON object (raises ValueError with a model-readable reason)."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as e:
        raise ValueError(f"arguments are not valid JSON: {e}") from e
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return arguments


def check_call(call: ToolCall, listing: ToolListing) -> tuple[ToolDefinition, dict[str, Any]]:
    """Validate a call against the listed tools and its schema; raise ValueError if it is bad."""
    tool = listing.get(call.name)
    if tool is None:
        server = call.name.split(".", 1)[0]
        if server in listing.unavailable:
            raise ValueError(
                f"server {server!r} is unavailable ({listing.unavailable[server]}); "
                "use another tool or conclude with what you have"
            )
        available = ", ".join(listing.names) or "none"
        raise ValueError(f"unknown tool {call.name!r}; available tools: {available}")
    arguments = parse_arguments(call)
    # Imported on the first tool call: ingest and api never validate tool arguments,
    # and jsonschema is a sizeable share of their cold start.
    import jsonschema

    validator = _validator(json.dumps(tool.parameters, sort_keys=True))
    if validator is None:
        return tool, arguments  # the server's schema is broken; let the server judge
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        raise ValueError(f"invalid arguments for {call.name}: {where}: {error.message}")
    return tool, arguments


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    """A checked validator for one tool schema, or None if the schema is broken.

    Cached by the schema's text: checking a schema against its meta-schema costs
    more than validating the arguments, and a server lists the same schemas every
    step. Derived from the schema alone, so nothing of an investigation is kept.
    """
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return cls(schema)


def error_result(call: ToolCall, message: str, *, duration_ms: float = 0.0) -> ToolResult:
    """A failed call, as an observation the model reads."""
    try:
        arguments = parse_arguments(call)
    except ValueError:
        arguments = {}
    text = f"Error calling {call.name}: {message}"
    return ToolResult(
        call_id=call.id,
        name=call.name,
        arguments=arguments,
        content=text,
        full_content=text,
        is_error=True,
        error=message,
        duration_ms=duration_ms,
    )


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters per token)."""
    return (len(text) + 3) // 4


def truncate_for_model(text: str, max_tokens: int) -> str:
    """Cut ``text`` to about ``max_tokens`` tokens with a visible marker."""
    limit = max_tokens * 4
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[… truncated: {len(text) - limit} more characters not shown; "
        "ask for a narrower query if you need them]"
    )

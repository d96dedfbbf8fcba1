"""An MCP server (stdio) whose tools misbehave on purpose, for the tool-layer tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

ENV_DUMP = (Path(__file__).parents[1] / "unit" / "masking" / "corpus" / "env-dump.txt").read_text()

server = MCPServer("trouble")


@server.tool()
async def nap(seconds: float) -> str:
    """Sleep, then say when (wall-clock start and end, to show calls overlapping)."""
    start = time.time()
    await asyncio.sleep(seconds)
    return f"slept {seconds}s from {start:.3f} to {time.time():.3f}"


@server.tool()
async def hang() -> str:
    """Never answer in time."""
    await asyncio.sleep(3600)
    return "unreachable"


@server.tool()
async def hang_marked(marker: str) -> str:
    """Write ``marker`` (a file path), so a test knows the call is in flight; never answer."""
    await asyncio.to_thread(Path(marker).write_text, "called")
    await asyncio.sleep(3600)
    return "unreachable"


@server.tool()
def big(megabytes: int) -> str:
    """A result of the given size."""
    line = 'level=info msg="request served" path=/api/v1/orders status=200\n'
    return line * (megabytes * 1024 * 1024 // len(line) + 1)


@server.tool()
def echo(text: str) -> str:
    """The text it was given: a tool result of the test's choosing."""
    return text


@server.tool()
def env_dump() -> str:
    """The environment of a pod, secrets included."""
    return ENV_DUMP


if __name__ == "__main__":
    server.run("stdio")

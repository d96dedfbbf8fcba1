"""A collector a user adds for another MCP server: its result reaches the detections.

Evidence is read by the shape a collector call declares, never by the tool's
name: a team's own server (``inventory_mcp_server.py``, run over stdio by the
real MCP executor) is configured in a user file with a chain, an agent and a
collector whose call says ``shape: object``; the gather step reads the pod it
answers and the crash-loop check finds it. No emulator is needed: the tool
lists are cached in memory.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tarsy.config import load_config
from tarsy.engine.gathering import gather_evidence
from tarsy.errors import ConfigError
from tarsy.llm.base import ToolDefinition
from tarsy.models import Session, utcnow
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList
from tarsy.tools.mcp_client import MCPToolExecutor

SERVER = Path(__file__).with_name("inventory_mcp_server.py")
USER_FILE = f"""
mcp_servers:
  inventory:
    transport: stdio
    command: {json.dumps(sys.executable)}
    args: [{json.dumps(str(SERVER))}]
agents:
  inventory-investigator:
    instructions: Investigate with the inventory.
    mcp_servers: [inventory]
agent_chains:
  inventory-chain:
    alert_types: [inventory]
    stages: [{{name: investigate, agent: inventory-investigator}}]
collectors:
  inventory-pod:
    description: The pod the alert names, as the inventory describes it.
    server: inventory
    for_each: alert.pod
    calls:
      - tool: describe
        shape: object
        arguments: {{ns: "{{namespace}}", workload_pod: "{{name}}"}}
"""
ALERT = {"labels": {"alertname": "LedgerDown", "namespace": "finance", "pod": "ledger-0"}}


class MemoryToolLists:
    """The tool-list cache port, in memory (the tests' store is not needed here)."""

    def __init__(self) -> None:
        self.lists: dict[str, CachedToolList] = {}

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        return {s: self.lists[s] for s in servers if s in self.lists}

    async def save_tool_list(self, server: str, tools: Sequence[ToolDefinition]) -> None:
        self.lists[server] = CachedToolList(server=server, tools=list(tools), fetched_at=utcnow())


async def test_a_user_collector_on_another_mcp_server_reaches_the_detections() -> None:
    config = load_config(Settings(), user_text=USER_FILE)
    agent = config.resolve("inventory-chain", 0, 0)
    executor = MCPToolExecutor(config, Settings(), MemoryToolLists())
    listing = await executor.list_tools(agent.mcp_servers)
    session = Session(
        session_id="s-1", alert_type="inventory", alert_data=json.dumps(ALERT),
        chain_id="inventory-chain",
    )  # fmt: skip
    gathered = await gather_evidence(config, agent, session, executor, listing)
    [call] = [c for c in gathered.calls if c.collector == "inventory-pod"]
    assert call.result.name == "inventory.describe" and not call.result.is_error
    assert call.read_as == "object"
    crash = [d for d in gathered.detections if d.check == "crash_loop"]
    assert crash and "ledger-0" in crash[0].finding
    assert crash[0].evidence == [call.result.call_id]


def test_a_call_to_an_unknown_tool_must_say_what_its_result_is() -> None:
    undeclared = USER_FILE.replace("        shape: object\n", "")
    assert undeclared != USER_FILE
    with pytest.raises(ConfigError, match="say what its result is with shape"):
        load_config(Settings(), user_text=undeclared)

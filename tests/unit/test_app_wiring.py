"""The per-process wiring builds the MCP tool executor only for the step.

Ingest and the api never call a tool; building the executor imports the MCP SDK
(and the HTTP server stack it brings), which cost their first request about two
seconds on this machine. The step loads the SDK only when it connects to a
server: a step whose tool lists are fresh in Firestore and whose model calls no
tool (a summary, a final answer) never pays its 0.7 s. The wiring runs in a fresh
interpreter, so that what the wiring imports is what the process has loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
mcp_servers:
  kubernetes: {url: "http://127.0.0.1:9/mcp"}
agents:
  k8s:
    instructions: Look at pods.
    mcp_servers: [kubernetes]
agent_chains:
  kube:
    alert_types: [PodCrashLooping]
    stages:
      - name: investigate
        agents: [{name: k8s}]
"""

# Builds the process's dependencies as an entry point does (without and then with the
# tools), and reports what it got and whether the MCP SDK was loaded at each point.
_PROBE = """
import asyncio, json, sys
from tarsy.app import get_deps
from tarsy.llm.base import ToolDefinition
from tarsy.models import utcnow
from tarsy.tools.base import CachedToolList

async def main():
    first = await get_deps()
    report = {"first_tools": first.tools is not None, "mcp_after_first": "mcp" in sys.modules}
    with_tools = await get_deps(tools=True)
    again = await get_deps()
    report.update(
        tools=type(with_tools.tools).__name__,
        same_config=with_tools.config is first.config,
        same_store=with_tools.store is first.store,
        kept=again is with_tools,
        mcp_after_tools=("mcp" in sys.modules),
    )
    fresh = CachedToolList(
        server="kubernetes",
        tools=[ToolDefinition(name="kubernetes.pods_list", description="", parameters={})],
        fetched_at=utcnow(),
    )
    listing = await with_tools.tools.list_tools(["kubernetes"], {"kubernetes": fresh})
    report.update(
        listed=[tool.name for tool in listing.tools],
        mcp_after_cached_listing=("mcp" in sys.modules),
    )
    # Nothing listens on the server's address: the listing's fetch connects and fails
    # (budget=0, a deadline already past: one attempt, no retry).
    stale = await with_tools.tools.list_tools(["kubernetes"], {}, budget=0)
    report.update(
        unavailable=sorted(stale.unavailable), mcp_after_connecting=("mcp" in sys.modules)
    )
    print(json.dumps(report))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One fresh interpreter's wiring, shared by the tests below."""
    config = tmp_path_factory.mktemp("wiring") / "tarsy.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TARSY_")},
        "TARSY_CONFIG_PATH": str(config),
        "GOOGLE_CLOUD_PROJECT": "wiring-test",
        # Clients are only made here, never used: nothing listens on these.
        "FIRESTORE_EMULATOR_HOST": "127.0.0.1:9",
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:9",
        "GEMINI_API_KEY": "unused",
        "TARSY_LOG_FORMAT": "console",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_ingest_and_the_api_get_no_tool_executor_and_never_load_the_mcp_sdk(
    report: dict[str, object],
) -> None:
    assert report["first_tools"] is False
    assert report["mcp_after_first"] is False


def test_the_step_gets_the_executor_beside_the_same_settings_config_and_store(
    report: dict[str, object],
) -> None:
    assert report["tools"] == "MCPToolExecutor"
    assert report["same_config"] is True and report["same_store"] is True
    # Later calls without asking for tools keep the executor the process already has.
    assert report["kept"] is True


def test_the_step_loads_the_mcp_sdk_only_when_it_connects_to_a_server(
    report: dict[str, object],
) -> None:
    assert report["mcp_after_tools"] is False
    # A fresh cached list is enough to give the model its tools.
    assert report["listed"] == ["kubernetes.pods_list"]
    assert report["mcp_after_cached_listing"] is False
    assert report["unavailable"] == ["kubernetes"]
    assert report["mcp_after_connecting"] is True

"""A cancel cuts through a running step (issue 26, item 1; issue 31: backoff and tool calls).

The step runs in process against the emulators; the model is the fake Gemini
server, reached by the real google-genai SDK, told to hang for five minutes,
or to answer 429 with a Retry-After far beyond the test, or to call a tool of a
real MCP server (stdio) that never answers. The cancel goes through the api's
own handler while the call, the backoff or the tool call is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tarsy.app import Deps
from tarsy.commands.sessions import cancel
from tarsy.config import load_config
from tarsy.config.loader import merge_config
from tarsy.engine.steps import handle
from tarsy.models import ExecutionStatus, StepMessage, TimelineEventType
from tarsy.persistence.store import Store
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.localstack.stack import Stack

from . import in_process
from .conftest import stack_config_path
from .polling import until

HANG_SECONDS = 300.0  # far beyond anything the test waits for


async def test_a_cancel_cuts_a_hanging_model_call_and_ends_the_session_cancelled(
    deps: Deps, store: Store, fake_gemini: FakeGemini
) -> None:
    fake_gemini.responder = lambda call: FakeReply(text="never seen", delay=HANG_SECONDS)
    session = await in_process.new_session(store, alert_type="generic", alert_data="5xx burst")
    bus = RecordingBus()
    local = replace(deps, bus=bus)
    await handle(StepMessage(session_id=session.session_id, kind="start_session"), local)
    [agent_step] = bus.published
    bus.published.clear()

    running = asyncio.create_task(handle(agent_step, local))
    await until(lambda: len(fake_gemini.calls) == 1, "the model call")
    asked = time.monotonic()
    await cancel(deps, session.session_id)
    # The step ends long before the model would have answered.
    await asyncio.wait_for(running, timeout=60)
    took = time.monotonic() - asked

    done = await store.get_session(session.session_id)
    assert done is not None and done.status is ExecutionStatus.CANCELLED
    execution = await store.get_execution(agent_step.execution_id)
    assert execution is not None and execution.status is ExecutionStatus.CANCELLED
    assert bus.published == []  # nothing follows a cancelled step
    assert took < HANG_SECONDS / 10, f"the cancel took {took:.1f} s"


# ─── a cancel during a retry's backoff, and during a tool call ────────────────

LONG_BACKOFF_S = 200.0  # a Retry-After the transport honours, far beyond the test


def with_config(deps: Deps, stack: Stack, extra: dict[str, Any]) -> Deps:
    """``deps`` with the stack's configuration plus ``extra`` (merged section by section)."""
    raw = yaml.safe_load(stack_config_path(stack).read_text())
    merged = merge_config(raw, extra, "test configuration")
    return replace(deps, config=load_config(deps.settings, user_text=yaml.safe_dump(merged)))


async def started(deps: Deps, store: Store, chain_id: str) -> tuple[StepMessage, RecordingBus]:
    """A session of chain ``chain_id`` started in process; its agent's first step, not yet run."""
    session = await in_process.new_session(
        store, alert_type=chain_id, alert_data="5xx burst", chain_id=chain_id
    )
    bus = RecordingBus()
    await handle(StepMessage(session_id=session.session_id, kind="start_session"),
                 replace(deps, bus=bus))  # fmt: skip
    [agent_step] = bus.published
    bus.published.clear()
    return agent_step, bus


async def test_a_cancel_during_a_retrys_backoff_ends_the_step_without_another_attempt(
    deps: Deps,
    store: Store,
    stack: Stack,
    fake_gemini: FakeGemini,
    caplog: pytest.LogCaptureFixture,
) -> None:
    patient = with_config(deps, stack, {
        "llm_providers": {"patient": {"backend": "google-native", "model": "gemini-2.5-flash",
                                      "retry": {"max_delay": LONG_BACKOFF_S}}},
        "agents": {"patient-agent": {"instructions": "Investigate.", "llm_provider": "patient"}},
        "agent_chains": {"cancel-backoff": {"alert_types": ["test-cancel-backoff"],
                                            "stages": [{"name": "s", "agent": "patient-agent"}]}},
    })  # fmt: skip
    fake_gemini.responder = lambda call: FakeReply(
        status=429, error_message="quota", retry_after=LONG_BACKOFF_S
    )
    agent_step, bus = await started(patient, store, "cancel-backoff")

    with caplog.at_level(logging.WARNING, logger="tarsy.llm.retry"):
        running = asyncio.create_task(handle(agent_step, replace(patient, bus=bus)))
        await until(
            lambda: any("retrying in 200.0s" in r.getMessage() for r in caplog.records),
            "the transport's backoff after a 429",
        )
        await cancel(deps, agent_step.session_id)
        await asyncio.wait_for(running, timeout=60)

    assert len(fake_gemini.calls) == 1  # the backoff was cut: no second attempt
    done = await store.get_session(agent_step.session_id)
    assert done is not None and done.status is ExecutionStatus.CANCELLED
    execution = await store.get_execution(agent_step.execution_id)
    assert execution is not None and execution.status is ExecutionStatus.CANCELLED
    assert bus.published == []


async def test_a_cancel_during_a_tool_call_ends_the_step_without_its_result(
    deps: Deps, store: Store, stack: Stack, fake_gemini: FakeGemini, tmp_path: Path
) -> None:
    slow = with_config(deps, stack, {
        "mcp_servers": {"slow": {"transport": "stdio", "command": sys.executable,
                                 "args": ["tests/integration/trouble_mcp_server.py"],
                                 "call_timeout": 300, "retry": {"max_attempts": 1}}},
        "agents": {"tool-agent": {"instructions": "Investigate.", "mcp_servers": ["slow"],
                                  "iteration_strategy": "native-thinking"}},
        "agent_chains": {"cancel-tool": {"alert_types": ["test-cancel-tool"],
                                         "stages": [{"name": "s", "agent": "tool-agent"}]}},
    })  # fmt: skip
    slow = replace(slow, tools=MCPToolExecutor(slow.config, slow.settings, store))
    marker = tmp_path / "in-flight"
    fake_gemini.responder = lambda call: FakeReply(
        tool_calls=[FakeToolCall(name="slow__hang_marked", args={"marker": str(marker)}, id="h")]
    )
    agent_step, bus = await started(slow, store, "cancel-tool")

    running = asyncio.create_task(handle(agent_step, replace(slow, bus=bus)))
    await until(marker.exists, "the tool call in flight")
    await cancel(deps, agent_step.session_id)
    await asyncio.wait_for(running, timeout=60)

    done = await store.get_session(agent_step.session_id)
    assert done is not None and done.status is ExecutionStatus.CANCELLED
    execution = await store.get_execution(agent_step.execution_id)
    assert execution is not None and execution.status is ExecutionStatus.CANCELLED
    timeline = await store.list_timeline(agent_step.execution_id)
    assert not [e for e in timeline if e.type is TimelineEventType.MCP_TOOL_CALL]
    assert bus.published == []

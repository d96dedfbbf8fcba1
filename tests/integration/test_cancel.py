"""A cancel cuts through a running step (issue 26, item 1).

The step runs in process against the emulators; the model is the fake Gemini
server, reached by the real google-genai SDK, told to hang for five minutes.
The cancel goes through the api's own handler while the call is in flight.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from tarsy.api.handlers import cancel
from tarsy.app import Deps
from tarsy.engine.steps import handle
from tarsy.models import ExecutionStatus, StepMessage
from tarsy.persistence.store import Store
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply

from . import in_process
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

"""A step that outlives its deliveries completes its session (issue 26, items 8 and 9).

Everything here is the real local stack: a duplicate of a running step's
message is pushed by Pub/Sub's emulator to the step function, which refuses it
(503: the lease is held), and dead letters are pushed by the emulator's
dead-letter subscription to the dead-letter function. How soon the emulator
gives up on the refused duplicate after its 5 attempts depends on its own
scheduling (seconds on a quiet machine, minutes beside CPU-bound work), so the
test forwards the dead letter itself, as Pub/Sub does: the step message with
its delivery count. The model is the fake Gemini, held on an event, so the
order of events is forced, not timed:

1. the investigation's model call hangs; a duplicate of its step message is
   refused, and its dead letter arrives while the first delivery still runs;
2. the call answers and the step commits; while the executive summary's call
   hangs, the same dead letter arrives again (the dead-letter subscription also
   delivers at least once). Before the fix, this late dead letter failed the
   running session ("after 5 delivery attempts"), the cause of issue 26's
   finished investigation reported as failed.
"""

from __future__ import annotations

import threading
from pathlib import Path

from google.cloud import pubsub_v1  # type: ignore[attr-defined]

from tarsy.app import Deps
from tarsy.engine.delivery import DELIVERY_COUNT
from tarsy.models import ExecutionStatus, StepMessage
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply
from tarsy_dev.localstack.stack import DEAD_LETTER_SUFFIX, MAX_DELIVERY_ATTEMPTS, Stack

from .conftest import Tap
from .polling import until

HOLD_SECONDS = 240.0  # how long a held model call waits at most; far beyond the test's needs
WAIT_SECONDS = 120.0  # each wait is for one push or one step: under a second when quiet


class HeldModel:
    """Answers each call in turn, but only once the test releases it."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.released = [threading.Event() for _ in answers]
        self.calls: list[FakeCall] = []

    def __call__(self, call: FakeCall) -> FakeReply:
        turn = len(self.calls)
        self.calls.append(call)
        self.released[turn].wait(HOLD_SECONDS)
        return FakeReply(text=self.answers[turn])

    def waiting(self) -> int:
        """How many calls have arrived (each is held until released)."""
        return len(self.calls)


def function_log(stack: Stack, name: str) -> Path:
    [process] = [p for p in stack.processes if p.name == name]
    return Path(process.log_path)


def forward(stack: Stack, dead_letter: pubsub_v1.types.PubsubMessage) -> None:
    """Publish ``dead_letter`` to the dead-letter topic, as Pub/Sub forwards one."""
    publisher = pubsub_v1.PublisherClient()
    try:
        topic = publisher.topic_path(stack.project_id, stack.steps_topic + DEAD_LETTER_SUFFIX)
        publisher.publish(topic, dead_letter.data, **dict(dead_letter.attributes)).result(
            timeout=60
        )
    finally:
        publisher.transport.close()


def logged(path: Path, *fragments: str) -> bool:
    return any(
        all(fragment in line for fragment in fragments)
        for line in path.read_text(errors="replace").splitlines()
    )


async def test_a_step_that_outlives_its_deliveries_completes_its_session(
    stack: Stack,
    client: TarsyClient,
    deps: Deps,
    store: Store,
    fake_gemini: FakeGemini,
    tap: Tap,
) -> None:
    model = HeldModel("The config map lost its DB_URL key.", "payments-api lost DB_URL.")
    fake_gemini.responder = model
    dead_letter_log = function_log(stack, "dead-letter")
    try:
        submitted = client.submit({"alert_type": "generic", "data": "payments-api 5xx burst"})
        await until(lambda: model.waiting() == 1, "the investigation's model call", WAIT_SECONDS)
        [published] = [
            m for m in tap.drain_raw() if StepMessage.model_validate_json(m.data).kind == "iterate"
        ]
        agent_step = StepMessage.model_validate_json(published.data)
        dead_letter = pubsub_v1.types.PubsubMessage(
            data=published.data,
            attributes={**published.attributes, DELIVERY_COUNT: str(MAX_DELIVERY_ATTEMPTS)},
        )

        # 1. A duplicate delivery while the step runs is refused; then its dead letter.
        await deps.bus.publish(agent_step)
        await until(
            lambda: logged(function_log(stack, "step"), "is leased", agent_step.execution_id),
            "the step function to refuse the duplicate",
            WAIT_SECONDS,
        )
        forward(stack, dead_letter)
        await until(
            lambda: logged(dead_letter_log, "holds its lease", agent_step.execution_id),
            "the dead-letter function to leave the leased step alone",
            WAIT_SECONDS,
        )

        # 2. The step commits; the same dead letter arrives again while the summary runs.
        model.released[0].set()
        await until(lambda: model.waiting() == 2, "the summary's model call", WAIT_SECONDS)
        execution = await store.get_execution(agent_step.execution_id)
        assert execution is not None and execution.status is ExecutionStatus.COMPLETED
        forward(stack, dead_letter)
        await until(
            lambda: (
                logged(dead_letter_log, "after its step was done", agent_step.execution_id)
                or logged(dead_letter_log, "could not be processed", agent_step.session_id)
            ),
            "the dead-letter function to handle the late dead letter",
            WAIT_SECONDS,
        )
        assert logged(dead_letter_log, "after its step was done", agent_step.execution_id)
        running = await store.get_session(submitted.session_id)
        assert running is not None and running.status is ExecutionStatus.ACTIVE
        assert running.error is None

        model.released[1].set()
        *_, view = client.watch(submitted.session_id, poll_interval=0.25, timeout=WAIT_SECONDS)
    finally:
        for event in model.released:
            event.set()  # never leave a held call behind for the next test

    assert view.status is ExecutionStatus.COMPLETED
    assert view.session["error"] is None
    assert view.session["final_analysis"] == "The config map lost its DB_URL key."
    assert view.session["executive_summary"] == "payments-api lost DB_URL."

"""Cloud Function ``step`` (Pub/Sub CloudEvent): run one step of an investigation.

Pub/Sub redelivers only when this function does not answer 2xx, so transient
failures are re-raised (``tarsy.engine.steps.handle`` records everything else and
returns). A duplicate that finds its execution leased by a live step is the
common, expected case: it is answered 503 through an HTTP exception, which
redelivers the message without an error traceback in the logs.
"""

from __future__ import annotations

import logging

import functions_framework
from cloudevents.http import CloudEvent
from pydantic import ValidationError
from werkzeug.exceptions import ServiceUnavailable

from tarsy import telemetry
from tarsy.app import get_deps
from tarsy.bus import PushedMessage, decode, pushed_message
from tarsy.engine import steps
from tarsy.errors import LeaseHeldError
from tarsy.runtime import run_sync

logger = logging.getLogger(__name__)


async def _run(pushed: PushedMessage) -> None:
    deps = await get_deps()
    telemetry.setup(deps.settings, "tarsy-step")
    try:
        message = decode(pushed.data)
    except ValidationError:
        logger.error("dropping a step message that does not parse: %r", pushed.data[:200])
        return
    # Continues the trace of the publish that sent the message (its attributes carry it).
    with telemetry.step_span(
        deps.settings.steps_topic,
        pushed.trace_context,
        session_id=message.session_id,
        execution_id=message.execution_id,
        kind=message.kind,
        step=message.step,
        stage=message.stage,
        message_id=pushed.message_id,
        retry_on=(LeaseHeldError,),
    ):
        await steps.handle(message, deps)


@functions_framework.cloud_event
def step(event: CloudEvent) -> None:
    """Entry point for messages on the steps topic."""
    try:
        run_sync(_run(pushed_message(event.get_data())))
    except LeaseHeldError as e:
        logger.warning("redelivering later: %s", e)
        raise ServiceUnavailable(str(e)) from None
    finally:
        telemetry.flush()


async def _dead_letter(pushed: PushedMessage) -> None:
    deps = await get_deps()
    telemetry.setup(deps.settings, "tarsy-step")
    try:
        message = decode(pushed.data)
    except ValidationError:
        logger.error("dead letter that does not parse: %r", pushed.data[:200])
        return
    attempts = pushed.attributes.get("CloudPubSubDeadLetterSourceDeliveryCount", "?")
    with telemetry.step_span(
        deps.settings.steps_topic,
        pushed.trace_context,
        session_id=message.session_id,
        execution_id=message.execution_id,
        kind="dead_letter",
        step=message.step,
        stage=message.stage,
        message_id=pushed.message_id,
    ):
        await steps.handle_dead_letter(message, deps, delivery_attempts=attempts)


@functions_framework.cloud_event
def dead_letter(event: CloudEvent) -> None:
    """Entry point for messages that exhausted their deliveries on the steps topic."""
    try:
        run_sync(_dead_letter(pushed_message(event.get_data())))
    finally:
        telemetry.flush()

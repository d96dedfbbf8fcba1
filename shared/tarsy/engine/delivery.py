"""A pushed Pub/Sub message, decoded and run inside its step span: the step function's body.

Design constraint: the step function has two entry points (the steps topic and
its dead letters) that must decode, trace and drop unreadable messages the same
way; this module does it once, so ``functions/step/main.py`` only maps the
result to what Pub/Sub understands.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from tarsy import telemetry
from tarsy.app import get_deps
from tarsy.bus import PushedMessage, decode
from tarsy.engine import steps
from tarsy.errors import LeaseHeldError

logger = logging.getLogger(__name__)

# Set by Pub/Sub on a dead-lettered message: how many deliveries it was given.
DELIVERY_COUNT = "CloudPubSubDeadLetterSourceDeliveryCount"


async def deliver(pushed: PushedMessage, *, dead_letter: bool = False) -> None:
    """Run a pushed step message (or its dead letter); a message that does not parse is dropped.

    Raises:
        LeaseHeldError: Another invocation runs this step; Pub/Sub must redeliver later.
        TransientError: Anything else worth a redelivery.
    """
    deps = await get_deps(tools=True)
    telemetry.setup(deps.settings, "tarsy-step")
    try:
        message = decode(pushed.data)
    except ValidationError:
        what = "dead letter" if dead_letter else "step message"
        logger.error("dropping a %s that does not parse: %r", what, pushed.data[:200])
        return
    # Continues the trace of the publish that sent the message (its attributes carry it).
    with telemetry.step_span(
        deps.settings.steps_topic,
        pushed.trace_context,
        session_id=message.session_id,
        execution_id=message.execution_id,
        kind="dead_letter" if dead_letter else message.kind,
        step=message.step,
        stage=message.stage,
        message_id=pushed.message_id,
        retry_on=() if dead_letter else (LeaseHeldError,),
    ):
        if dead_letter:
            attempts = pushed.attributes.get(DELIVERY_COUNT, "?")
            await steps.handle_dead_letter(message, deps, delivery_attempts=attempts)
        else:
            await steps.handle(message, deps)

"""Cloud Function ``step`` (Pub/Sub CloudEvent): run one step of an investigation.

Pub/Sub redelivers only when this function does not answer 2xx, so transient
failures are re-raised (``tarsy.steps.handle`` records everything else and
returns). A duplicate that finds its execution leased by a live step is the
common, expected case: it is answered 503 through an HTTP exception, which
redelivers the message without an error traceback in the logs.
"""

from __future__ import annotations

import base64
import logging

import functions_framework
from cloudevents.http import CloudEvent
from pydantic import ValidationError
from werkzeug.exceptions import ServiceUnavailable

from tarsy import steps
from tarsy.app import get_deps
from tarsy.bus import decode
from tarsy.errors import LeaseHeldError
from tarsy.runtime import run_sync

logger = logging.getLogger(__name__)


async def _run(data: bytes) -> None:
    deps = await get_deps()
    try:
        message = decode(data)
    except ValidationError:
        logger.error("dropping a step message that does not parse: %r", data[:200])
        return
    await steps.handle(message, deps)


@functions_framework.cloud_event
def step(event: CloudEvent) -> None:
    """Entry point for messages on the steps topic."""
    payload = event.get_data() or {}
    encoded = payload.get("message", {}).get("data", "")
    try:
        run_sync(_run(base64.b64decode(encoded)))
    except LeaseHeldError as e:
        logger.warning("redelivering later: %s", e)
        raise ServiceUnavailable(str(e)) from None


async def _dead_letter(data: bytes, attributes: dict[str, str]) -> None:
    deps = await get_deps()
    try:
        message = decode(data)
    except ValidationError:
        logger.error("dead letter that does not parse: %r", data[:200])
        return
    attempts = attributes.get("CloudPubSubDeadLetterSourceDeliveryCount", "?")
    await steps.handle_dead_letter(message, deps, delivery_attempts=attempts)


@functions_framework.cloud_event
def dead_letter(event: CloudEvent) -> None:
    """Entry point for messages that exhausted their deliveries on the steps topic."""
    payload = event.get_data() or {}
    message = payload.get("message", {})
    attributes = {str(k): str(v) for k, v in (message.get("attributes") or {}).items()}
    run_sync(_dead_letter(base64.b64decode(message.get("data", "")), attributes))

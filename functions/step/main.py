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
from werkzeug.exceptions import ServiceUnavailable

from tarsy import telemetry
from tarsy.bus import pushed_message
from tarsy.engine.delivery import deliver
from tarsy.errors import LeaseHeldError
from tarsy.runtime import run_sync

logger = logging.getLogger(__name__)


@functions_framework.cloud_event
def step(event: CloudEvent) -> None:
    """Entry point for messages on the steps topic."""
    try:
        run_sync(deliver(pushed_message(event.get_data())))
    except LeaseHeldError as e:
        logger.warning("redelivering later: %s", e)
        raise ServiceUnavailable(str(e)) from None
    finally:
        telemetry.flush()


@functions_framework.cloud_event
def dead_letter(event: CloudEvent) -> None:
    """Entry point for messages that exhausted their deliveries on the steps topic."""
    try:
        run_sync(deliver(pushed_message(event.get_data()), dead_letter=True))
    finally:
        telemetry.flush()

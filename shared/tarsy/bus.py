"""Publishing step messages to Pub/Sub."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Protocol

from google.cloud import pubsub_v1  # type: ignore[attr-defined]

from tarsy.log import fields
from tarsy.models import StepMessage
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

# Publish almost at once: a step waits for its publish, and latency adds up per iteration.
_BATCH = pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.002)


def encode(message: StepMessage) -> tuple[bytes, dict[str, str]]:
    """Return the Pub/Sub data and attributes of a step message."""
    attributes = {"session_id": message.session_id, "kind": message.kind, "step": str(message.step)}
    return message.model_dump_json().encode(), attributes


def decode(data: bytes) -> StepMessage:
    """Parse Pub/Sub data back into a step message (raises pydantic.ValidationError)."""
    return StepMessage.model_validate_json(data)


class Publisher(Protocol):
    """Anything that publishes step messages (the Pub/Sub bus; tests wrap it)."""

    async def publish(self, message: StepMessage) -> str:
        """Publish one message; return its message id."""
        ...


class Bus:
    """Publishes step messages on the steps topic."""

    def __init__(self, publisher: pubsub_v1.PublisherClient, topic_path: str) -> None:
        self._publisher = publisher
        self.topic_path = topic_path
        self.published = 0

    async def publish(self, message: StepMessage) -> str:
        """Publish one message and return its Pub/Sub message id."""
        data, attributes = encode(message)
        future = self._publisher.publish(self.topic_path, data, **attributes)
        message_id = str(await asyncio.wrap_future(future))
        self.published += 1
        logger.info(
            "published %s step %s",
            message.kind,
            message.step,
            extra=fields(
                session_id=message.session_id,
                execution_id=message.execution_id,
                message_id=message_id,
            ),
        )
        return message_id


_bus: Bus | None = None
_bus_lock = threading.Lock()


def get_bus(settings: Settings) -> Bus:
    """Return the process-wide bus, creating the publisher on first use."""
    global _bus
    with _bus_lock:
        if _bus is None:
            publisher = pubsub_v1.PublisherClient(batch_settings=_BATCH)
            _bus = Bus(publisher, publisher.topic_path(settings.project_id, settings.steps_topic))
        return _bus

"""Publishing step messages to Pub/Sub, and reading them back from a push delivery.

A message's attributes carry, besides a few fields for filtering, the W3C trace
context (``traceparent``, ``tracestate``) of the publish that sent it, so the
step that handles it continues the session's trace (:mod:`tarsy.telemetry`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from google.cloud import pubsub_v1  # type: ignore[attr-defined]
from pydantic import Field

from tarsy import telemetry
from tarsy._pydantic import DeferredModel
from tarsy.log import fields
from tarsy.models import StepMessage
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

# Publish almost at once: a step waits for its publish, and latency adds up per iteration.
_BATCH = pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.002)


def encode(
    message: StepMessage, trace_context: Mapping[str, str] | None = None
) -> tuple[bytes, dict[str, str]]:
    """Return the Pub/Sub data and attributes of a step message.

    Args:
        message: The step message.
        trace_context: The W3C trace context of the publish (``traceparent``
            and ``tracestate``); other keys are ignored.
    """
    attributes = {"session_id": message.session_id, "kind": message.kind, "step": str(message.step)}
    for key in telemetry.TRACE_CONTEXT_KEYS:
        if trace_context and trace_context.get(key):
            attributes[key] = trace_context[key]
    return message.model_dump_json().encode(), attributes


def decode(data: bytes) -> StepMessage:
    """Parse Pub/Sub data back into a step message (raises pydantic.ValidationError)."""
    return StepMessage.model_validate_json(data)


class PushedMessage(DeferredModel):
    """What a Pub/Sub push delivery carries: data, attributes and the message id."""

    data: bytes = b""
    attributes: dict[str, str] = Field(default_factory=dict)
    message_id: str = ""

    @property
    def trace_context(self) -> dict[str, str]:
        """The W3C trace context of the publish that sent the message (may be empty)."""
        return {k: self.attributes[k] for k in telemetry.TRACE_CONTEXT_KEYS if k in self.attributes}


def pushed_message(payload: Mapping[str, Any] | None) -> PushedMessage:
    """Read the CloudEvent data of a push delivery: ``{"message": {data, attributes, ...}}``.

    Tolerant of what the emulator and Eventarc leave out: a missing or
    undecodable ``data`` is empty (it then fails to parse as a step message),
    missing attributes are none, and ``messageId`` may be ``message_id``.
    """
    message = (payload or {}).get("message") or {}
    try:
        data = base64.b64decode(message.get("data") or "", validate=False)
    except (binascii.Error, ValueError, TypeError):
        data = b""
    raw_attributes = message.get("attributes") or {}
    attributes = (
        {str(k): str(v) for k, v in raw_attributes.items()}
        if isinstance(raw_attributes, Mapping)
        else {}
    )
    message_id = message.get("messageId") or message.get("message_id") or ""
    return PushedMessage(data=data, attributes=attributes, message_id=str(message_id))


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
        self.topic = topic_path.rsplit("/", 1)[-1]
        self.published = 0

    async def publish(self, message: StepMessage) -> str:
        """Publish one message and return its Pub/Sub message id.

        The publish is a ``send`` span whose trace context the message carries.
        """
        with telemetry.publish_span(
            self.topic,
            session_id=message.session_id,
            execution_id=message.execution_id,
            kind=message.kind,
            step=message.step,
            stage=message.stage,
        ) as span:
            data, attributes = encode(message, span.carrier)
            future = self._publisher.publish(self.topic_path, data, **attributes)
            message_id = str(await asyncio.wrap_future(future))
            span.set_message_id(message_id)
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

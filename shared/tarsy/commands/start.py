"""A new session and the start of it: built once, published or rolled back once.

Design constraint: a session is written before its start is published, so a
start that cannot be published must remove what was written (the session, its
fingerprint claim, an investigation's links and audit record), or a session
nobody runs would be left behind. Every way a session starts (an alert at any
of ingest's routes, investigating a finished session again) builds it with
:func:`new_session` and starts it with :func:`start_or_undo`, here and nowhere
else.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from tarsy import telemetry
from tarsy.bus import Publisher
from tarsy.config.routing import alert_fields, alert_labels
from tarsy.config.schema import TarsyConfig
from tarsy.log import fields
from tarsy.models import MCPSelection, Session, StepMessage
from tarsy.settings import Settings
from tarsy.tools.masking import Masker

logger = logging.getLogger(__name__)


def new_session(
    *,
    alert_type: str,
    data_text: str,
    data: object,
    config: TarsyConfig,
    settings: Settings,
    now: datetime,
    masker: Masker,
    runbook: str | None = None,
    mcp: MCPSelection | None = None,
    metadata: Mapping[str, Any] | None = None,
    source: str = "api",
) -> Session:
    """The pending session of an accepted alert, its start due by the step due time.

    Its chain is the one the alert's type, source, labels and fields route it to
    (``tarsy.config.routing``); the session records what chose it and why.
    """
    chain_id, routing = config.route(
        alert_type, alert_labels(data), fields=alert_fields(data), source=source
    )
    return Session(
        session_id=str(uuid.uuid4()),
        alert_type=alert_type,
        # Secrets in the alert are masked before anything stores or reads it (invariant 5).
        alert_data=masker.mask(data_text).text,
        runbook=runbook,
        mcp=mcp,
        metadata=dict(metadata or {}),
        chain_id=chain_id,
        routing=routing,
        deadline=now + timedelta(seconds=config.session_timeout(chain_id)),
        # Its start is due: if the start_session message is lost, the sweeper sends it again.
        awaiting_stage=0,
        due_at=now + timedelta(seconds=settings.step_due_seconds),
        source=source,
        created_at=now,
        trace_context=telemetry.inject_trace_context(),
    )


async def start_or_undo(
    bus: Publisher, session_id: str, undo: Callable[[], Awaitable[object]]
) -> bool:
    """Publish a written session's start; when that fails, ``undo`` what wrote it.

    Returns:
        Whether the start was published (False: it was not, and ``undo`` ran),
        so that each door answers a failure its own way (a 503 with a retry).
    """
    try:
        await bus.publish(StepMessage(session_id=session_id, kind="start_session"))
    except Exception:
        await undo()
        logger.exception(
            "publishing the start of %s failed; its writes removed",
            session_id,
            extra=fields(session_id=session_id),
        )
        return False
    return True


def status_url(settings: Settings, session_id: str) -> str:
    """Return where the caller can follow the session."""
    return f"{settings.public_api_url.rstrip('/')}/sessions/{session_id}"

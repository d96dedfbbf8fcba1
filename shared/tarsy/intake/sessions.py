"""A new session from an accepted alert, the same whichever way the alert came in.

Design constraint: tarsy's own ``POST /alerts`` and the native senders are
receivers behind one door (:mod:`tarsy.intake.routes`); what an accepted alert
becomes (its chain, its masked data, its deadline, the due time of its start)
and what a caller hears when the queue is down are built here, once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from tarsy import telemetry
from tarsy.config.routing import alert_fields, alert_labels
from tarsy.config.schema import TarsyConfig
from tarsy.http.request import HttpResponse
from tarsy.models import MCPSelection, Session
from tarsy.settings import Settings
from tarsy.tools.masking import Masker

# How soon a sender should retry when the steps topic could not take the start.
RETRY_AFTER_SECONDS = 5


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


def queue_unavailable() -> HttpResponse:
    """503 when a session's start could not be published (it was removed again)."""
    return HttpResponse(
        status=503,
        body={"error": {"status": 503, "message": "queue unavailable, retry"}},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )

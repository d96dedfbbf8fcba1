"""A note on the PagerDuty incident when its session completes, effectively once.

Opt-in per source: ``alert_sources.pagerduty.incident_notes``, with a REST API
key (``PAGERDUTY_API_TOKEN``, or the ``TARSY_PAGERDUTY_TOKEN_SECRET`` secret)
and the PagerDuty user the note is written as (``TARSY_PAGERDUTY_FROM_EMAIL``,
the ``From`` header an account-level key needs). A session whose alert came
from the PagerDuty source (its data carries the ``incident_id``) gets, once it
has completed, one note: the executive summary (or the final analysis) and the
link to the session's page, ``POST /incidents/{id}/notes`` through PagerDuty's
official client (``pagerduty.RestApiV2Client``).

Effectively once, by the same ledger as Slack (:mod:`tarsy.notify.ledger`):
the note is claimed with a lease before it is posted; a caller taking over a
claim whose holder died (or whose attempt failed) first lists the incident's
notes and looks for the session's marker (``(session ID)``, in every note's
text): found, it is recorded as sent and not posted again. A check that cannot
read the notes posts nothing (a retry follows). The client's own retries are
off but for a 429: the ledger is the retry loop, and a repeated POST is
exactly what it must not do blindly.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from tarsy import secrets
from tarsy.config.schema import TarsyConfig
from tarsy.models import ExecutionStatus, Session
from tarsy.notify import configured
from tarsy.notify.ledger import NotificationLedger
from tarsy.notify.result import NotificationResult
from tarsy.settings import Settings
from tarsy.web.links import session_url

if TYPE_CHECKING:
    from pagerduty import RestApiV2Client

logger = logging.getLogger(__name__)

NOTIFIER = "pagerduty"
SOURCE = "pagerduty"
TIMEOUT_SECONDS = 10
# A claim outlives one attempt (two calls of TIMEOUT_SECONDS at most) by far.
CLAIM_LEASE = timedelta(seconds=120)
RETRY_AFTER = timedelta(seconds=60)
MAX_ATTEMPTS = 3
# PagerDuty takes notes of up to 25,000 characters; the rest is a link away.
MAX_NOTE_CHARS = 24_000
# A 429 is retried by the client (it honours the rate limit); nothing else is.
RATE_LIMIT_RETRIES = 3


class NoteTarget(BaseModel):
    """The incident one session's note goes to."""

    incident_id: str


def api_token(settings: Settings) -> str:
    """The REST API key: ``PAGERDUTY_API_TOKEN``, else the ``TARSY_PAGERDUTY_TOKEN_SECRET`` secret.

    Raises:
        ConfigError: The secret cannot be read.
        ValueError: Neither is configured.
    """
    return secrets.credential(
        settings.pagerduty_api_token, settings.pagerduty_token_secret, settings,
        "PagerDuty API key",
    )  # fmt: skip


def incident_of(session: Session) -> str | None:
    """The PagerDuty incident a session investigates: its alert data's ``incident_id``."""
    if session.source != SOURCE:
        return None
    try:
        data = json.loads(session.alert_data)
    except ValueError:
        return None
    incident = data.get("incident_id") if isinstance(data, dict) else None
    return incident if isinstance(incident, str) and incident else None


def target_for(session: Session, settings: Settings, config: TarsyConfig) -> NoteTarget | None:
    """Where the session's note goes; None: no note (not opted in, not configured, no incident)."""
    if not configured.pagerduty_notes(settings, config):
        return None
    incident = incident_of(session)
    return NoteTarget(incident_id=incident) if incident is not None else None


def session_marker(session_id: str) -> str:
    """The text every note about ``session_id`` carries, found again by :func:`find_posted`."""
    return f"(session {session_id})"


def build_note(session: Session, page_url: str | None) -> str:
    """The note's text (pure): the summary, then the link and the session marker."""
    summary = session.executive_summary or session.final_analysis or "(no summary)"
    footer = [f"Investigated by tarsy {session_marker(session.session_id)}."]
    if page_url:
        footer.append(f"The investigation: {page_url}")
    head = "tarsy: investigation completed\n\n"
    tail = "\n\n" + "\n".join(footer)
    cut = "\n… (truncated: the rest is in the session)"
    room = MAX_NOTE_CHARS - len(head) - len(tail)
    if len(summary) > room:
        summary = summary[: room - len(cut)].rstrip() + cut
    return f"{head}{summary}{tail}"


def find_posted(notes: Sequence[Mapping[str, Any]], session_id: str) -> str | None:
    """The id of a note that carries ``session_id``'s marker (pure)."""
    marker = session_marker(session_id)
    for note in notes:
        content = note.get("content")
        if isinstance(content, str) and marker in content:
            return str(note.get("id") or "") or None
    return None


def rest_client(token: str, settings: Settings) -> RestApiV2Client:
    """PagerDuty's official REST API v2 client, at ``TARSY_PAGERDUTY_BASE_URL`` when set.

    Imported here: only a function that writes a note loads it.
    """
    from pagerduty import RestApiV2Client

    client = RestApiV2Client(
        token,
        default_from=settings.pagerduty_from_email,
        base_url=settings.pagerduty_base_url,
        timeout=TIMEOUT_SECONDS,
    )
    client.retry = {429: RATE_LIMIT_RETRIES}
    client.max_network_attempts = 1  # a lost answer is the ledger's to check, never re-sent
    return client


def deliver(
    target: NoteTarget, note: str, settings: Settings, *, check_posted: str | None = None
) -> NotificationResult:
    """Post the note (blocking: run it in a thread). Raises on failure.

    Args:
        target: The incident.
        note: The note's text.
        settings: The key, the From address and the API's base URL.
        check_posted: A session id: first look for a note an earlier attempt
            posted for it, and post nothing if there is one.
    """
    path = f"/incidents/{target.incident_id}/notes"
    with rest_client(api_token(settings), settings) as client:
        if check_posted is not None:
            notes = client.rget(path)
            found = find_posted(notes if isinstance(notes, list) else [], check_posted)
            if found is not None:
                return NotificationResult(
                    notifier=NOTIFIER,
                    status="sent",
                    incident_id=target.incident_id,
                    note_id=found,
                    detail="posted by an earlier attempt",
                )
        posted = client.rpost(path, json={"note": {"content": note}})
    note_id = posted.get("id") if isinstance(posted, dict) else None
    return NotificationResult(
        notifier=NOTIFIER,
        status="sent",
        incident_id=target.incident_id,
        note_id=str(note_id) if note_id else None,
    )


def _describe(exc: BaseException) -> str:
    """A one-line reason: PagerDuty's HTTP status and error when it answered."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status is not None:
        return f"PagerDuty API answered {status}"
    return f"{type(exc).__name__}: {exc}"


async def notify_session_end(
    session: Session,
    settings: Settings,
    config: TarsyConfig,
    ledger: NotificationLedger,
) -> NotificationResult:
    """Add the note to ``session``'s incident, once however often this is called.

    Skipped unless the session's source opted in, a key is configured, its
    alert names an incident and the session completed; ``duplicate`` when
    another call holds the claim (or it is done). As Slack's: the claim
    first, with a lease; a takeover first lists the incident's notes; the
    result recorded, with a retry time after a failure while attempts are
    left. Nothing raises out of here but a process's own death.
    """
    target = target_for(session, settings, config)
    if target is None:
        return NotificationResult(
            notifier=NOTIFIER, status="skipped", detail="no PagerDuty note for this session"
        )
    if session.status is not ExecutionStatus.COMPLETED:
        return NotificationResult(
            notifier=NOTIFIER, status="skipped", detail=f"session is {session.status.value}"
        )
    try:
        claim = await ledger.claim(session.session_id, NOTIFIER, lease=CLAIM_LEASE)
    except Exception as exc:
        logger.warning("cannot claim the PagerDuty note of %s", session.session_id)
        return NotificationResult(
            notifier=NOTIFIER, status="failed", incident_id=target.incident_id,
            detail=f"claim: {_describe(exc)}",
        )  # fmt: skip
    if claim is None:
        return NotificationResult(
            notifier=NOTIFIER, status="duplicate", incident_id=target.incident_id
        )
    page = (
        session_url(settings.public_api_url, session.session_id)
        if settings.public_api_url
        else None
    )
    note = build_note(session, page)
    check = session.session_id if claim.takeover else None
    try:
        result = await asyncio.to_thread(deliver, target, note, settings, check_posted=check)
    except Exception as exc:
        result = NotificationResult(
            notifier=NOTIFIER, status="failed", incident_id=target.incident_id,
            detail=_describe(exc),
        )  # fmt: skip
    result = result.model_copy(update={"attempt": claim.attempt})
    retry = RETRY_AFTER if result.status == "failed" and claim.attempt < MAX_ATTEMPTS else None
    try:
        await ledger.record(session.session_id, NOTIFIER, result, retry_after=retry)
    except Exception:
        # The claim's lease runs out and a later caller checks the notes before posting again.
        logger.warning("cannot record the PagerDuty note of %s", session.session_id)
    return result

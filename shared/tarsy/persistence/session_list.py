"""Listing and searching sessions: the query, its cursor, the page (persistence's vocabulary).

Sessions come newest first (``created_at`` descending, the session id breaking
ties), filtered by equality on :data:`EQUALITY_FILTERS` (the feedback's ``verdict``
among them) and by a creation-time
range. A page ends with an opaque cursor, the last row's ``created_at`` and id,
from which the next page starts. Each equality filter has a composite index
``(field, created_at DESC)`` in ``infra/firestore.tf``; Firestore merges them
when several filters are combined. Who acted (``actor``) and what they did
(``action``) filter by one array-contains on ``audit_keys`` (tarsy.access.audit).
Pure: :meth:`tarsy.persistence.store.Store.list_sessions`
runs the query, and :func:`tarsy.api.session_list.parse_query` reads one from a
``GET /sessions`` query string.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta

from pydantic import ConfigDict, Field, field_validator, model_validator

from tarsy._pydantic import DeferredModel
from tarsy.access.audit import audit_key
from tarsy.access.roles import RecordedAction
from tarsy.models import ErrorInfo, ExecutionStatus, Feedback, Money, TokenUsage, Verdict

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
# The fields a listing filters on by equality, in the order the query applies them.
EQUALITY_FILTERS = ("status", "alert_type", "source", "verdict")
# What the range filters and the order use.
ORDER_FIELD = "created_at"
# The array the actor and action filters look in (one array-contains per query).
AUDIT_FIELD = "audit_keys"


class SessionCursor(DeferredModel):
    """Where a page ended: the last row's creation time and id (the next page starts after)."""

    model_config = ConfigDict(frozen=True)

    created_at: datetime
    session_id: str = Field(min_length=1)

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token."""
        raw = json.dumps(
            {"created_at": self.created_at.isoformat(), "session_id": self.session_id},
            separators=(",", ":"),
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> SessionCursor:
        """Read a token made by :meth:`encode`.

        Args:
            token: The opaque cursor a previous page returned.

        Returns:
            The cursor.

        Raises:
            ValueError: The token was not made by :meth:`encode`.
        """
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            return cls.model_validate_json(raw)
        except (binascii.Error, ValueError) as e:
            raise ValueError("not a cursor returned by GET /sessions") from e


def _as_utc(value: datetime) -> datetime:
    """A naive time is taken as UTC; an aware one is converted to UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class SessionQuery(DeferredModel):
    """The filters, page size and starting point of one listing request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: ExecutionStatus | None = None
    alert_type: str | None = Field(default=None, min_length=1, max_length=200)
    source: str | None = Field(default=None, min_length=1, max_length=100)
    actor: str | None = Field(
        default=None, min_length=3, max_length=320, description="sessions this e-mail acted on"
    )
    action: RecordedAction | None = Field(default=None, description="sessions someone did this to")
    verdict: Verdict | None = Field(default=None, description="sessions whose feedback said this")
    since: datetime | None = Field(default=None, description="created at or after (inclusive)")
    until: datetime | None = Field(default=None, description="created before (exclusive)")
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: SessionCursor | None = None

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _as_utc(value)

    @field_validator("cursor", mode="before")
    @classmethod
    def _decode_cursor(cls, value: object) -> object:
        return SessionCursor.decode(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _ordered_range(self) -> SessionQuery:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be earlier than until")
        return self

    @property
    def audit_key(self) -> str | None:
        """The one array-contains key of the actor and action filters (None: neither given)."""
        return audit_key(action=self.action, actor=self.actor)

    def equality_filters(self) -> dict[str, str]:
        """``{field: value}`` of the equality filters given."""
        values = {
            "status": self.status.value if self.status is not None else None,
            "alert_type": self.alert_type,
            "source": self.source,
            "verdict": self.verdict,
        }
        return {name: value for name, value in values.items() if value is not None}


class SessionSummary(DeferredModel):
    """One row of a listing: what a person scans for, without the alert or the analysis."""

    model_config = ConfigDict(extra="ignore")

    session_id: str
    alert_type: str
    source: str = "api"
    chain_id: str = ""
    status: ExecutionStatus
    current_stage: int | None = None
    error: ErrorInfo | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost: Money = 0
    # Written by the session scoring stage when it exists (0-100); None until then.
    score: float | None = None
    # A responder's feedback (tarsy.feedback), and its verdict the list filters on.
    feedback: Feedback | None = None
    verdict: Verdict | None = None
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None

    @property
    def duration(self) -> timedelta | None:
        """How long it ran: from start (or creation) to completion; None while unfinished."""
        if self.completed_at is None:
            return None
        return self.completed_at - (self.started_at or self.created_at)

    def cursor(self) -> SessionCursor:
        """The cursor of a page that ends with this row."""
        return SessionCursor(created_at=self.created_at, session_id=self.session_id)


# The document fields a listing reads (a projection: the alert and analyses stay behind).
SUMMARY_FIELDS = tuple(SessionSummary.model_fields)


class SessionPage(DeferredModel):
    """One page of a listing; ``next_cursor`` is None on the last page."""

    sessions: list[SessionSummary]
    next_cursor: str | None = None


def page_of(rows: list[SessionSummary], limit: int) -> SessionPage:
    """The page from up to ``limit + 1`` rows read: one more than shown says a next page exists.

    Args:
        rows: The rows read, newest first.
        limit: The page size asked for.

    Returns:
        The first ``limit`` rows, with the cursor after the last of them when more exist.
    """
    shown = rows[:limit]
    more = len(rows) > limit and bool(shown)
    return SessionPage(sessions=shown, next_cursor=shown[-1].cursor().encode() if more else None)

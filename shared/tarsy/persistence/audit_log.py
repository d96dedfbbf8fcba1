"""The audit across sessions: its query, cursor, rows and page (persistence's vocabulary).

Design constraint: pure. Every record is a ``sessions/{sid}/audit/{id}``
document, and an erasure's the one ``audit/{id}`` document left when its
session is gone; one collection-group query on ``audit`` reads both, newest
first (``at`` descending, the document path breaking ties), filtered by equality
on ``actor`` and ``action`` and by a time range, a page ending with an opaque
cursor (the last row's time and path). Only an admin reads it
(:data:`tarsy.access.roles.REQUIRED_ROLE`). :mod:`tarsy.persistence.audit` runs it.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ConfigDict, Field, field_validator, model_validator

from tarsy._pydantic import DeferredModel
from tarsy.access.roles import RecordedAction
from tarsy.models import AuditEvent, Session
from tarsy.persistence.updates import ExecutionUpdate, SessionUpdate, StageUpdate

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def audit_id(event: AuditEvent) -> str:
    """A new audit document's id: its time first (the console sorts by it), then a nonce."""
    return f"{event.at:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ActionRecord:
    """An action's audit record: the event, on which session, under which list keys."""

    session_id: str
    event: AuditEvent
    keys: tuple[str, ...]
    audit_id: str = ""

    def __post_init__(self) -> None:
        if not self.audit_id:
            object.__setattr__(self, "audit_id", audit_id(self.event))


@dataclass(frozen=True)
class ActionWrites:
    """An action's state change, committed in one batch with its audit record.

    Design constraint: either both exist or neither does, so that no action is
    without its record (issue 42): the store writes all of it in one commit.
    ``record`` None: a machine's action (a cancel on resolve), not audited.
    """

    session_id: str
    record: ActionRecord | None
    session: SessionUpdate | None = None
    executions: tuple[tuple[str, ExecutionUpdate], ...] = ()
    stages: tuple[tuple[int, StageUpdate], ...] = ()
    # Investigating again: the new session, created and linked to the record's session.
    new_session: Session | None = None


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class AuditCursor(DeferredModel):
    """Where a page ended: the last row's time and document path."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    path: str = Field(min_length=1)

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token."""
        raw = self.model_dump_json()
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> AuditCursor:
        """Read a token made by :meth:`encode`.

        Raises:
            ValueError: The token was not made by :meth:`encode`.
        """
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            return cls.model_validate_json(raw)
        except (binascii.Error, ValueError) as e:
            raise ValueError("not a cursor returned by GET /audit") from e


class AuditQuery(DeferredModel):
    """``GET /audit``'s filters, page size and starting point."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    actor: str | None = Field(default=None, min_length=3, max_length=320)
    action: RecordedAction | None = None
    since: datetime | None = Field(default=None, description="at or after (inclusive)")
    until: datetime | None = Field(default=None, description="before (exclusive)")
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: AuditCursor | None = None

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _as_utc(value)

    @field_validator("actor")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return None if value is None else value.strip().lower()

    @field_validator("cursor", mode="before")
    @classmethod
    def _decode_cursor(cls, value: object) -> object:
        return AuditCursor.decode(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _ordered_range(self) -> AuditQuery:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be earlier than until")
        return self


class AuditEntry(AuditEvent):
    """One row of the audit across sessions: an event and the session it happened to."""

    session_id: str | None = Field(description="the session acted on (an erased one's id)")
    path: str = Field(description="the record's document path (the cursor's tie-breaker)")

    def cursor(self) -> AuditCursor:
        """The cursor of a page that ends with this row."""
        return AuditCursor(at=self.at, path=self.path)


class AuditPage(DeferredModel):
    """One page of the audit; ``next_cursor`` is None on the last page."""

    entries: list[AuditEntry]
    next_cursor: str | None = None


def audit_page_of(rows: list[AuditEntry], limit: int) -> AuditPage:
    """The page from up to ``limit + 1`` rows read: one more than shown says a next page exists."""
    shown = rows[:limit]
    more = len(rows) > limit and bool(shown)
    return AuditPage(entries=shown, next_cursor=shown[-1].cursor().encode() if more else None)

"""A notification ledger that dies once where a test says, and the clock it keeps time by.

The notifiers (Slack, PagerDuty) are exactly-once through the same leased
ledger; their tests crash it at the same two places: after a claim, and after
the vendor was told but before the ledger recorded it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from google.cloud import firestore

from tarsy.models import utcnow
from tarsy.notify.ledger import Claim, FirestoreLedger
from tarsy.notify.result import NotificationResult
from tarsy.settings import Settings

AFTER_THE_CLAIM = "after the claim"


class Crash(BaseException):
    """The process dies here (not an Exception: nothing catches it)."""


class Clock:
    """The ledger's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by + timedelta(seconds=1)


class CrashingLedger(FirestoreLedger):
    """The Firestore ledger, dying once at ``crash_at`` in ``notifier``'s path.

    ``crash_at`` is :data:`AFTER_THE_CLAIM` or ``before_record`` (the name the
    notifier's tests give the moment after the vendor was told), or None.
    """

    def __init__(
        self,
        db: firestore.AsyncClient,
        clock: Clock,
        crash_at: str | None,
        *,
        notifier: str,
        before_record: str,
    ) -> None:
        super().__init__(db, clock)
        self.crash_at = crash_at
        self.notifier = notifier
        self.before_record = before_record

    def _crash(self, point: str) -> None:
        if self.crash_at == point:
            self.crash_at = None
            raise Crash(point)

    async def claim(
        self, session_id: str, notifier: str, *, lease: timedelta | None = None
    ) -> Claim | None:
        claim = await super().claim(session_id, notifier, lease=lease)
        if claim is not None and notifier == self.notifier:
            self._crash(AFTER_THE_CLAIM)
        return claim

    async def record(
        self,
        session_id: str,
        notifier: str,
        result: NotificationResult,
        *,
        retry_after: timedelta | None = None,
    ) -> None:
        if notifier == self.notifier:
            self._crash(self.before_record)
        await super().record(session_id, notifier, result, retry_after=retry_after)


def crashing_ledger(
    settings: Settings, clock: Clock, crash_at: str | None, *, notifier: str, before_record: str
) -> CrashingLedger:
    """A :class:`CrashingLedger` on the stack's Firestore."""
    db = firestore.AsyncClient(project=settings.project_id, database=settings.firestore_database)
    return CrashingLedger(db, clock, crash_at, notifier=notifier, before_record=before_record)

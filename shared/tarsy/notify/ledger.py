"""Once, not once per redelivery: a notification is claimed with ``create()`` before it is sent.

``sessions/{session_id}/notifications/{notifier}`` is created by the first
invocation that gets there (every other one gets ``AlreadyExists``: contention
free, invariant 1) and then holds what the attempt came to, readable in the
console. The claim comes before the send, so a notification goes out at most
once: a process that dies between the two leaves ``state: claimed`` with no
result, and that session is not announced.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import utcnow
from tarsy.notify.result import NotificationResult
from tarsy.settings import Settings

SESSIONS = "sessions"
NOTIFICATIONS = "notifications"


class NotificationLedger(Protocol):
    """Where notifications are claimed once and their results kept."""

    async def claim(self, session_id: str, notifier: str) -> bool:
        """Claim the notification; True for the one caller that got it."""
        ...

    async def record(self, session_id: str, notifier: str, result: NotificationResult) -> None:
        """Keep what the claimed notification came to."""
        ...


class FirestoreLedger:
    """The ledger in Firestore, beside the session it is about."""

    def __init__(self, db: firestore.AsyncClient) -> None:
        self._db = db

    def _ref(self, session_id: str, notifier: str) -> Any:
        return (
            self._db.collection(SESSIONS)
            .document(session_id)
            .collection(NOTIFICATIONS)
            .document(notifier)
        )

    async def claim(self, session_id: str, notifier: str) -> bool:
        """Create the notification document; False when it already exists."""
        try:
            await self._ref(session_id, notifier).create(
                {"notifier": notifier, "state": "claimed", "claimed_at": utcnow()}
            )
        except gexc.AlreadyExists:
            return False
        return True

    async def record(self, session_id: str, notifier: str, result: NotificationResult) -> None:
        """Write the result into the claimed document (``state`` becomes its status)."""
        await self._ref(session_id, notifier).set(
            {
                "state": result.status,
                "result": result.model_dump(mode="json", exclude_none=True),
                "recorded_at": utcnow(),
            },
            merge=True,
        )


_ledger: FirestoreLedger | None = None
_lock = threading.Lock()


def firestore_ledger(settings: Settings) -> FirestoreLedger:
    """The process-wide ledger; its client is created on first use, on the process loop.

    Only functions with a notifier or an exporter configured ever create it.
    """
    global _ledger
    with _lock:
        if _ledger is None:
            client = firestore.AsyncClient(
                project=settings.project_id, database=settings.firestore_database
            )
            _ledger = FirestoreLedger(client)
        return _ledger

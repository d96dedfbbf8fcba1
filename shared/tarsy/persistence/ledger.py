"""The notification ledger in Firestore: leased claims beside the session they are about.

Design constraint: one Firestore adapter. The ledger's documents live under the
session (``sessions/{session_id}/notifications/{notifier}``) and are written
through the store's own client (:attr:`tarsy.persistence.store.Store.ledger`),
so no second client, singleton or collection vocabulary exists outside
``tarsy.persistence``. What a claim means and when it is taken over is
described in :mod:`tarsy.notify.ledger`, the port the notifiers call.

A claim is created by the first invocation that gets there (every other one
gets ``AlreadyExists``: contention free); a claim carrying a lease
(``lease_until``, or ``event_lease_until`` for a Slack event) whose time has
passed is taken over by one other invocation, under a ``last_update_time``
precondition. The sweeper finds such claims with one collection-group query on
``lease_until`` (:meth:`FirestoreLedger.stale`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from tarsy.models import utcnow
from tarsy.money import money_of
from tarsy.notify.result import Claim, NotificationResult
from tarsy.persistence._firestore import EXECUTIONS, NOTIFICATIONS, SESSIONS, with_cost

__all__ = ["EVENT_LEASE_FIELD", "LEASE_FIELD", "NOTIFICATIONS", "RESULT", "FirestoreLedger"]

LEASE_FIELD = "lease_until"
EVENT_LEASE_FIELD = "event_lease_until"
RESULT = "result"
# Sessions looked at per query when a Slack thread is matched to its session.
THREAD_MATCHES = 20


class FirestoreLedger:
    """The ledger in Firestore, beside the session it is about."""

    def __init__(self, db: firestore.AsyncClient, clock: Callable[[], datetime] = utcnow) -> None:
        self._db = db
        self._clock = clock

    def _ref(self, session_id: str, notifier: str) -> Any:
        return (
            self._db.collection(SESSIONS)
            .document(session_id)
            .collection(NOTIFICATIONS)
            .document(notifier)
        )

    async def claim(
        self, session_id: str, notifier: str, *, lease: timedelta | None = None
    ) -> Claim | None:
        """Create the notification document, or take over one whose lease has run out."""
        return await self._claim(session_id, notifier, lease, LEASE_FIELD)

    async def claim_event(self, session_id: str, key: str, *, lease: timedelta) -> Claim | None:
        """Claim a Slack event: the first caller, or the first after the lease has run out."""
        return await self._claim(session_id, key, lease, EVENT_LEASE_FIELD)

    async def settle_event(self, session_id: str, key: str, outcome: str) -> None:
        """Mark a claimed event handled (``outcome``: what came of it); no one takes it over."""
        await self._ref(session_id, key).set(
            {"state": outcome, "recorded_at": self._clock(), EVENT_LEASE_FIELD: None}, merge=True
        )

    async def chat_spend(self, asked_by: str, since: datetime) -> int:
        """Nano-dollars spent so far by the chats ``asked_by`` asked in Slack since ``since``.

        One equality query on ``reply_to.asked_by`` (the automatic single-field
        index); the day is filtered here, so no composite index is needed. The cost
        is ``cost_nanos`` plus any legacy ``cost`` (float dollars).
        """
        query = self._db.collection(EXECUTIONS).where(
            filter=firestore.FieldFilter("reply_to.asked_by", "==", asked_by)
        )
        total = 0
        async for snap in query.stream():
            data: dict[str, Any] = with_cost(snap.to_dict() or {})
            created = data.get("created_at")
            if isinstance(created, datetime) and created >= since:
                total += money_of(data.get("cost") or 0)
        return total

    async def _claim(
        self, session_id: str, notifier: str, lease: timedelta | None, lease_field: str
    ) -> Claim | None:
        now = self._clock()
        ref = self._ref(session_id, notifier)
        try:
            await ref.create(
                {
                    "notifier": notifier,
                    "state": "claimed",
                    "attempt": 1,
                    "claimed_at": now,
                    lease_field: now + lease if lease is not None else None,
                }
            )
        except gexc.AlreadyExists:
            pass
        else:
            return Claim(attempt=1)
        if lease is None:
            return None
        snap = await ref.get()
        data: dict[str, Any] = snap.to_dict() or {}
        until = data.get(lease_field)
        if not snap.exists or until is None or until > now:
            return None
        attempt = int(data.get("attempt") or 1) + 1
        try:
            taken = {"state": "claimed", "attempt": attempt, "claimed_at": now}
            await ref.update(
                {**taken, lease_field: now + lease},
                option=self._db.write_option(last_update_time=snap.update_time),
            )
        except (gexc.FailedPrecondition, gexc.NotFound):
            return None  # another caller took it over first
        return Claim(attempt=attempt)

    async def record(
        self,
        session_id: str,
        notifier: str,
        result: NotificationResult,
        *,
        retry_after: timedelta | None = None,
    ) -> None:
        """Write the result into the claimed document (``state`` becomes its status)."""
        now = self._clock()
        await self._ref(session_id, notifier).set(
            {
                "state": "retrying" if retry_after is not None else result.status,
                RESULT: result.model_dump(mode="json", exclude_none=True),
                "recorded_at": now,
                LEASE_FIELD: now + retry_after if retry_after is not None else None,
            },
            merge=True,
        )

    async def stale(self, limit: int) -> list[str]:
        """Sessions whose claim's lease or retry time has passed (a null lease never matches)."""
        query = (
            self._db.collection_group(NOTIFICATIONS)
            .where(filter=firestore.FieldFilter(LEASE_FIELD, "<", self._clock()))
            .order_by(LEASE_FIELD)
            .limit(limit)
        )
        sessions: list[str] = []
        async for snap in query.stream():
            session_id = str(snap.reference.parent.parent.id)
            if session_id not in sessions:
                sessions.append(session_id)
        return sessions

    async def thread_session(self, notifier: str, channel: str, thread_ts: str) -> str | None:
        """The session whose ``notifier`` message opened (or was posted in) a Slack thread.

        Matches the recorded result's ``thread_ts`` (the message replied in the
        alert's thread) or ``ts`` (the message is the thread's parent), in
        ``channel``; the newest recorded wins when several sessions share one
        alert's thread. Two collection-group equality queries (their single-field
        indexes are declared in infra/firestore.tf).
        """
        newest: tuple[datetime, str] | None = None
        for field in (f"{RESULT}.thread_ts", f"{RESULT}.ts"):
            query = (
                self._db.collection_group(NOTIFICATIONS)
                .where(filter=firestore.FieldFilter(field, "==", thread_ts))
                .limit(THREAD_MATCHES)
            )
            async for snap in query.stream():
                data: dict[str, Any] = snap.to_dict() or {}
                result = data.get(RESULT) or {}
                if snap.id != notifier or result.get("channel") != channel:
                    continue
                recorded = data.get("recorded_at") or data.get("claimed_at")
                session_id = str(snap.reference.parent.parent.id)
                if isinstance(recorded, datetime) and (newest is None or recorded > newest[0]):
                    newest = (recorded, session_id)
        return newest[1] if newest is not None else None

"""Effectively once: a notification is claimed with a lease before it is sent.

Design constraint: the notifiers depend on this port, never on Firestore; the
one adapter is :class:`tarsy.persistence.ledger.FirestoreLedger`, on the
store's client.

``sessions/{session_id}/notifications/{notifier}`` is created by the first
invocation that gets there (every other one gets ``AlreadyExists``: contention
free, invariant 1) and then holds what the attempt came to, readable in the
console. A claim for a delivery that can fail carries a lease
(``lease_until``): a process that dies between the claim and the record leaves
the claim to run out, and then one other invocation takes it over (an update
under a ``last_update_time`` precondition, so only one does) as attempt 2, 3,
... The sweeper finds such claims with one collection-group query on
``lease_until`` (:meth:`NotificationLedger.stale`). A failed attempt is recorded
with a retry time in ``lease_until`` in the same way, until the notifier gives up.

Taking over is safe only if the notifier can tell whether the dead attempt got
its message out: Slack looks for its own message by the session's marker
before posting again (:mod:`tarsy.notify.slack`). A claim without a lease (the
sessions-ended metric) is at most once, as before.

A Slack event (a question asked in a thread, :mod:`tarsy.intake.slack_events`)
is claimed the same way, with its own lease field (``event_lease_until``): Slack,
not the sweeper, retries an event, so the sweeper's query never sees it. Its
taker settles it once the question is answered or refused.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from tarsy.notify.result import Claim, NotificationResult
from tarsy.persistence.ledger import FirestoreLedger
from tarsy.persistence.store import get_store
from tarsy.settings import Settings

__all__ = [
    "Claim",
    "FirestoreLedger",
    "NotificationLedger",
    "SlackEventLedger",
    "firestore_ledger",
]


class NotificationLedger(Protocol):
    """Where notifications are claimed and their results kept."""

    async def claim(
        self, session_id: str, notifier: str, *, lease: timedelta | None = None
    ) -> Claim | None:
        """Claim the notification: the new claim for the one caller that got it, else None.

        With ``lease``, a claim whose lease (or retry time) has passed is taken
        over by the next caller; without, the first claim is final.
        """
        ...

    async def record(
        self,
        session_id: str,
        notifier: str,
        result: NotificationResult,
        *,
        retry_after: timedelta | None = None,
    ) -> None:
        """Keep what the claimed attempt came to; ``retry_after``: claimable again then."""
        ...

    async def stale(self, limit: int) -> list[str]:
        """Sessions with a claim whose lease or retry time has passed (oldest first)."""
        ...


class SlackEventLedger(NotificationLedger, Protocol):
    """The ledger as Slack's events use it: a question claimed once, the thread's session.

    For :mod:`tarsy.intake.slack_events`, which still names the adapter
    (:class:`FirestoreLedger`) it is handed.
    """

    async def claim_event(self, session_id: str, key: str, *, lease: timedelta) -> Claim | None:
        """Claim a Slack event: the first caller, or the first after the lease has run out."""
        ...

    async def settle_event(self, session_id: str, key: str, outcome: str) -> None:
        """Mark a claimed event handled (``outcome``: what came of it)."""
        ...

    async def chat_spend(self, asked_by: str, since: datetime) -> int:
        """Nano-dollars spent by the chats ``asked_by`` asked in Slack since ``since``."""
        ...

    async def thread_session(self, notifier: str, channel: str, thread_ts: str) -> str | None:
        """The session whose ``notifier`` message opened (or was posted in) a Slack thread."""
        ...


def firestore_ledger(settings: Settings) -> FirestoreLedger:
    """The process-wide ledger: the process-wide store's, on its one client.

    Only functions with a notifier or an exporter configured ever use it; the
    client is created on first use, on the process loop (as the store's is).
    """
    return get_store(settings).ledger

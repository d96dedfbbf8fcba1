"""Firestore persistence, in the layout of the design brief.

::

    sessions/{session_id}                     Session
      stages/{index:02d}                      Stage
    executions/{execution_id}                 AgentExecution
      messages/{step:04d}-{n:03d}             ConversationMessage
      timeline/{step:04d}-{n:03d}             TimelineEvent
      llm_interactions/{step:04d}             LLMInteraction
    thought_signatures/{execution_id}         provider state, with expire_at for TTL

Ids are deterministic, so a redelivered step overwrites what it wrote before
instead of adding a second copy. A step is claimed with a lease written under a
``last_update_time`` precondition and committed as ONE atomic batch whose
execution update carries the claim's update time as its precondition: if any
other invocation touched the execution since the claim, nothing is written.
These are contention-free (no transaction holds locks while the LLM runs).
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property

from google.cloud import firestore

from tarsy.persistence._firestore import (
    ALERT_FINGERPRINTS,
    EXECUTIONS,
    SESSIONS,
    THOUGHT_SIGNATURES,
    RoundTrips,
    firestore_fields,
    record_id,
    stage_id,
)
from tarsy.persistence.alerts import AlertRecords
from tarsy.persistence.audit import AuditRecords
from tarsy.persistence.ledger import FirestoreLedger
from tarsy.persistence.recordings import RecordingReads
from tarsy.persistence.retention import RetentionReport, stamp_finished
from tarsy.persistence.step_values import (
    Claim,
    FollowUp,
    NewConversation,
    StepCommit,
    StepState,
    follow_up_id,
)
from tarsy.persistence.steps import StepRecords
from tarsy.persistence.sweeps import SweepQueries
from tarsy.settings import Settings

__all__ = [
    "ALERT_FINGERPRINTS",
    "EXECUTIONS",
    "SESSIONS",
    "THOUGHT_SIGNATURES",
    "Claim",
    "FollowUp",
    "NewConversation",
    "RoundTrips",
    "StepCommit",
    "StepState",
    "Store",
    "firestore_fields",
    "follow_up_id",
    "get_store",
    "record_id",
    "stage_id",
]


class Store(StepRecords, AlertRecords, SweepQueries, RecordingReads, AuditRecords):
    """Typed access to the Firestore layout: every aggregate's records in one client.

    Callers that need a few of its methods name a Protocol of
    :mod:`tarsy.persistence.ports` instead.
    """

    async def stamp_retention(
        self, settings: Settings, now: datetime | None = None
    ) -> RetentionReport:
        """Stamp ``expire_at`` on finished sessions due for it (the retention job)."""
        return await stamp_finished(self.client, settings, now)

    @cached_property
    def ledger(self) -> FirestoreLedger:
        """The notification ledger, on this store's client (one client per process)."""
        return FirestoreLedger(self.client)


_store: Store | None = None


def get_store(settings: Settings) -> Store:
    """Return the process-wide store; must be called on the process event loop."""
    global _store
    if _store is None:
        client = firestore.AsyncClient(
            project=settings.project_id, database=settings.firestore_database
        )
        _store = Store(client)
    return _store

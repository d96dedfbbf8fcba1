"""Retention: a finished session and every record of it expire, by Firestore TTL.

Firestore's TTL deletes a document once the timestamp in its TTL field
(``expire_at``) has passed, per collection group, and never cascades: deleting
``sessions/{sid}`` leaves its ``stages``, ``notifications`` and their
subcollections in place, and the session's ``executions/{eid}`` are top-level
documents with subcollections of their own. So every document of a session
carries its own ``expire_at``, and ``infra/firestore.tf`` has a TTL policy on
every collection group the code writes (``tests/infra`` keeps the two in step
with :data:`COLLECTION_GROUPS`).

The stamps are written here, in one pass, not at each write: a session may
run for hours, be paused for days and take chat questions long after it
ended, so no record knows its expiry when it is written. Instead:

* every terminal transition of a session, and every chat question or re-score
  of a finished one, sets ``retention_due`` on the session document to its
  time (:mod:`tarsy.engine.transitions`, in the same write);
* the retention job (Cloud Scheduler → ``POST {api}/retention``, a job of
  its own: the sweeper that recovers steps never waits on it) calls
  :func:`stamp_finished`, which takes the sessions whose
  ``retention_due`` has passed (a range on one field, oldest first: indexed
  by default), walks each one's documents and its executions' subtrees with
  recursive queries (so a collection added later is stamped too), and writes
  ``expire_at = now + retention_days`` on each;
* a session with an execution still running (a chat answering) is not
  stamped yet: its ``retention_due`` moves :data:`RECHECK_AFTER` on, so it
  never holds up the sessions behind it;
* ``retention_due`` is cleared (with the session's own ``expire_at``) only
  under a precondition on the session document's update time: a chat
  question that arrives meanwhile keeps the session due.

A pass that dies half-way leaves ``retention_due`` set and is redone (each
stamp is an idempotent write). The emulator does not enforce TTL; tests
check the stamps.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.field_path import FieldPath
from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.log import fields
from tarsy.models import AgentExecution, utcnow
from tarsy.persistence._firestore import (
    ANSWERS,
    AUDIT,
    DONE,
    EXECUTIONS,
    LLM_INTERACTIONS,
    MARKERS,
    MCP_INTERACTIONS,
    MESSAGES,
    NOTIFICATIONS,
    PROGRESS,
    PUBLISHED,
    SESSIONS,
    STAGES,
    SUB_AGENT_TURNS,
    TIMELINE,
    with_cost,
)
from tarsy.persistence.chunking import CHUNKS
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

TTL_FIELD = "expire_at"
DUE_FIELD = "retention_due"

# Every collection group that holds a session's documents; each needs a TTL policy
# on TTL_FIELD. thought_signatures and alert_fingerprints expire on their own
# (shorter) clocks and are not listed.
COLLECTION_GROUPS = frozenset(
    {
        SESSIONS,
        STAGES,
        DONE,
        MARKERS,
        NOTIFICATIONS,
        EXECUTIONS,
        MESSAGES,
        TIMELINE,
        LLM_INTERACTIONS,
        MCP_INTERACTIONS,
        PROGRESS,
        PUBLISHED,
        SUB_AGENT_TURNS,
        ANSWERS,
        AUDIT,
        CHUNKS,
    }
)

# Sessions stamped per pass: bounds the api request (a session is a few hundred
# to a few thousand documents); the rest wait for the next pass.
SESSIONS_PER_PASS = 20
# Firestore takes at most 500 writes in one batch.
WRITES_PER_BATCH = 450
# A session with an execution still running is looked at again this much later.
RECHECK_AFTER = timedelta(minutes=5)


class RetentionReport(DeferredModel):
    """What one pass stamped."""

    stamped: list[str] = Field(default_factory=list, description="sessions done with")
    still_running: list[str] = Field(
        default_factory=list, description="sessions left for later: an execution is running"
    )
    documents: int = 0


def expire_at(now: datetime, settings: Settings) -> datetime:
    """When what a pass at ``now`` stamps expires."""
    return now + timedelta(days=settings.retention_days)


async def _subtree(ref: Any, *, itself: bool = True) -> AsyncIterator[Any]:
    """``ref`` and every document under it, whatever the collection names (references only)."""
    if itself:
        yield ref
    async for collection in ref.collections():
        query = collection.recursive().select([FieldPath.document_id()])
        async for snap in query.stream():
            yield snap.reference


async def _stamp(db: firestore.AsyncClient, refs: AsyncIterator[Any], when: datetime) -> int:
    """Write ``expire_at`` on every document of ``refs``, in batches; return how many."""
    count = 0
    batch = db.batch()
    pending = 0
    async for ref in refs:
        # merge: touch nothing else (and a document deleted meanwhile comes back as a
        # lone expire_at, which TTL removes too).
        batch.set(ref, {TTL_FIELD: when}, merge=True)
        pending += 1
        count += 1
        if pending == WRITES_PER_BATCH:
            await batch.commit()
            batch, pending = db.batch(), 0
    if pending:
        await batch.commit()
    return count


async def _running(db: firestore.AsyncClient, session_id: str) -> tuple[list[Any], bool]:
    """The session's execution documents, and whether any of them is still running."""
    query = db.collection(EXECUTIONS).where(
        filter=firestore.FieldFilter("session_id", "==", session_id)
    )
    refs: list[Any] = []
    running = False
    async for snap in query.stream():
        execution = AgentExecution.model_validate(with_cost(snap.to_dict() or {}))
        running = running or not execution.status.is_terminal
        refs.append(snap.reference)
    return refs, running


async def stamp_session(
    db: firestore.AsyncClient, session_id: str, executions: list[Any], when: datetime
) -> int:
    """Stamp the documents under the session and its executions' whole subtrees.

    The session document itself is stamped when the pass is done with it (in
    :func:`stamp_finished`, with ``retention_due`` cleared), so that its update
    time tells whether anything wrote it meanwhile.

    Returns:
        How many documents were stamped.
    """
    session = db.collection(SESSIONS).document(session_id)
    count = await _stamp(db, _subtree(session, itself=False), when)
    for ref in executions:
        count += await _stamp(db, _subtree(ref), when)
    return count


async def stamp_finished(
    db: firestore.AsyncClient,
    settings: Settings,
    now: datetime | None = None,
    *,
    limit: int = SESSIONS_PER_PASS,
) -> RetentionReport:
    """Stamp ``expire_at`` on up to ``limit`` sessions due for it, and on their records.

    Never raises: a failure is logged and the session stays due for the next pass.
    """
    now = now or utcnow()
    when = expire_at(now, settings)
    report = RetentionReport()
    query = (
        db.collection(SESSIONS)
        .where(filter=firestore.FieldFilter(DUE_FIELD, "<=", now))
        .order_by(DUE_FIELD)
        .limit(limit)
    )
    try:
        snaps = [snap async for snap in query.stream()]
    except Exception:
        logger.warning("cannot list the sessions due for their expiry", exc_info=True)
        return report
    for snap in snaps:
        session_id = snap.id
        option = db.write_option(last_update_time=snap.update_time)
        try:
            executions, running = await _running(db, session_id)
            if running:
                await snap.reference.update({DUE_FIELD: now + RECHECK_AFTER}, option=option)
                report.still_running.append(session_id)
                continue
            report.documents += await stamp_session(db, session_id, executions, when)
            # Only if nothing wrote the session since it was read (a chat question
            # would have made it due again, for records the walk may have missed).
            await snap.reference.update({DUE_FIELD: None, TTL_FIELD: when}, option=option)
            report.documents += 1
            report.stamped.append(session_id)
        except (gexc.FailedPrecondition, gexc.NotFound):
            logger.info("session %s changed while stamped; again next pass", session_id)
        except Exception:
            logger.warning(
                "stamping the expiry of session %s failed", session_id,
                exc_info=True, extra=fields(session_id=session_id),
            )  # fmt: skip
    return report

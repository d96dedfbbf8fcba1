"""What the native alert routes do with each alert: create, deduplicate, resolve or ignore.

A notification from Alertmanager, Grafana, PagerDuty or SNS has already been
authenticated and normalized into :class:`~tarsy.intake.sources.normalized.NormalizedAlert`
entries; this module turns each into one :class:`AlertOutcome`:

* ``created``: a firing alert nobody has claimed starts its own session. The
  session and its fingerprint claim (``alert_fingerprints/{dedup_key}``) are
  written in ONE batch whose claim is a ``create()``, so of two concurrent
  deliveries of the same alert exactly one commits (invariant 1: a
  contention-free claim, no transaction).
* ``duplicate``: the claim exists and its session is still running, or ended
  less than the source's ``dedup_window_seconds`` ago. The outcome names that
  session. Past the window (or if the session is gone) the claim is replaced,
  under a ``last_update_time`` precondition so again only one delivery wins.
* ``resolved``: the source says the alert is over; the newest session of that
  alert gets ``resolved_at`` and nothing is created. With ``cancel_on_resolve``
  a still-running investigation is cancelled too.
* ``ignored``: the source's event starts nothing (a PagerDuty acknowledgement,
  an alert beyond the per-notification cap), or a resolution matches no session.

An alert that asks for no deduplication (tarsy's own ``POST /alerts``) is
``created`` without a claim: its session is written alone, and removed again
if its start cannot be published.

If the start of a created session cannot be published, that session and its
claim are deleted again and :class:`PublishFailed` is raised once every
alert was handled: the route answers 503, and the sender's retry creates the
session then — exactly once, because everything that did get published is a
duplicate by then.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import ConfigDict

from tarsy._pydantic import DeferredModel
from tarsy.bus import Publisher
from tarsy.commands.start import new_session, start_or_undo
from tarsy.config.schema import TarsyConfig
from tarsy.errors import InputError, TransientError
from tarsy.intake.sources.config import SourceConfig
from tarsy.intake.sources.normalized import NormalizedAlert
from tarsy.log import fields
from tarsy.models import AlertFingerprint, Session, utcnow
from tarsy.persistence.ports import Persistence
from tarsy.settings import Settings
from tarsy.tools.masking import Masker

logger = logging.getLogger(__name__)

OutcomeKind = Literal["created", "duplicate", "resolved", "ignored"]

# Alerts of one notification handled at once: bounded so a 100-alert group does not
# open 100 Firestore commits and Pub/Sub publishes in the same instant.
CONCURRENCY = 8
# Rounds of "claim taken, look, replace" before a delivery settles for "duplicate":
# each lost round means another delivery just created a session for this alert.
MAX_CLAIM_ROUNDS = 4

NO_SESSION = "no session of tarsy belongs to this alert (resolved before it fired here?)"


class AlertOutcome(DeferredModel):
    """What became of one alert of a notification (one entry of the 202 answer)."""

    model_config = ConfigDict(frozen=True)

    fingerprint: str
    session_id: str | None
    outcome: OutcomeKind
    reason: str | None = None

    def answer(self) -> dict[str, str | None]:
        """The entry of the 202 answer: ``reason`` only when there is one."""
        entry = {"fingerprint": self.fingerprint, "session_id": self.session_id}
        entry["outcome"] = self.outcome
        if self.reason is not None:
            entry["reason"] = self.reason
        return entry


class PublishFailed(TransientError):
    """A created session's start could not be published; it was removed again."""

    def __init__(self, outcomes: Sequence[AlertOutcome]) -> None:
        super().__init__("publishing a session's start failed")
        self.outcomes = list(outcomes)


@dataclass(frozen=True)
class Intake:
    """Everything the outcomes depend on: built once per request by the route."""

    settings: Settings
    config: TarsyConfig
    store: Persistence
    bus: Publisher
    # None: ``utcnow`` as this module names it when the request is taken (a default of
    # ``utcnow`` itself would be the function object of import time, which a clock
    # installed later, like make chaos's virtual one, could not replace).
    clock: Callable[[], datetime] | None = None

    def now(self) -> datetime:
        """The time the intake stamps sessions with."""
        return (self.clock or utcnow)()

    async def take(
        self, alerts: Sequence[NormalizedAlert], source: SourceConfig | None
    ) -> list[AlertOutcome]:
        """Handle every alert of one notification; return one outcome each, in order.

        Args:
            alerts: The normalized alerts.
            source: The source's block of ``alert_sources`` (None for ``POST /alerts``,
                whose alerts ask for no deduplication).

        Returns:
            The outcomes, in the order of ``alerts``.

        Raises:
            PublishFailed: A created session could not be started; it was removed.
        """
        masker = Masker(self.config.alert_masking)
        limit = asyncio.Semaphore(CONCURRENCY)
        failed = asyncio.Event()

        async def one(alert: NormalizedAlert) -> AlertOutcome | None:
            async with limit:
                if failed.is_set():
                    return None  # the bus is down: the sender retries the whole notification
                if alert.event == "firing":
                    outcome = await self._firing(alert, source, masker)
                    if outcome is None:
                        failed.set()
                    return outcome
                if alert.event == "resolved" and source is not None:
                    return await self._resolve(alert, source)
                return AlertOutcome(
                    fingerprint=alert.fingerprint,
                    session_id=None,
                    outcome="ignored",
                    reason=alert.reason,
                )

        results = await asyncio.gather(*(one(alert) for alert in alerts))
        outcomes = [r for r in results if r is not None]
        if failed.is_set():
            raise PublishFailed(outcomes)
        return outcomes

    # ─── firing ──────────────────────────────────────────────────────────────

    def _session(self, alert: NormalizedAlert, masker: Masker) -> Session:
        text = alert.data_text
        if text is None:
            text = json.dumps(alert.data, indent=2, sort_keys=True, ensure_ascii=False)
        return new_session(
            alert_type=alert.alert_type,
            data_text=text,
            data=alert.data,
            config=self.config,
            settings=self.settings,
            now=self.now(),
            masker=masker,
            runbook=alert.runbook,
            mcp=alert.mcp,
            metadata=(
                alert.metadata if alert.metadata is not None else {"fingerprint": alert.fingerprint}
            ),
            source=alert.source,
        )

    async def _firing(
        self, alert: NormalizedAlert, source: SourceConfig | None, masker: Masker
    ) -> AlertOutcome | None:
        """A claimed, deduplicated session, or (``deduplicate`` off) a session of its own."""
        if alert.deduplicate and source is not None:
            return await self._fire(alert, source, masker)
        session = self._session(alert, masker)
        await self.store.create_session(session)
        return await self._start(alert, session)

    def _claim(
        self, alert: NormalizedAlert, session: Session, source: SourceConfig
    ) -> AlertFingerprint:
        assert session.deadline is not None
        return AlertFingerprint(
            source=alert.source,
            fingerprint=alert.fingerprint,
            alert_key=alert.alert_key,
            resolve_key=alert.resolve_key,
            session_id=session.session_id,
            created_at=session.created_at,
            expire_at=session.deadline + timedelta(seconds=source.dedup_window_seconds),
        )

    def still_duplicate(self, session: Session | None, source: SourceConfig) -> bool:
        """Whether a repeat of the alert that started ``session`` is a duplicate now.

        Args:
            session: The session the claim names (None if it no longer exists).
            source: The source's settings (its dedup window).

        Returns:
            True while the session runs (or waits, paused) and for
            ``dedup_window_seconds`` after it ended.
        """
        if session is None:
            return False
        if not session.status.is_terminal:
            return True
        ended = session.completed_at or session.created_at
        return self.now() < ended + timedelta(seconds=source.dedup_window_seconds)

    async def _fire(
        self, alert: NormalizedAlert, source: SourceConfig, masker: Masker
    ) -> AlertOutcome | None:
        """Create the alert's session, or name the one that already covers it.

        Returns:
            The outcome; None if the created session could not be published
            (it was removed again).
        """
        key = alert.dedup_key
        replacing: datetime | None = None
        owner: AlertFingerprint | None = None
        for _ in range(MAX_CLAIM_ROUNDS):
            session = self._session(alert, masker)
            claim = self._claim(alert, session, source)
            if await self.store.create_alert_session(session, key, claim, replacing=replacing):
                return await self._start(alert, session)
            found = await self.store.get_alert_fingerprint(key)
            if found is None:  # removed since (a failed publish, TTL): claim it afresh
                replacing = None
                continue
            owner, update_time = found
            if self.still_duplicate(await self.store.get_session(owner.session_id), source):
                break
            replacing = update_time  # ended long enough ago: this firing is new
        if owner is None:
            # Every round found the claim gone again: deliveries keep failing to publish.
            return None
        logger.info(
            "%s alert %s is a duplicate",
            alert.source,
            alert.fingerprint,
            extra=fields(session_id=owner.session_id),
        )
        return AlertOutcome(
            fingerprint=alert.fingerprint, session_id=owner.session_id, outcome="duplicate"
        )

    async def _start(self, alert: NormalizedAlert, session: Session) -> AlertOutcome | None:
        async def undo() -> None:
            if alert.deduplicate:
                await self.store.delete_alert_session(session.session_id, alert.dedup_key)
            else:
                await self.store.delete_session(session.session_id)

        if not await start_or_undo(self.bus, session.session_id, undo):
            return None
        logger.info(
            "accepted %s alert %s (%s)",
            alert.source,
            alert.alert_type,
            alert.fingerprint,
            extra=fields(session_id=session.session_id),
        )
        return AlertOutcome(
            fingerprint=alert.fingerprint, session_id=session.session_id, outcome="created"
        )

    # ─── resolution ──────────────────────────────────────────────────────────

    async def _resolve(self, alert: NormalizedAlert, source: SourceConfig) -> AlertOutcome:
        """Record the resolution on the alert's newest session; create nothing."""
        for claim in await self.store.alert_fingerprints_for(alert.resolve_key):
            session = await self.store.get_session(claim.session_id)
            if session is None:
                continue
            if session.resolved_at is None:
                await self.store.record_alert_resolution(session.session_id, self.now())
            reason = None
            if source.cancel_on_resolve and not session.status.is_terminal:
                reason = await self._cancel(session.session_id)
            logger.info(
                "%s alert %s resolved",
                alert.source,
                alert.fingerprint,
                extra=fields(session_id=session.session_id),
            )
            return AlertOutcome(
                fingerprint=alert.fingerprint,
                session_id=session.session_id,
                outcome="resolved",
                reason=reason,
            )
        return AlertOutcome(
            fingerprint=alert.fingerprint, session_id=None, outcome="ignored", reason=NO_SESSION
        )

    async def _cancel(self, session_id: str) -> str:
        """Cancel a running investigation (``cancel_on_resolve``); say what happened."""
        # Imported here: the session commands pull in the chain engine, which ingest
        # needs only for this.
        from tarsy.app import Deps
        from tarsy.commands.sessions import cancel

        deps = Deps(settings=self.settings, config=self.config, store=self.store, bus=self.bus)
        try:
            await cancel(deps, session_id)
        except InputError as e:  # it ended meanwhile (409) or vanished (404)
            return f"not cancelled: {e}"
        return "the running investigation was cancelled (cancel_on_resolve)"

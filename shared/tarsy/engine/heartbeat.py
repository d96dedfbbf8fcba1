"""The lease heartbeat of a running step, and its watch for a cancel.

Design constraint: a step holds its execution's lease for as long as it runs
and no longer. The lease is short (a minute) so that a step whose process died
is re-run soon after it expires; a slow step renews it instead of having it
stolen. Every renewal is conditional on the claim the step holds, so the commit
presents the latest one (:attr:`Heartbeat.claim`, final once the context exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from tarsy.app import Deps
from tarsy.models import utcnow
from tarsy.persistence.ports import LeaseRenewal
from tarsy.persistence.step_values import Claim

logger = logging.getLogger(__name__)

T = TypeVar("T")


def lease_of(deps: Deps) -> timedelta:
    """How long a claim holds the execution before another invocation may take the step."""
    return timedelta(seconds=deps.settings.step_lease_seconds)


class CancelWatch(Protocol):
    """What a step kind's work may ask of the heartbeat: run work a cancel can cut short."""

    async def unless_cancelled(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Run ``work``; None if a cancel of this execution arrived first (work cancelled)."""
        ...


class Heartbeat:
    """Renews a running step's lease, and cuts the step short when it is cancelled.

    The lease is renewed every third of it, so a slow step is never stolen:
    the lease can then be short (a minute), and a step whose process died is
    re-run soon after it expires. Each renewal is conditional on the claim's
    update time and yields the one the commit must present; once a renewal
    finds the execution changed (a cancel, a takeover), it stops, and the
    commit will fail the same way.

    Meanwhile :meth:`unless_cancelled` reads the execution every
    ``cancel_poll`` seconds: a cancel of the session or of this execution marks
    it, and the work in flight (the model call with its retries and backoff
    sleeps, the tool calls) is cancelled at once instead of running on.
    """

    def __init__(
        self,
        store: LeaseRenewal,
        execution_id: str,
        claim: Claim,
        lease: timedelta,
        cancel_poll: float,
    ) -> None:
        self.claim = claim
        self._store = store
        self._execution_id = execution_id
        self._lease = lease
        self._cancel_poll = cancel_poll
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        # Let a renewal in flight finish: its new update time is the commit's precondition.
        self._stop.set()
        if self._task is not None:
            await self._task

    async def unless_cancelled(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Run ``work``; None if a cancel of this execution arrived first (work cancelled)."""
        task = asyncio.ensure_future(work)
        while True:
            done, _ = await asyncio.wait({task}, timeout=self._cancel_poll)
            if done:
                return task.result()
            current = await self._store.get_execution(self._execution_id)
            if current is None or current.cancel_requested or current.status.is_terminal:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                logger.info("step of %s cut short: cancelled", self._execution_id)
                return None

    async def _beat(self) -> None:
        interval = self._lease.total_seconds() / 3
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=interval)
                return
            except TimeoutError:
                pass
            renewed = await self._store.renew(
                self._execution_id, self.claim, utcnow() + self._lease
            )
            if renewed is None:
                logger.warning("step of %s lost its claim while running", self._execution_id)
                return
            self.claim = renewed

"""Driving the step engine in process: a session to start, and its messages delivered.

Tests that decide which published message is delivered, how often and when
run ``tarsy.engine.steps.handle`` themselves with a recording bus; these are the
pieces they share.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

from tarsy.app import Deps
from tarsy.engine.steps import handle
from tarsy.models import Session, StepMessage, utcnow
from tarsy.persistence.store import Store
from tarsy_dev.fakes.bus import RecordingBus


async def new_session(
    store: Store,
    *,
    alert_type: str = "kubernetes",
    alert_data: str = "pod api-0 crash looping",
    chain_id: str = "default",
) -> Session:
    """A pending session with a ten-minute deadline, written to Firestore."""
    session = Session(
        session_id=f"test-{time.monotonic_ns()}",
        alert_type=alert_type,
        alert_data=alert_data,
        chain_id=chain_id,
        deadline=utcnow() + timedelta(minutes=10),
    )
    await store.create_session(session)
    return session


async def first_message(deps: Deps, session: Session) -> StepMessage:
    """Run the session's start in process: the one message it publishes (its first step)."""
    bus = RecordingBus()
    start = StepMessage(session_id=session.session_id, kind="start_session")
    await handle(start, replace(deps, bus=bus))
    [first] = bus.published
    return first


async def drive(
    deps: Deps, first: StepMessage, *, duplicate: bool = False, limit: int = 200
) -> list[StepMessage]:
    """Deliver ``first`` and every message it leads to (twice each with ``duplicate``).

    Returns:
        The messages delivered, in order.

    Raises:
        AssertionError: Messages were still coming after ``limit`` deliveries.
    """
    bus = RecordingBus()
    queue: list[StepMessage] = [first]
    delivered: list[StepMessage] = []
    for _ in range(limit):
        if not queue:
            return delivered
        step = queue.pop(0)
        for _ in range(2 if duplicate else 1):
            await handle(step, replace(deps, bus=bus))
        delivered.append(step)
        queue.extend(bus.published)
        bus.published.clear()
    raise AssertionError("the session did not settle")

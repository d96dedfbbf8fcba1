"""The scheduler's commands: the sweep (recovery) and the retention pass.

Design constraint: both run apart, each on its own schedule, and neither is a
person's action (no audit record): the sweep publishes again what a lost
message left due, retention stamps what has outlived its time to be removed.
"""

from __future__ import annotations

from typing import Any

from tarsy.app import Deps


async def sweep(deps: Deps) -> dict[str, Any]:
    """Recover what is due: lost starts and steps, expired leases, timed-out sessions."""
    # Imported here: only the scheduler's sweep loads the engine's recovery and the notifiers.
    from tarsy.engine.sweeper import sweep as recover

    return (await recover(deps)).model_dump()


async def retention(deps: Deps) -> dict[str, Any]:
    """Stamp the records past their retention so that Firestore's TTL removes them."""
    return (await deps.store.stamp_retention(deps.settings)).model_dump()

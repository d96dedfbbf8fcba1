"""The sweeper (invariant 3, nothing gets stuck), called by Cloud Scheduler through the api.

* An execution whose step lease expired had its process die mid-step: its
  current step is published again, and the next invocation claims it.
* A session past its deadline is timed out with its unfinished executions.

Both actions are idempotent, so overlapping sweeps are harmless.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import BaseModel, Field

from tarsy.app import Deps
from tarsy.chains import iterate_message, time_out
from tarsy.models import utcnow

logger = logging.getLogger(__name__)


class SweepReport(BaseModel):
    """What one sweep did."""

    republished: list[str] = Field(default_factory=list, description="execution ids")
    timed_out: list[str] = Field(default_factory=list, description="session ids")


async def sweep(deps: Deps, now: datetime | None = None) -> SweepReport:
    """Re-publish steps whose lease expired; time out sessions past their deadline."""
    now = now or utcnow()
    report = SweepReport()
    for session in await deps.store.overdue_sessions(now):
        await time_out(session, deps)
        report.timed_out.append(session.session_id)
    for execution in await deps.store.expired_leases(now):
        if execution.session_id in report.timed_out:
            continue
        await deps.bus.publish(iterate_message(execution, execution.step))
        report.republished.append(execution.execution_id)
    if report.republished or report.timed_out:
        logger.warning(
            "sweep: re-published %d steps, timed out %d sessions",
            len(report.republished),
            len(report.timed_out),
        )
    return report

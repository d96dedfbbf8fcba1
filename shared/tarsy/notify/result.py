"""What one notification attempt came to (recorded in the ledger and logged, never raised).

And the claim that holds a notification: plain values shared by the notifiers
and the ledger's adapter in :mod:`tarsy.persistence.ledger`, so neither imports
the other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tarsy._pydantic import DeferredModel

NotificationStatus = Literal["sent", "failed", "skipped", "duplicate"]


class NotificationResult(DeferredModel):
    """The outcome of notifying about one session's end.

    ``sent``: delivered. ``failed``: tried and not delivered (``detail`` says
    why); the session is unaffected. ``skipped``: nothing to do (not
    configured, not ended). ``duplicate``: another invocation claimed it first.
    """

    notifier: str = "slack"
    status: NotificationStatus
    detail: str | None = Field(default=None, description="why skipped or failed")
    channel: str | None = None
    ts: str | None = Field(default=None, description="the posted message's Slack timestamp")
    thread_ts: str | None = Field(default=None, description="the thread it replied in, if any")
    incident_id: str | None = Field(default=None, description="the PagerDuty incident noted")
    note_id: str | None = Field(default=None, description="the PagerDuty note's id")
    attempt: int | None = Field(default=None, description="1, or more after a takeover or retry")

    @property
    def delivered(self) -> bool:
        """Whether the notification reached its destination in this attempt."""
        return self.status == "sent"


class Claim(DeferredModel):
    """A notification this caller holds: which attempt it is (1, then 2, ... on takeovers)."""

    attempt: int = 1

    @property
    def takeover(self) -> bool:
        """Whether an earlier attempt may have got the message out before it died or failed."""
        return self.attempt > 1

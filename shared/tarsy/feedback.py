"""Feedback on an analysis: what a responder sends, what is stored, and the summary of it all.

Design constraint: pure. A responder marks a finished session's analysis
right, partly right or wrong and may write the real root cause
(``POST /sessions/{id}/feedback``); the api stores the result on the session
(``feedback``, its verdict also at the top level for the list's filter) and
records the action in the session's audit, like every other action. The
cause is masked like alert data before it is stored: it is read again by the
model when a later alert recalls the session (:mod:`tarsy.memory`). The
summary (``tarsy feedback``) counts what the listing's ``action=feedback``
filter returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from pydantic import ConfigDict, Field, field_validator

from tarsy._pydantic import DeferredModel
from tarsy.models import ROOT_CAUSE_CHARS, VERDICTS, Feedback, Verdict
from tarsy.persistence.session_list import SessionSummary
from tarsy.persistence.updates import SessionUpdate

# How the pages, the CLI and the audit name each verdict.
VERDICT_LABELS: dict[Verdict, str] = {
    "right": "right",
    "partly_right": "partly right",
    "wrong": "wrong",
}
RECENT_CORRECTIONS = 10


class FeedbackRequest(DeferredModel):
    """``POST /sessions/{id}/feedback`` body."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict
    root_cause: str | None = Field(default=None, max_length=ROOT_CAUSE_CHARS)

    @field_validator("root_cause")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


def feedback_of(
    request: FeedbackRequest, by: str, now: datetime, mask: Callable[[str], str]
) -> Feedback:
    """The feedback to store: the request's verdict and its cause with secrets masked.

    Args:
        request: What the responder sent.
        by: Their verified e-mail.
        now: When they sent it.
        mask: The alert data's masking (a cause may quote a token or a password).

    Returns:
        The feedback.
    """
    cause = None if request.root_cause is None else mask(request.root_cause)
    return Feedback(verdict=request.verdict, root_cause=cause, by=by, at=now)


def feedback_update(feedback: Feedback) -> SessionUpdate:
    """The session's fields that hold ``feedback`` (replacing any earlier one)."""
    return SessionUpdate(feedback=feedback, verdict=feedback.verdict)


def audit_detail(feedback: Feedback) -> str:
    """How the audit line says it: the verdict, then the cause if one was written."""
    label = VERDICT_LABELS[feedback.verdict]
    return f"{label}: {feedback.root_cause}" if feedback.root_cause else label


class Correction(DeferredModel):
    """A session whose analysis a responder corrected: the cause they wrote."""

    session_id: str
    alert_type: str
    verdict: Verdict
    root_cause: str
    by: str
    at: datetime


class FeedbackSummary(DeferredModel):
    """What responders said of the analyses: counts per verdict, the latest corrections."""

    counts: dict[Verdict, int] = Field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    sessions: int = Field(default=0, description="sessions with feedback counted")
    corrections: list[Correction] = Field(
        default_factory=list, description="the newest corrections first"
    )

    @property
    def right_share(self) -> float | None:
        """The share of judged analyses marked right (None: nothing judged)."""
        return self.counts["right"] / self.sessions if self.sessions else None


def summarize(rows: Iterable[SessionSummary], recent: int = RECENT_CORRECTIONS) -> FeedbackSummary:
    """Count the verdicts of ``rows`` and keep their ``recent`` newest corrections.

    Args:
        rows: Sessions, as the listing returns them (rows without feedback are skipped).
        recent: How many corrections to keep.

    Returns:
        The summary.
    """
    summary = FeedbackSummary()
    corrections: list[Correction] = []
    for row in rows:
        if row.feedback is None:
            continue
        summary.counts[row.feedback.verdict] += 1
        summary.sessions += 1
        if row.feedback.corrected and row.feedback.root_cause is not None:
            corrections.append(
                Correction(
                    session_id=row.session_id,
                    alert_type=row.alert_type,
                    verdict=row.feedback.verdict,
                    root_cause=row.feedback.root_cause,
                    by=row.feedback.by,
                    at=row.feedback.at,
                )
            )
    corrections.sort(key=lambda c: c.at, reverse=True)
    summary.corrections = corrections[:recent]
    return summary

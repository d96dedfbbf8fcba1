"""Triage: what a step message is for, from the state it finds (pure).

Design constraint: at-least-once delivery is made safe here. Only a message for
the execution's current step, not leased by a live step, not stopped with its
session, runs; every other fate is settled without running
(:func:`tarsy.engine.steps.iterate`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from tarsy.engine.roles import rules
from tarsy.models import AgentExecution, ExecutionStatus, Session, StepMessage

Settle = Literal["heal", "fan_in", "ahead", "settled", "cancel", "cancel_one", "time_out", "leased"]
Fate = Literal["run"] | Settle


def triage(
    message: StepMessage, execution: AgentExecution, session: Session, now: datetime
) -> Fate:
    """What to do with an ``iterate`` message, from the state it finds (pure)."""
    if message.step < execution.step:
        if execution.status.is_terminal:
            # A finished execution stays due only while its stage's fan-in is owed.
            return "fan_in" if execution.due_at is not None else "settled"
        return "heal"
    if message.step > execution.step:
        return "ahead"
    if execution.status.is_terminal or execution.status is ExecutionStatus.PAUSED:
        return "settled"
    if rules(execution.role).stopped_with_its_session:  # a chat runs on a finished session
        if session.cancel_requested:
            return "cancel"
        if execution.cancel_requested:
            return "cancel_one"
        if session.deadline is not None and now > session.deadline:
            return "time_out"
    if execution.lease_owner and execution.lease_until and execution.lease_until > now:
        return "leased"
    return "run"

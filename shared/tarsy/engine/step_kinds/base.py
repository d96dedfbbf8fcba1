"""What every kind of step shares: its inputs, the shape of its result, and its protocol.

Design constraint: a step kind only works; it never claims, commits or
publishes. :func:`tarsy.engine.steps.run_claimed` owns the claim, the lease
heartbeat, the one conditional commit, a lost commit and the publish for every
kind, so exactly-once holds for a kind by construction. A kind's ``work`` runs
under the heartbeat and returns a :class:`Work`: the batch to commit and what
follows it once committed (None: a cancel cut it short, nothing to commit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from tarsy.app import Deps
from tarsy.engine.heartbeat import CancelWatch
from tarsy.models import AgentExecution, Session, StepMessage
from tarsy.persistence.step_values import StepCommit, StepState


@dataclass(frozen=True)
class StepInput:
    """One claimed step's inputs: its message, the state read for it, its time budget.

    ``execution`` is the execution as it runs (status active); ``budget`` the
    monotonic deadline that model attempts, retries and tools share.
    """

    message: StepMessage
    state: StepState
    execution: AgentExecution
    session: Session
    budget: float
    deps: Deps


@dataclass(frozen=True)
class Publish:
    """Publish these messages, in order."""

    messages: tuple[StepMessage, ...] = ()


@dataclass(frozen=True)
class FanInOf:
    """The execution finished in a parallel stage: run its stage's fan-in."""

    finished: AgentExecution


@dataclass(frozen=True)
class Advance:
    """The execution finished and the chain goes on: publish, then settle the advance."""

    execution_id: str
    message: StepMessage


FollowOn = Publish | FanInOf | Advance


@dataclass(frozen=True)
class Work:
    """What a step kind did: one batch to commit, then what follows it.

    ``stop_conversations`` are sub-agent conversations to cancel once the batch
    is in (answers that would come too late); ``may_end`` is False only when
    the session cannot have ended with this step (it went on to the next).
    """

    commit: StepCommit
    then: FollowOn = field(default_factory=Publish)
    stop_conversations: frozenset[str] = frozenset()
    may_end: bool = True


class StepKind(Protocol):
    """A kind of step: the work of one claimed step, run under its lease heartbeat."""

    async def work(self, step: StepInput, watch: CancelWatch) -> Work | None:
        """Do the step's work; None if a cancel cut it short (nothing is committed)."""
        ...


def step_due(deps: Deps) -> timedelta:
    """How long after a commit or publish the next step must have been claimed."""
    return timedelta(seconds=deps.settings.step_due_seconds)

"""Collecting answers: a turn that waited for its sub-agents, completed with what they said.

Design constraint: it runs when the last answer came in (that answer publishes
this step) or, past the deadline, when the sweeper re-publishes it: the calls
still unanswered then get an error observation, and their conversations are
cancelled once the completed turn is committed. A message that arrives before
either finds nothing to do and claims nothing (:func:`when_due`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tarsy.app import Deps
from tarsy.engine import transitions
from tarsy.engine.commits import build_commit, follow_on
from tarsy.engine.heartbeat import CancelWatch
from tarsy.engine.iteration import ToolRun, complete_waiting_turn
from tarsy.engine.step_kinds.base import StepInput, Work, step_due
from tarsy.engine.step_kinds.preparing import prepare_turn
from tarsy.engine.sub_agents import PendingTurn, SubAgentAnswer
from tarsy.errors import PermanentError
from tarsy.models import AgentExecution, SubAgentWait, utcnow

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectAnswers:
    """Complete the waiting turn with its sub-agents' answers as the tool results.

    ``silent`` are the calls still unanswered (past the deadline: they get an
    error observation).
    """

    pending: PendingTurn
    answers: dict[str, SubAgentAnswer]
    silent: tuple[str, ...]

    async def work(self, step: StepInput, watch: CancelWatch) -> Work | None:
        """The completed turn's batch, with the waiting cleared; then what follows it."""
        message, deps = step.message, step.deps
        turn = await prepare_turn(step.execution, step.session, step.state, step.budget, deps)
        outcome = complete_waiting_turn(turn, self.pending, self.answers)
        commit, decision = build_commit(
            message, turn, None, ToolRun(), outcome, None, deps.config, step_due(deps)
        )
        commit.execution = transitions.stop_awaiting(commit.execution)
        # Their answers would come too late: stop those conversations.
        dispatches = self.pending.dispatches
        late = frozenset(d.conversation_id for d in dispatches if d.call_id in self.silent)
        return Work(
            commit,
            then=follow_on(message, turn, outcome, commit, decision),
            stop_conversations=late,
        )


async def when_due(
    execution: AgentExecution, wait: SubAgentWait, deps: Deps
) -> CollectAnswers | None:
    """The collecting step, once every answer is in or the deadline passed; else None.

    Raises:
        PermanentError: the waiting turn's record is gone.
    """
    answers = await deps.store.list_answers(execution.execution_id, wait.step)
    silent = tuple(call_id for call_id in wait.call_ids if call_id not in answers)
    if silent and utcnow() < wait.deadline:
        logger.info(
            "%d of %d sub-agent answers still to come for %s",
            len(silent), len(wait.call_ids), execution.execution_id,
        )  # fmt: skip
        return None
    pending = await deps.store.get_pending_turn(execution.execution_id, wait.step)
    if pending is None:
        raise PermanentError(f"the turn of step {wait.step} of {execution.execution_id} is lost")
    return CollectAnswers(pending=pending, answers=answers, silent=silent)

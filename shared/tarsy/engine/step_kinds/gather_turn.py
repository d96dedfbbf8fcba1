"""The gather step as a kind of step: evidence before an investigating agent's first call.

Design constraint: what is gathered and how it is read and committed lives in
:mod:`tarsy.engine.gathering`; this kind only runs it under the step's lease
(a cancel cuts the gathering short) and says what follows: the first model
call, as the next step.
"""

from __future__ import annotations

from dataclasses import dataclass

from tarsy.engine import chains, gathering
from tarsy.engine.heartbeat import CancelWatch
from tarsy.engine.messages import iterate_message
from tarsy.engine.roles import resolve_execution
from tarsy.engine.step_kinds.base import Publish, StepInput, Work, step_due
from tarsy.engine.step_kinds.preparing import agent_listing
from tarsy.models import utcnow


@dataclass(frozen=True)
class GatherTurn:
    """Run the collectors that match the alert, and open the conversation with what they found."""

    async def work(self, step: StepInput, watch: CancelWatch) -> Work | None:
        """The gathered calls, detections and rewritten opening as one batch; then step 2."""
        message, deps, execution, session = step.message, step.deps, step.execution, step.session
        config = resolve_execution(deps.config, session, execution)
        listing = await agent_listing(config, step.state, step.budget, deps)
        work = gathering.gather_evidence(deps.config, config, session, deps.tools, listing)
        gathered = await watch.unless_cancelled(work)
        if gathered is None:  # cancelled while gathering
            return None
        stage = execution.stage
        context = await chains.previous_context(session, stage, deps) if stage > 0 else ""
        opening = gathering.opening_with_evidence(deps.config, config, session, context, gathered)
        commit = gathering.gather_commit(
            message, execution, session, opening.messages, gathered, None,
            utcnow() + step_due(deps), brief_chars=opening.brief_chars,
        )  # fmt: skip
        done = execution.model_copy(update={"gather_pending": False})
        return Work(commit, then=Publish((iterate_message(done, message.step + 1),)), may_end=False)

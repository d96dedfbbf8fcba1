"""The model turn: one model call and its tools, the step every agent iterates with.

Design constraint: a turn that messages sub-agents does not complete here. It
commits as waiting (the call, the other tools' results, the messages sent and
the conversations started or continued, all in its one batch), and the step
that collects the answers (:mod:`tarsy.engine.step_kinds.collect_answers`)
writes the turn's messages. Waiting is an outcome of a model turn, not a kind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from tarsy import telemetry
from tarsy.agent.strategies.base import IterationOutcome
from tarsy.config.schema import TarsyConfig
from tarsy.engine import sub_agents, transitions
from tarsy.engine.commits import build_commit, follow_on, step_records
from tarsy.engine.heartbeat import CancelWatch
from tarsy.engine.iteration import ModelCall, ToolRun, Turn, run_iteration
from tarsy.engine.messages import FIRST_ITERATION_STEP, iterate_message
from tarsy.engine.step_kinds.base import Publish, StepInput, Work, step_due
from tarsy.engine.step_kinds.preparing import live_ports, prepare_turn
from tarsy.engine.sub_agents import PendingTurn
from tarsy.log import fields
from tarsy.models import StepMessage, SubAgentWait, utcnow
from tarsy.persistence.step_values import FollowUp, NewConversation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelTurn:
    """Call the model, run the tools it asks for, and decide what follows."""

    async def work(self, step: StepInput, watch: CancelWatch) -> Work | None:
        """The turn's batch: its records and outcome, or its wait for sub-agents."""
        message, deps, execution = step.message, step.deps, step.execution
        with telemetry.agent_span(
            execution.agent,
            session_id=message.session_id,
            execution_id=message.execution_id,
            step=message.step,
            iteration=execution.iteration + 1,
        ) as agent:
            turn = await prepare_turn(execution, step.session, step.state, step.budget, deps)
            agent.set_model(
                provider_name=telemetry.genai_provider_name(turn.config.provider, deps.settings),
                model=turn.config.provider.model,
            )
            ports = live_ports(turn, message.step, deps)
            done = await watch.unless_cancelled(run_iteration(turn, message.step, ports))
        if done is None:  # cancelled while the model or the tools ran
            return None
        call, tools, outcome = done.call, done.tools, done.outcome
        due = step_due(deps)
        if tools.dispatches:
            return waiting(message, turn, call, tools, outcome, deps.config, utcnow(), due)
        commit, decision = build_commit(message, turn, call, tools, outcome, None, deps.config, due)
        return Work(
            commit,
            then=follow_on(message, turn, outcome, commit, decision),
            may_end=outcome.next != "continue",
        )


def waiting(
    message: StepMessage,
    turn: Turn,
    call: ModelCall,
    tools: ToolRun,
    outcome: IterationOutcome,
    config: TarsyConfig,
    now: datetime,
    due: timedelta,
) -> Work:
    """A turn that messaged sub-agents, committed as waiting; then their conversations run.

    The turn's messages are written by the step that collects the answers;
    this one writes what happened so far: the call, the other tools' results,
    the messages sent, and the conversations.
    """
    assert call.result is not None
    timeout = timedelta(seconds=turn.config.sub_agent_timeout_seconds)
    wait = SubAgentWait(
        step=message.step,
        call_ids=[d.call_id for d in tools.dispatches],
        deadline=now + timeout,
    )
    shown, _answers_later = sub_agents.split_timeline(outcome.timeline, tools.dispatches)
    new, follow_ups = conversation_writes(turn, tools, message.step, now + due, config)
    commit = step_records(message, turn, call, tools, None, config, now).model_copy(
        update={
            "timeline": shown,
            # The iteration counts when its answers are in and the turn is complete.
            "execution": transitions.await_sub_agents(
                transitions.ExecutionUpdate(consecutive_failures=0), wait
            ),
            "pending_turn": PendingTurn(
                step=message.step,
                result=call.result,
                tool_results=tools.results,
                dispatches=tools.dispatches,
            ),
            "new_conversations": new,
            "follow_ups": follow_ups,
        }
    )
    started = [iterate_message(n.execution, FIRST_ITERATION_STEP) for n in new]
    continued = [
        iterate_message(tools.conversations[f.execution_id][0], f.step) for f in follow_ups
    ]
    logger.info(
        "messaging %d sub-agents; waiting until %s",
        len(tools.dispatches),
        wait.deadline.isoformat(),
        extra=fields(session_id=turn.session.session_id, execution_id=message.execution_id),
    )
    return Work(commit, then=Publish((*started, *continued)))


def conversation_writes(
    turn: Turn, tools: ToolRun, step: int, due: datetime, config: TarsyConfig
) -> tuple[list[NewConversation], list[FollowUp]]:
    """The conversations a turn starts and the follow-ups it sends (pure)."""
    parent = turn.execution
    new: list[NewConversation] = []
    follow_ups: list[FollowUp] = []
    for dispatch in tools.dispatches:
        agent = config.resolve_sub_agent(turn.session.chain_id, dispatch.agent_name)
        event = sub_agents.message_event(parent.agent, dispatch)
        if dispatch.new:
            new.append(
                NewConversation(
                    execution=sub_agents.sub_agent_execution(
                        parent, dispatch, step, agent, first_step=FIRST_ITERATION_STEP, due=due
                    ),
                    opening=sub_agents.sub_agent_opening(
                        agent, turn.session, parent.agent, dispatch.message
                    ),
                    timeline=[event],
                )
            )
            continue
        conversation, read_time = tools.conversations[dispatch.conversation_id]
        follow_ups.append(
            FollowUp(
                execution_id=conversation.execution_id,
                step=conversation.step,
                update=transitions.reopen_sub_agent(
                    conversation, dispatch.call_id, step, agent.max_iterations, due
                ),
                read_time=read_time,
                message=sub_agents.follow_up_message(parent.agent, dispatch.message),
                event=event,
            )
        )
    return new, follow_ups

"""Deterministic ids, new executions and the step messages that run them (pure).

Design constraint: Pub/Sub delivers at least once, so everything a handler
creates must have an id it can compute again: a redelivered message then
overwrites or finds what its first delivery wrote instead of duplicating it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tarsy.config.schema import ResolvedAgentConfig
from tarsy.engine.roles import rules
from tarsy.models import AgentExecution, ExecutionRole, Session, StepMessage

FIRST_ITERATION_STEP = 1  # step 0 is the set-up that writes the opening messages
SUMMARY_STAGE = -1  # the executive summary belongs to no stage
CHAT_STAGE = -2  # nor do follow-up chats
SCORING_STAGE = -3  # nor does the judge


def execution_id_for(session_id: str, stage_index: int, agent_index: int) -> str:
    """The deterministic id of an agent execution (redelivery creates nothing new)."""
    return f"{session_id}-s{stage_index:02d}-a{agent_index:02d}"


def synthesis_id_for(session_id: str, stage_index: int) -> str:
    """The id of a parallel stage's synthesis execution."""
    return f"{session_id}-s{stage_index:02d}-synthesis"


def summary_id_for(session_id: str) -> str:
    """The id of a session's executive-summary execution."""
    return f"{session_id}-summary"


def scoring_id_for(session_id: str, number: int) -> str:
    """The id of a session's ``number``-th scoring (0: at its end; more: re-scores)."""
    return f"{session_id}-score-{number:02d}"


def chat_id_for(session_id: str, number: int) -> str:
    """The id of a session's ``number``-th follow-up chat."""
    return f"{session_id}-chat-{number:03d}"


def iterate_message(execution: AgentExecution, step: int) -> StepMessage:
    """The message that runs ``step`` of ``execution`` (its gather phase while one is pending).

    The kind is for the people reading logs and queues: the step function decides
    what a step does from the execution it reads, so a ``gather`` and an
    ``iterate`` message for the same step are the same message.
    """
    return StepMessage(
        session_id=execution.session_id,
        execution_id=execution.execution_id,
        step=step,
        kind="gather" if execution.gather_pending else "iterate",
    )


# A re-publish waits 1, 2, 4, then 8 due intervals before the next one (6 min at 45 s).
MAX_REPUBLISH_DOUBLINGS = 3


def due_after_republish(execution: AgentExecution, now: datetime, due: timedelta) -> datetime:
    """When an execution re-published now is due again (pure).

    A message re-published once and still not claimed an interval later is more
    likely queued behind a backlog than lost again: each further copy waits twice
    as long, so a long queue is not filled with copies of the same step.
    """
    doublings: int = min(execution.republished, MAX_REPUBLISH_DOUBLINGS)
    return now + due * (1 << doublings)


def start_stage_message(session_id: str, stage: int) -> StepMessage:
    """The message that starts stage ``stage`` (stage 0 is ``start_session``)."""
    if stage == 0:
        return StepMessage(session_id=session_id, kind="start_session")
    return StepMessage(session_id=session_id, stage=stage, kind="start_stage")


def strategy_of(config: ResolvedAgentConfig, role: ExecutionRole) -> str:
    """An execution's strategy: ``compact`` for an investigating agent on the compact path.

    The compact path (tarsy.agent.compact) is for agents with tools: it first
    answers without them, and its follow-up uses the agent's own strategy.
    """
    if config.compact is not None and config.mcp_servers and role == "agent":
        return "compact"
    return config.iteration_strategy


def new_execution(
    session: Session,
    stage: int,
    index: int,
    role: ExecutionRole,
    config: ResolvedAgentConfig,
    execution_id: str,
    due: datetime,
    *,
    gathers: bool = False,
) -> AgentExecution:
    """A pending execution of ``role``, due to run its first step by ``due``.

    With ``gathers``, its first step is its gather phase (tarsy.engine.gathering).
    """
    return AgentExecution(
        execution_id=execution_id,
        session_id=session.session_id,
        stage=stage,
        role=role,
        agent=config.agent,
        agent_index=index,
        strategy=rules(role).strategy or strategy_of(config, role),
        provider=config.provider_name,
        step=FIRST_ITERATION_STEP,
        max_iterations=config.max_iterations,
        due_at=due,
        gather_pending=gathers and role == "agent",
    )

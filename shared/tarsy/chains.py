"""Agent chains: starting stages, and what follows when an execution ends.

Every agent, synthesis and executive summary is an execution with its own chain
of step messages. What follows an execution's end is decided in two ways:

* **In its last step's commit** (:func:`plan_advance`), when one execution
  alone decides it: the agent of a single-agent stage, a synthesis, the
  executive summary. The stage result, the session's status and the next
  execution are written in the same atomic batch as the step, and the next
  message is published after it: no extra round trips.
* **By fan-in** (:func:`after_execution`), when several executions must have
  ended: the agents of a parallel stage. Each finished execution writes its
  own completion marker in the commit of its last step; the handler that sees
  the stage complete claims the stage's ``advance`` marker with ``create()``
  (contention-free, invariant 1) and moves on. The same function heals a
  planned advance whose publish was lost: a redelivered message for a
  finished execution runs it, and everything it does is idempotent
  (``create()`` of deterministic documents, heal-publish of unstarted
  executions).

Status changes come from :mod:`tarsy.transitions`; this module never writes a
Firestore field name.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from pydantic import BaseModel, Field, ValidationError

from tarsy import transitions
from tarsy.app import Deps
from tarsy.config.schema import ChainConfig, ResolvedAgentConfig, TarsyConfig
from tarsy.context_formatter import ExecutionRecord, format_stage, format_stages
from tarsy.errors import InputError
from tarsy.log import fields
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ErrorInfo,
    ExecutionRole,
    ExecutionStatus,
    Session,
    Stage,
    StepMessage,
    TimelineEvent,
    TimelineEventType,
    utcnow,
)
from tarsy.prompts import delimit, initial_messages, system_prompt
from tarsy.runbooks import RunbookFetch, resolve_runbook
from tarsy.scoring import JudgeInput, SessionScore, TimelineItem, build_judge_prompt
from tarsy.strategies.base import budget_crossed
from tarsy.sub_agents import answer_of
from tarsy.tool_selection import apply_selection
from tarsy.transitions import SessionUpdate, StageUpdate

logger = logging.getLogger(__name__)

FIRST_ITERATION_STEP = 1  # step 0 is the set-up that writes the opening messages
SUMMARY_STAGE = -1  # the executive summary belongs to no stage
CHAT_STAGE = -2  # nor do follow-up chats
SCORING_STAGE = -3  # nor does the judge
ADVANCE_MARKER = "advance"
SYNTHESIS_DONE_MARKER = "synthesis-advance"


class ChatConflictError(InputError):
    """Two questions raced for the same chat number; the caller may retry."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


# ─── ids and messages ─────────────────────────────────────────────────────────


def execution_id_for(session_id: str, stage_index: int, agent_index: int) -> str:
    """The deterministic id of an agent execution (redelivery creates nothing new)."""
    return f"{session_id}-s{stage_index:02d}-a{agent_index:02d}"


def synthesis_id_for(session_id: str, stage_index: int) -> str:
    """The id of a parallel stage's synthesis execution."""
    return f"{session_id}-s{stage_index:02d}-synthesis"


def summary_id_for(session_id: str) -> str:
    """The id of a session's executive-summary execution."""
    return f"{session_id}-summary"


def iterate_message(execution: AgentExecution, step: int) -> StepMessage:
    """The message that runs ``step`` of ``execution``."""
    return StepMessage(
        session_id=execution.session_id,
        execution_id=execution.execution_id,
        step=step,
        kind="iterate",
    )


def start_stage_message(session_id: str, stage: int) -> StepMessage:
    """The message that starts stage ``stage`` (stage 0 is ``start_session``)."""
    if stage == 0:
        return StepMessage(session_id=session_id, kind="start_session")
    return StepMessage(session_id=session_id, stage=stage, kind="start_stage")


def _new_execution(
    session: Session, stage: int, index: int, role: ExecutionRole, config: ResolvedAgentConfig,
    execution_id: str, due: datetime,
) -> AgentExecution:  # fmt: skip
    strategy: str = config.iteration_strategy
    if role == "summary":
        strategy = "executive-summary"
    elif role == "scoring":
        strategy = "judge"
    return AgentExecution(
        execution_id=execution_id,
        session_id=session.session_id,
        stage=stage,
        role=role,
        agent=config.agent,
        agent_index=index,
        strategy=strategy,
        provider=config.provider_name,
        step=FIRST_ITERATION_STEP,
        max_iterations=config.max_iterations,
        due_at=due,
    )


def resolve_execution(
    config: TarsyConfig, session: Session, execution: AgentExecution
) -> ResolvedAgentConfig:
    """The configuration an execution runs with, by its role, with the alert's tool choice."""
    if execution.role == "agent":
        resolved = config.resolve(session.chain_id, execution.stage, execution.agent_index)
    elif execution.role == "synthesis":
        resolved = config.resolve_role(session.chain_id, execution.stage, "synthesis")
    elif execution.role == "chat":
        resolved = config.resolve_role(session.chain_id, None, "chat")
    elif execution.role == "scoring":
        resolved = config.resolve_role(session.chain_id, None, "scoring")
    elif execution.role == "sub_agent":
        resolved = config.resolve_sub_agent(session.chain_id, execution.agent)
    else:
        resolved = config.resolve_role(session.chain_id, None, "summary")
    return apply_selection(resolved, session.mcp, execution.role)


def stage_status(statuses: list[str], policy: str) -> ExecutionStatus:
    """A stage's status from its agents' (seed 003's aggregation, with success_policy)."""
    values = [ExecutionStatus(s) for s in statuses]
    completed = sum(1 for s in values if s is ExecutionStatus.COMPLETED)
    if values and all(s is ExecutionStatus.CANCELLED for s in values):
        return ExecutionStatus.CANCELLED
    if policy == "any":
        return ExecutionStatus.COMPLETED if completed else ExecutionStatus.FAILED
    if completed == len(values):
        return ExecutionStatus.COMPLETED
    if any(s is ExecutionStatus.TIMED_OUT for s in values):
        return ExecutionStatus.TIMED_OUT
    # Some agents cancelled on their own (a cancelled session never gets here): under
    # "all", the stage did not get every result it needs.
    return ExecutionStatus.FAILED


def stage_error(stage_name: str, status: ExecutionStatus, reasons: list[str]) -> ErrorInfo:
    """Why a session ended with a stage that did not complete."""
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    return ErrorInfo(
        message=f"stage {stage_name!r} ended {status.value}{detail}",
        code=f"stage_{status.value}",
        retryable=False,
    )


# ─── openings ─────────────────────────────────────────────────────────────────


def summary_opening(
    config: TarsyConfig, session: Session, analysis: str, due: datetime
) -> tuple[AgentExecution, list[ConversationMessage]]:
    """The executive-summary execution of a session and its opening messages."""
    resolved = config.resolve_role(session.chain_id, None, "summary")
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(
            role="user",
            content=f"Final analysis of the investigation:\n{delimit('ANALYSIS', analysis)}",
        ),
    ]
    execution = _new_execution(session, SUMMARY_STAGE, 0, "summary", resolved,
                               summary_id_for(session.session_id), due)  # fmt: skip
    return execution, opening


def _due(deps: Deps) -> datetime:
    """When a step published now must have been claimed."""
    return utcnow() + timedelta(seconds=deps.settings.step_due_seconds)


# ─── the advance planned in an execution's last commit ────────────────────────


class Advance(BaseModel):
    """What an execution's last step writes besides itself, and what it publishes after."""

    stage: StageUpdate | None = None
    session: SessionUpdate | None = None
    create: AgentExecution | None = None
    opening: list[ConversationMessage] = Field(default_factory=list)
    publish: StepMessage | None = None


def plan_advance(
    config: TarsyConfig,
    session: Session,
    execution: AgentExecution,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
    due: datetime,
) -> Advance | None:
    """What follows ``execution`` ending in ``status``, when it alone decides; else None.

    None means fan-in: the agents of a parallel stage move on together through
    :func:`after_execution`, and a sub-agent answers its parent there.
    """
    if execution.role == "sub_agent":
        return None
    if execution.role == "chat":
        return Advance()  # a chat answers on a finished session; nothing follows it
    if execution.role == "scoring":
        return Advance(session=score_verdict(session, execution, status, analysis, now))
    if session.status.is_terminal:
        return Advance()
    if session.cancel_requested:
        return Advance(session=transitions.cancel_session(session, now))
    if execution.role == "summary":
        if config.chain(session.chain_id).scoring:
            return None  # the judge's opening reads the whole session: after_execution
        # The investigation itself succeeded even when only its summary did not.
        text = analysis if status is ExecutionStatus.COMPLETED else None
        return Advance(
            session=transitions.complete_session(
                session, now, executive_summary=text, with_summary=True
            )
        )
    chain = config.chain(session.chain_id)
    stage_config = chain.stages[execution.stage]
    if execution.role == "agent" and stage_config.is_parallel:
        return None
    finished = {execution.execution_id: status.value} if execution.role == "agent" else None
    stage = transitions.end_stage(status, now, finished)
    if status is not ExecutionStatus.COMPLETED:
        reasons = [f"{execution.agent}: {execution.error.message}"] if execution.error else []
        error = stage_error(stage_config.name, status, reasons)
        return Advance(
            stage=stage, session=transitions.fail_session(session, error, now, status=status)
        )
    spent = session_spent(config, session)
    if execution.stage + 1 < len(chain.stages) and spent is None:
        return Advance(
            stage=stage,
            session=transitions.await_stage(session, execution.stage + 1, due),
            publish=start_stage_message(session.session_id, execution.stage + 1),
        )
    final = with_budget_note(analysis or "", spent, skipped_stages(chain, execution.stage))
    if chain.executive_summary:
        summary, opening = summary_opening(config, session, final, due)
        update = transitions.record_final_analysis(session, final)
        return Advance(
            stage=stage,
            session=transitions.cut_short_by_budget(update, spent),
            create=summary,
            opening=opening,
            publish=iterate_message(summary, FIRST_ITERATION_STEP),
        )
    ended = transitions.complete_session(session, now, final_analysis=final)
    return Advance(stage=stage, session=transitions.cut_short_by_budget(ended, spent))


def session_spent(config: TarsyConfig, session: Session) -> str | None:
    """What the session's spend, as committed, has crossed of its chain's budget, or None."""
    budget = config.session_budget(session.chain_id)
    return budget_crossed(session.tokens.total_tokens, session.cost, budget)


def skipped_stages(chain: ChainConfig, index: int) -> list[str]:
    """The names of the chain's stages after stage ``index``."""
    return [stage.name for stage in chain.stages[index + 1 :]]


def with_budget_note(analysis: str, spent: str | None, skipped: list[str]) -> str:
    """The chain's analysis, saying so when a spent budget ended the session early (pure).

    An agent that was made to conclude already opens its analysis with "Cut
    short"; what is added here is the stages that did not run at all.
    """
    if spent is None or not skipped:
        return analysis
    note = f"_(Budget spent: {spent}; stages not run: {', '.join(skipped)}.)_"
    return f"{analysis.rstrip()}\n\n{note}" if analysis.strip() else note


def score_verdict(
    session: Session,
    execution: AgentExecution,
    status: ExecutionStatus,
    analysis: str | None,
    now: datetime,
) -> SessionUpdate:
    """What a scoring execution's end writes: the score, and the end of a session it closes.

    Scoring is fail-open: a judge that failed leaves the reason in
    ``score_error`` and the session completes all the same.
    """
    if status is ExecutionStatus.COMPLETED and analysis:
        report = SessionScore.model_validate_json(analysis)
        verdict = transitions.record_score(report.score, report.model_dump(mode="json"), None)
    else:
        reason = execution.error.message if execution.error else f"scoring {status.value}"
        verdict = transitions.record_score(None, None, reason)
    if session.status.is_terminal:
        return verdict  # a re-score of a finished session
    ended = transitions.complete_session(session, now)
    return ended.model_copy(update=verdict.model_dump(exclude_unset=True))


# ─── starting ─────────────────────────────────────────────────────────────────


async def _first_step_may_be_lost(execution_id: str, deps: Deps) -> bool:
    """Whether an existing execution's first message may never have been published."""
    current = await deps.store.get_execution(execution_id)
    if current is None or current.published_step >= FIRST_ITERATION_STEP:
        return False  # gone, or its first message already arrived (the claim records it)
    if current.status.is_terminal or current.lease_owner:
        return False
    return not await deps.store.was_published(execution_id, FIRST_ITERATION_STEP)


async def start_execution(
    execution: AgentExecution, opening: list[ConversationMessage], deps: Deps
) -> None:
    """Create an execution and publish its first step; a redelivered start heals."""
    created = await deps.store.create_execution(execution, opening)
    if not created and not await _first_step_may_be_lost(execution.execution_id, deps):
        return
    await deps.bus.publish(iterate_message(execution, FIRST_ITERATION_STEP))
    # So that a redelivered fan-in does not publish it again (a crash before this
    # line only costs a duplicate message, which the step's claim absorbs).
    await deps.store.mark_published([execution.execution_id], FIRST_ITERATION_STEP)


async def previous_context(session: Session, before: int, deps: Deps) -> str:
    """The ContextFormatter text of stages ``0 .. before-1``."""
    chain = deps.config.chain(session.chain_id)
    executions = await deps.store.list_executions(session.session_id)
    stages: list[tuple[str, list[ExecutionRecord]]] = []
    for index in range(before):
        in_stage = [e for e in executions if e.stage == index]
        synthesis = [e for e in in_stage if e.role == "synthesis"]
        chosen = synthesis or [e for e in in_stage if e.role == "agent"]
        records = [
            ExecutionRecord(execution=e, timeline=await deps.store.list_timeline(e.execution_id))
            for e in chosen
        ]
        stages.append((chain.stages[index].name, records))
    return format_stages(stages)


async def start_stage(session_id: str, index: int, deps: Deps) -> None:
    """Handle ``start_session`` (stage 0) and ``start_stage``: create and publish the stage."""
    session = await deps.store.get_session(session_id)
    if session is None:
        logger.error("session %s does not exist; dropping", session_id)
        return
    if session.status.is_terminal:
        return
    if session.cancel_requested:
        await deps.store.update_session(session_id, transitions.cancel_session(session, utcnow()))
        return
    runbook = None
    if index == 0:  # a runbook URL is fetched once, as the session starts (tarsy.runbooks)
        chain = deps.config.chain(session.chain_id)
        masking = deps.config.alert_masking
        runbook = await resolve_runbook(session, chain.runbook_url, deps.settings, masking)
    await _start_stage(session, index, deps, runbook)


async def _start_stage(
    session: Session, index: int, deps: Deps, runbook: RunbookFetch | None = None
) -> None:
    """Create stage ``index`` with its executions (atomically) and publish their first steps.

    A ``runbook`` fetched for the first stage is recorded on the session in the
    same batch, so it is fetched again only if that batch never committed.
    """
    chain = deps.config.chain(session.chain_id)
    stage_config = chain.stages[index]
    if runbook is not None:
        session = runbook.on(session)  # the opening prompts show the fetched text
    context = await previous_context(session, index, deps) if index else ""
    executions: list[AgentExecution] = []
    opening: dict[str, list[ConversationMessage]] = {}
    for agent_index, _ in enumerate(stage_config.placed_agents):
        resolved = deps.config.resolve(session.chain_id, index, agent_index)
        execution = _new_execution(
            session, index, agent_index, "agent", resolved,
            execution_id_for(session.session_id, index, agent_index), _due(deps),
        )  # fmt: skip
        executions.append(execution)
        opening[execution.execution_id] = initial_messages(resolved, session, context)
    parallel_type = "single"
    if len(executions) > 1:
        parallel_type = "replica" if stage_config.replicas > 1 else "multi_agent"
    now = utcnow()
    stage = Stage(
        index=index,
        name=stage_config.name,
        status=ExecutionStatus.ACTIVE,
        parallel_type=parallel_type,
        agents=[e.agent for e in executions],
        execution_ids=[e.execution_id for e in executions],
        success_policy=stage_config.success_policy,
        started_at=now,
    )
    update = transitions.start_stage_of_session(session, index, now)
    if runbook is not None:
        update = transitions.with_runbook(update, runbook.url, runbook.text, runbook.error)
    created = await deps.store.start_stage(session.session_id, stage, executions, opening, update)
    published: list[str] = []
    for execution in executions:
        # A redelivered start publishes only what may never have gone out.
        if not created and not await _first_step_may_be_lost(execution.execution_id, deps):
            continue
        await deps.bus.publish(iterate_message(execution, FIRST_ITERATION_STEP))
        published.append(execution.execution_id)
    await deps.store.mark_published(published, FIRST_ITERATION_STEP)


# ─── fan-in, and healing a lost advance ───────────────────────────────────────


async def after_execution(execution: AgentExecution, deps: Deps) -> None:
    """Decide what comes next once ``execution`` is terminal (safe to repeat)."""
    if execution.role in ("chat", "scoring"):
        return  # nothing follows a chat or a judge (their commit wrote what they decide)
    if execution.role == "sub_agent":
        await answer_parent(execution, deps)
        return
    session = await deps.store.get_session(execution.session_id)
    if session is None or session.status.is_terminal or session.cancel_requested:
        if session is not None and not session.status.is_terminal:
            await deps.store.update_session(
                session.session_id, transitions.cancel_session(session, utcnow())
            )
        # Nothing follows: the execution's fan-in is no longer owed.
        await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())
        return
    if execution.role == "summary":
        await _finish_session(session, execution, deps)
    elif execution.role == "synthesis":
        await _after_stage(
            session, execution.stage, execution.status, deps,
            analysis=execution.final_analysis, synthesis=True,
        )  # fmt: skip
        await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())
    else:
        await _after_agent(session, execution, deps)


async def answer_parent(execution: AgentExecution, deps: Deps) -> None:
    """A sub-agent ended its turn: record its answer; the last answer wakes the parent.

    Safe to repeat: the answer document is deterministic, and a ``create()``
    of the "answered" marker lets exactly one of the sub-agents publish the
    parent's next step (contention-free, as a parallel stage's fan-in). The
    parent's due time moves to the normal step due time first, so a publish
    lost after the claim is healed by the sweeper, not the long answer timeout.
    """
    parent_id, step = execution.parent_execution_id, execution.parent_step
    if parent_id is not None and step is not None and execution.parent_tool_call_id:
        await deps.store.record_answer(parent_id, step, answer_of(execution, utcnow()))
        parent = await deps.store.get_execution(parent_id)
        wait = parent.awaiting if parent is not None else None
        if parent is not None and wait is not None and wait.step == step:
            answers = await deps.store.list_answers(parent_id, step)
            if set(wait.call_ids) <= set(answers) and await deps.store.claim_answered(
                parent_id, step
            ):
                await deps.store.update_execution(parent_id, transitions.answers_in(_due(deps)))
                await deps.bus.publish(iterate_message(parent, parent.step))
                logger.info(
                    "every sub-agent answered step %s of %s", step, parent_id,
                    extra=fields(session_id=execution.session_id),
                )  # fmt: skip
    await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())


async def _after_agent(session: Session, execution: AgentExecution, deps: Deps) -> None:
    chain = deps.config.chain(session.chain_id)
    stage_config = chain.stages[execution.stage]
    index = execution.stage
    if stage_config.is_parallel:
        finished = await deps.store.finished_agents(session.session_id, index)
        if len(finished) < len(stage_config.placed_agents):
            # Others are still running; the last one to finish (which sees every
            # completion marker, all committed before its query) moves on.
            await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())
            return
    else:
        finished = {execution.execution_id: execution.status.value}
    if not await deps.store.claim_marker(session.session_id, index, ADVANCE_MARKER):
        # Another handler moved on, or crashed while doing so. Everything below is
        # idempotent (deterministic creates, heal-publish of unstarted executions),
        # so running it again completes a crashed advance and duplicates nothing.
        logger.info("stage %s advance already claimed; re-checking", index)
    status = stage_status(list(finished.values()), stage_config.success_policy)
    log = fields(session_id=session.session_id, stage=index)
    logger.info("stage %s agents done: %s", stage_config.name, status.value, extra=log)
    if status is ExecutionStatus.COMPLETED and stage_config.is_parallel:
        await _start_synthesis(session, index, stage_config.name, finished, deps)
    else:
        analysis = execution.final_analysis or "" if not stage_config.is_parallel else None
        await _after_stage(session, index, status, deps, analysis=analysis, finished=finished)
    # The stage moved on: its agents' fan-in is no longer due (the sweeper stops re-running it).
    await deps.store.update_executions(list(finished), transitions.fan_in_done())


async def _start_synthesis(
    session: Session, index: int, name: str, finished: dict[str, str], deps: Deps
) -> None:
    resolved = deps.config.resolve_role(session.chain_id, index, "synthesis")
    executions = [
        e
        for e in await deps.store.list_executions(session.session_id)
        if e.stage == index and e.role == "agent"
    ]
    records = [
        ExecutionRecord(execution=e, timeline=await deps.store.list_timeline(e.execution_id))
        for e in executions
    ]
    results = format_stage(name, records)
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(
            role="user",
            content=(
                f"Alert type: {session.alert_type}\n\n{delimit('ALERT DATA', session.alert_data)}"
                f"\n\nResults of the agents that investigated in parallel:\n"
                f"{delimit('PARALLEL RESULTS', results)}\n\n"
                "Write the merged analysis in Markdown."
            ),
        ),
    ]
    synthesis_id = synthesis_id_for(session.session_id, index)
    execution = _new_execution(session, index, len(finished), "synthesis", resolved,
                               synthesis_id, _due(deps))  # fmt: skip
    await deps.store.update_stage(
        session.session_id, index, transitions.start_synthesis(finished, synthesis_id)
    )
    await start_execution(execution, opening, deps)


async def _after_stage(
    session: Session,
    index: int,
    status: ExecutionStatus,
    deps: Deps,
    *,
    analysis: str | None,
    finished: dict[str, str] | None = None,
    synthesis: bool = False,
) -> None:
    """A stage has its result (its agent's, or its synthesis'): record it and move on."""
    if synthesis and not await deps.store.claim_marker(
        session.session_id, index, SYNTHESIS_DONE_MARKER
    ):
        logger.info("stage %s synthesis advance already claimed; re-checking", index)
    now = utcnow()
    await deps.store.update_stage(
        session.session_id, index, transitions.end_stage(status, now, finished)
    )
    chain = deps.config.chain(session.chain_id)
    if status is not ExecutionStatus.COMPLETED:
        reasons = [
            f"{e.agent}: {e.error.message}"
            for e in await deps.store.list_executions(session.session_id)
            if e.stage == index and e.error is not None
        ]
        error = stage_error(chain.stages[index].name, status, reasons)
        await deps.store.update_session(
            session.session_id, transitions.fail_session(session, error, now, status=status)
        )
        return
    spent = session_spent(deps.config, session)
    if index + 1 < len(chain.stages) and spent is None:
        if await deps.store.get_stage(session.session_id, index + 1) is None:
            await deps.store.update_session(
                session.session_id, transitions.await_stage(session, index + 1, _due(deps))
            )
            await deps.bus.publish(start_stage_message(session.session_id, index + 1))
        return
    final = with_budget_note(analysis or "", spent, skipped_stages(chain, index))
    if chain.executive_summary:
        if session.final_analysis is None:
            update = transitions.record_final_analysis(session, final)
            await deps.store.update_session(
                session.session_id, transitions.cut_short_by_budget(update, spent)
            )
        summary, opening = summary_opening(deps.config, session, final, _due(deps))
        await start_execution(summary, opening, deps)
    else:
        ended = transitions.complete_session(session, now, final_analysis=final)
        await deps.store.update_session(
            session.session_id, transitions.cut_short_by_budget(ended, spent)
        )


async def _finish_session(session: Session, summary: AgentExecution, deps: Deps) -> None:
    completed = summary.status is ExecutionStatus.COMPLETED
    if not completed:
        # The investigation itself succeeded; only its summary did not.
        logger.warning("executive summary of %s failed", session.session_id)
    if deps.config.chain(session.chain_id).scoring and deps.settings.scoring_off_reason:
        update = transitions.complete_session(
            session,
            utcnow(),
            executive_summary=summary.final_analysis if completed else None,
            with_summary=True,
        )
        verdict = transitions.record_score(
            None, None, f"not scored ({deps.settings.scoring_off_reason})"
        )
        await deps.store.update_session(
            session.session_id, update.model_copy(update=verdict.model_dump(exclude_unset=True))
        )
        await deps.store.update_executions([summary.execution_id], transitions.fan_in_done())
        return
    if deps.config.chain(session.chain_id).scoring:
        text = summary.final_analysis if completed else None
        if session.executive_summary is None and text is not None:
            await deps.store.update_session(
                session.session_id, transitions.record_executive_summary(session, text)
            )
        await start_scoring(session.model_copy(update={"executive_summary": text}), 0, deps)
        await deps.store.update_executions([summary.execution_id], transitions.fan_in_done())
        return
    update = transitions.complete_session(
        session,
        utcnow(),
        executive_summary=summary.final_analysis if completed else None,
        with_summary=True,
    )
    await deps.store.update_session(session.session_id, update)


# ─── scoring ──────────────────────────────────────────────────────────────────


def scoring_id_for(session_id: str, number: int) -> str:
    """The id of a session's ``number``-th scoring (0: at its end; more: re-scores)."""
    return f"{session_id}-score-{number:02d}"


async def judge_input(session: Session, deps: Deps) -> JudgeInput:
    """The session as the judge reads it: alert, timeline, analyses, the tools offered."""
    timeline: list[TimelineItem] = []
    tools: set[str] = set()
    for execution in await deps.store.list_executions(session.session_id):
        if execution.role in ("chat", "scoring"):
            continue
        if execution.role == "agent":
            resolved = resolve_execution(deps.config, session, execution)
            tools.update(resolved.mcp_servers)
        for event in await deps.store.list_timeline(execution.execution_id):
            if event.type in (
                TimelineEventType.LLM_TOOL_CALL,
                TimelineEventType.FINAL_ANALYSIS,
                TimelineEventType.EXECUTIVE_SUMMARY,
            ):
                continue  # a call is shown with its result; the analyses come apart
            is_tool = event.type is TimelineEventType.MCP_TOOL_CALL
            metadata = event.metadata
            timeline.append(
                TimelineItem(
                    kind=event.type.value,
                    agent=execution.agent,
                    text=event.content,
                    tool=str(metadata.get("tool_name") or metadata.get("tool") or "")
                    if is_tool
                    else "",
                    arguments=dict(metadata.get("arguments") or {}) if is_tool else {},
                    is_error=bool(metadata.get("is_error")),
                )
            )
    return JudgeInput(
        alert_type=session.alert_type,
        alert_data=session.alert_data,
        chain_id=session.chain_id,
        final_analysis=session.final_analysis or "",
        executive_summary=session.executive_summary or "",
        timeline=timeline,
        available_tools=sorted(f"{server} (MCP server)" for server in tools),
    )


async def start_scoring(session: Session, number: int, deps: Deps) -> AgentExecution:
    """Create the judge's execution for ``session`` and publish its step."""
    resolved = deps.config.resolve_role(session.chain_id, None, "scoring")
    prompt = build_judge_prompt(await judge_input(session, deps))
    opening = [
        ConversationMessage(role="system", content=prompt.system),
        ConversationMessage(role="user", content=prompt.user),
    ]
    execution = _new_execution(session, SCORING_STAGE, number, "scoring", resolved,
                               scoring_id_for(session.session_id, number), _due(deps))  # fmt: skip
    await start_execution(execution, opening, deps)
    return execution


# ─── ending a session from outside the step path ──────────────────────────────


async def cancel_execution(execution: AgentExecution, session: Session, deps: Deps) -> None:
    """End a cancelled session's execution (and the session) without another LLM call."""
    now = utcnow()
    await deps.store.update_execution(
        execution.execution_id, transitions.cancel_execution(execution, now)
    )
    if not session.status.is_terminal:
        await deps.store.update_session(
            session.session_id, transitions.cancel_session(session, now)
        )
    logger.info(
        "cancelled",
        extra=fields(session_id=execution.session_id, execution_id=execution.execution_id),
    )
    if execution.role == "sub_agent":  # its parent may be waiting for it: wake it to cancel
        ended = execution.model_copy(update={"status": ExecutionStatus.CANCELLED})
        await answer_parent(ended, deps)


async def cancel_one(execution: AgentExecution, deps: Deps) -> None:
    """End one execution cancelled on its own; its stage moves on without it (fan-in).

    Its sub-agent conversations still running are cancelled too; a cancelled
    sub-agent gives its parent an error observation (:func:`answer_parent`).
    """
    update = transitions.cancel_one_execution(execution, utcnow())
    await deps.store.end_execution(execution, update)
    await cancel_sub_agents(execution.execution_id, deps)
    logger.info(
        "agent cancelled",
        extra=fields(session_id=execution.session_id, execution_id=execution.execution_id),
    )
    ended = execution.model_copy(
        update={"status": ExecutionStatus.CANCELLED, "error": update.error}
    )
    await after_execution(ended, deps)


async def cancel_sub_agents(
    parent_execution_id: str, deps: Deps, only: set[str] | None = None
) -> None:
    """Ask the parent's running sub-agent conversations (or ``only`` those) to stop."""
    for conversation, _ in (await deps.store.list_sub_agents(parent_execution_id)).values():
        chosen = only is None or conversation.execution_id in only
        if chosen and not conversation.status.is_terminal:
            await deps.store.update_execution(
                conversation.execution_id, transitions.request_cancel_of_execution(conversation)
            )


DEADLINE_ERROR = ErrorInfo(message="the session passed its deadline", code="deadline")


async def time_out(session: Session, deps: Deps) -> None:
    """End a session past its deadline: it and its unfinished executions become timed_out."""
    now = utcnow()
    for execution in await deps.store.list_executions(session.session_id):
        if not execution.status.is_terminal:
            await deps.store.update_execution(
                execution.execution_id,
                transitions.time_out_execution(execution, DEADLINE_ERROR, now),
            )
    if not session.status.is_terminal:
        await deps.store.update_session(
            session.session_id, transitions.time_out_session(session, DEADLINE_ERROR, now)
        )
    logger.warning("session timed out", extra=fields(session_id=session.session_id))


async def fail(
    message: StepMessage, error: ErrorInfo, deps: Deps, *, unless_leased: bool = False
) -> None:
    """Fail the execution and session of ``message`` with ``error`` (safe to repeat).

    For what no retry can fix: a configuration error met while stepping, a
    permanent failure, or a message Pub/Sub gave up delivering. With
    ``unless_leased`` (the dead-letter path), an execution whose step holds a
    live lease is left alone: its deliveries were refused because a step was
    running (or had just died), and its due time lets the sweeper re-run it.
    """
    now = utcnow()
    if message.execution_id:
        try:
            execution = await deps.store.get_execution(message.execution_id)
        except ValidationError:
            execution = None  # a document no step can read: fail the session alone
            logger.error("execution %s cannot be read", message.execution_id)
        if (
            unless_leased
            and execution is not None
            and not execution.status.is_terminal
            and execution.lease_until is not None
            and execution.lease_until > now
        ):
            logger.warning(
                "dead letter for %s while a step holds its lease; the sweeper re-runs it",
                message.execution_id,
                extra=fields(session_id=message.session_id),
            )
            return
        logger.error(error.message, extra=fields(session_id=message.session_id))
        if execution is not None and not execution.status.is_terminal:
            await deps.store.update_execution(
                message.execution_id, transitions.dead_letter_execution(execution, error, now)
            )
    session = await deps.store.get_session(message.session_id)
    if session is not None and not session.status.is_terminal:
        await deps.store.update_session(
            message.session_id, transitions.dead_letter_session(session, error, now)
        )


# ─── chat ─────────────────────────────────────────────────────────────────────


async def chat_history(chats: list[AgentExecution], deps: Deps) -> str:
    """Every earlier question of a session's chat with its answer, in order."""
    turns: list[str] = []
    for chat in chats:
        events = await deps.store.list_timeline(chat.execution_id)
        asked = next((e.content for e in events if e.type is TimelineEventType.USER_QUESTION), "")
        answer = chat.final_analysis or f"(no answer: the chat {chat.status.value})"
        turns.append(f"Q{chat.agent_index + 1}: {asked}\nA{chat.agent_index + 1}: {answer}")
    return "\n\n".join(turns)


async def start_chat(session: Session, question: str, deps: Deps) -> AgentExecution:
    """Start a chat execution that answers ``question`` with the investigation as context."""
    chain = deps.config.chain(session.chain_id)
    resolved = deps.config.resolve_role(session.chain_id, None, "chat")
    executions = await deps.store.list_executions(session.session_id)
    chats = sorted((e for e in executions if e.role == "chat"), key=lambda e: e.agent_index)
    if any(not e.status.is_terminal for e in chats):
        raise ChatConflictError(
            f"an earlier question on {session.session_id} is still being answered; "
            "ask again when it is done"
        )
    number = len(chats)
    context = await previous_context(session, len(chain.stages), deps)
    parts = [
        f"Alert type: {session.alert_type}\n\n{delimit('ALERT DATA', session.alert_data)}",
        f"The investigation ({session.status.value}) and its results:\n"
        + delimit("INVESTIGATION", context),
    ]
    if session.executive_summary:
        parts.append(f"Executive summary:\n{delimit('SUMMARY', session.executive_summary)}")
    if chats:
        history = await chat_history(chats, deps)
        parts.append(f"Earlier questions and answers:\n{delimit('CHAT HISTORY', history)}")
    parts.append(f"The engineer asks:\n{delimit('QUESTION', question)}")
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(role="user", content="\n\n".join(parts)),
    ]
    execution = _new_execution(
        session, CHAT_STAGE, number, "chat", resolved,
        f"{session.session_id}-chat-{number:03d}", _due(deps),
    )  # fmt: skip
    asked = TimelineEvent(
        type=TimelineEventType.USER_QUESTION, content=question, metadata={"chat": number}
    )
    if not await deps.store.create_execution(execution, opening, [asked]):
        raise ChatConflictError(f"another question on {session.session_id} is being started")
    await deps.bus.publish(iterate_message(execution, FIRST_ITERATION_STEP))
    await deps.store.mark_published([execution.execution_id], FIRST_ITERATION_STEP)
    return execution

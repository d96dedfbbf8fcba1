"""Agent chains as I/O: starting stages, fan-in, scoring and chat.

Design constraint: every write here is safe to repeat, because a redelivered
message or the sweeper may run any of it again. Creates use deterministic ids
(:mod:`tarsy.engine.messages`), and the stage's fan-in claims its ``advance``
marker with ``create()`` (contention-free, invariant 1).

What follows an execution's end is decided by :mod:`tarsy.engine.progression`
(pure). The step engine applies that decision inside an execution's last step
commit when the execution alone decides it; :func:`after_execution` is the
other path, run after the commit: the agents of a parallel stage moving on
together, a sub-agent answering its parent, the judge after the summary, and
the heal of an advance whose publish was lost. It applies a decision with
:func:`apply_next`, the same :class:`~tarsy.engine.progression.Next` the
commit path writes in its batch.

Cancel, time-out and fail from outside the step path are in
:mod:`tarsy.engine.lifecycle`. Status changes come from
:mod:`tarsy.engine.transitions`; this module never writes a Firestore field name.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import assert_never

from tarsy.agent.context import ExecutionRecord, format_stages
from tarsy.agent.prompts import chat_prompt, initial_messages, system_prompt
from tarsy.agent.scoring import JudgeInput, TimelineItem
from tarsy.app import Deps
from tarsy.engine import gathering, progression, transitions
from tarsy.engine.messages import (
    CHAT_STAGE,
    FIRST_ITERATION_STEP,
    chat_id_for,
    execution_id_for,
    iterate_message,
    new_execution,
)
from tarsy.engine.progression import FanIn, JudgeStart, Next
from tarsy.engine.roles import resolve_execution, rules
from tarsy.engine.sub_agents import answer_of
from tarsy.errors import InputError
from tarsy.log import fields
from tarsy.memory import find_earlier, memory_keys, recall
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    ExecutionStatus,
    RecalledSession,
    Session,
    Stage,
    ThreadReply,
    UserQuestionEvent,
    utcnow,
)
from tarsy.tools.runbooks import RunbookFetch, resolve_runbook

logger = logging.getLogger(__name__)

ADVANCE_MARKER = "advance"


class ChatConflictError(InputError):
    """Two questions raced for the same chat number; the caller may retry."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


def _due(deps: Deps) -> datetime:
    """When a step published now must have been claimed."""
    return utcnow() + timedelta(seconds=deps.settings.step_due_seconds)


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
        chosen = progression.stage_result_of([e for e in executions if e.stage == index])
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
    if index == 0:  # a runbook URL is fetched once, as the session starts (tarsy.tools.runbooks)
        chain = deps.config.chain(session.chain_id)
        masking = deps.config.alert_masking
        runbook = await resolve_runbook(session, chain.runbook_url, deps.settings, masking)
    if index == 0:  # the earlier sessions it recalls are read once too (tarsy.memory)
        session = await remember(session, deps)
    await _start_stage(session, index, deps, runbook)


async def remember(session: Session, deps: Deps) -> Session:
    """``session`` with its memory keys and the earlier sessions it recalls (tarsy.memory).

    Design constraint: memory is a lead, never something a session depends on:
    a lookup that fails (Firestore unavailable, an index still building) starts
    the session without history rather than holding it back. The keys are set
    even with recall off (``TARSY_MEMORY_RECALL=0``), so later sessions find this one.
    """
    keys = memory_keys(session)
    session = session.model_copy(update={"memory_keys": keys})
    recalled: list[RecalledSession] = []
    cap = deps.settings.memory_recall
    if cap and keys:
        try:
            earlier = await find_earlier(deps.store, keys, session.created_at)
        except Exception:
            logger.warning("recalling earlier sessions for %s failed", session.session_id,
                           exc_info=True)  # fmt: skip
        else:
            recalled = recall(session, earlier, cap)
    if recalled:
        logger.info("%s recalls %s", session.session_id, [r.session_id for r in recalled])
    return session.model_copy(update={"recalled": recalled})


async def _start_stage(
    session: Session, index: int, deps: Deps, runbook: RunbookFetch | None = None
) -> None:
    """Create stage ``index`` with its executions (atomically) and publish their first steps.

    A ``runbook`` fetched for the first stage is recorded on the session in the
    same batch, so it is fetched again only if that batch never committed; so are
    the first stage's memory keys and recalled sessions (:func:`remember`).
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
        execution = new_execution(
            session, index, agent_index, "agent", resolved,
            execution_id_for(session.session_id, index, agent_index), _due(deps),
            gathers=gathering.gathers(deps.config, resolved, session),
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
    if index == 0:
        update = transitions.with_memory(update, session.memory_keys, session.recalled)
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
    """Decide and apply what comes next once ``execution`` is terminal (safe to repeat)."""
    session = await deps.store.get_session(execution.session_id)
    if session is None:
        return
    decision = progression.after_execution(
        deps.config, session, execution, execution.status, execution.final_analysis,
        utcnow(), _due(deps),
    )  # fmt: skip
    match decision:
        case Next():
            await apply_next(session, execution.stage, decision, deps)
            # Nothing more is owed by this execution: the sweeper stops re-running it.
            await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())
        case FanIn(reason="sub_agent_answer"):
            await answer_parent(execution, deps)
        case FanIn(reason="judge_after_summary"):
            await _start_judge(session, execution, deps)
        case FanIn(reason="parallel_stage"):
            await _after_parallel_agent(session, execution, deps)


async def apply_next(session: Session, index: int, decision: Next, deps: Deps) -> None:
    """Write a decision outside a step's commit, then publish (safe to repeat).

    The step engine writes the same :class:`Next` in its commit batch; here it
    is written after the fact, so a run that finds it already applied (the next
    stage started, the summary created) only heals what may not have gone out.
    """
    if decision.stage is not None:
        await deps.store.update_stage(session.session_id, index, decision.stage)
    moved_on = await _already_moved_on(session, decision, deps)
    if decision.session is not None and not moved_on:
        await deps.store.update_session(session.session_id, decision.session)
    if decision.create is not None:
        await start_execution(decision.create, decision.opening, deps)  # heals a lost publish
    elif decision.publish is not None and not moved_on:
        await deps.bus.publish(decision.publish)


async def _already_moved_on(session: Session, decision: Next, deps: Deps) -> bool:
    """Whether what ``decision`` starts was started by an earlier run of it."""
    if decision.create is not None:
        return session.final_analysis is not None
    publish = decision.publish
    if publish is None or publish.runs_step:
        return False
    return await deps.store.get_stage(session.session_id, publish.stage) is not None


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


async def _after_parallel_agent(session: Session, execution: AgentExecution, deps: Deps) -> None:
    """One agent of a parallel stage ended: the last one moves the stage on."""
    stage_config = deps.config.chain(session.chain_id).stages[execution.stage]
    index = execution.stage
    finished = await deps.store.finished_agents(session.session_id, index)
    if len(finished) < len(stage_config.placed_agents):
        # Others are still running; the last one to finish (which sees every
        # completion marker, all committed before its query) moves on.
        await deps.store.update_executions([execution.execution_id], transitions.fan_in_done())
        return
    if not await deps.store.claim_marker(session.session_id, index, ADVANCE_MARKER):
        # Another handler moved on, or crashed while doing so. Everything below is
        # idempotent (deterministic creates, heal-publish of unstarted executions),
        # so running it again completes a crashed advance and duplicates nothing.
        logger.info("stage %s advance already claimed; re-checking", index)
    status = progression.stage_status(list(finished.values()), stage_config.success_policy)
    log = fields(session_id=session.session_id, stage=index)
    logger.info("stage %s agents done: %s", stage_config.name, status.value, extra=log)
    if status is ExecutionStatus.COMPLETED:
        await _start_synthesis(session, index, finished, deps)
    else:
        reasons = [
            f"{e.agent}: {e.error.message}"
            for e in await deps.store.list_executions(session.session_id)
            if e.stage == index and e.error is not None
        ]
        decision = progression.after_stage(
            deps.config, session, index, status, None, reasons, utcnow(), _due(deps),
            finished=finished,
        )  # fmt: skip
        await apply_next(session, index, decision, deps)
    # The stage moved on: its agents' fan-in is no longer due (the sweeper stops re-running it).
    await deps.store.update_executions(list(finished), transitions.fan_in_done())


async def _start_synthesis(
    session: Session, index: int, finished: dict[str, str], deps: Deps
) -> None:
    """Read the parallel agents' timelines; the synthesis they start is progression's."""
    executions = [
        e
        for e in await deps.store.list_executions(session.session_id)
        if e.stage == index and e.role == "agent"
    ]
    records = [
        ExecutionRecord(execution=e, timeline=await deps.store.list_timeline(e.execution_id))
        for e in executions
    ]
    decision = progression.synthesis_start(
        deps.config, session, index, records, finished, _due(deps)
    )
    await apply_next(session, index, decision, deps)


async def _start_judge(session: Session, summary: AgentExecution, deps: Deps) -> None:
    """The summary ended on a chain that scores: apply progression's decision on the judge."""
    if summary.status is not ExecutionStatus.COMPLETED:
        # The investigation itself succeeded; only its summary did not.
        logger.warning("executive summary of %s failed", session.session_id)
    off = deps.settings.scoring_off_reason
    decision = progression.judge_after_summary(session, summary, off, utcnow())
    match decision:
        case Next():
            await apply_next(session, summary.stage, decision, deps)
        case JudgeStart():
            if decision.session is not None:
                await deps.store.update_session(session.session_id, decision.session)
            summarized = session.model_copy(
                update={"executive_summary": decision.executive_summary}
            )
            await start_scoring(summarized, 0, deps)
        case _:
            assert_never(decision)
    await deps.store.update_executions([summary.execution_id], transitions.fan_in_done())


# ─── scoring ──────────────────────────────────────────────────────────────────


async def judge_input(session: Session, deps: Deps) -> JudgeInput:
    """The session as the judge reads it: alert, timeline, analyses, the tools offered."""
    timeline: list[TimelineItem] = []
    tools: set[str] = set()
    for execution in await deps.store.list_executions(session.session_id):
        if not rules(execution.role).investigates:
            continue
        if rules(execution.role).stage_agent:
            resolved = resolve_execution(deps.config, session, execution)
            tools.update(resolved.mcp_servers)
        for event in await deps.store.list_timeline(execution.execution_id):
            item = TimelineItem.of_event(event, execution.agent)
            if item is not None:
                timeline.append(item)
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
    judged = await judge_input(session, deps)
    execution, opening = progression.judge_opening(deps.config, session, judged, number, _due(deps))
    await start_execution(execution, opening, deps)
    return execution


# ─── chat ─────────────────────────────────────────────────────────────────────


async def chat_history(chats: list[AgentExecution], deps: Deps) -> str:
    """Every earlier question of a session's chat with its answer, in order."""
    turns: list[str] = []
    for chat in chats:
        events = await deps.store.list_timeline(chat.execution_id)
        asked = next((e.content for e in events if isinstance(e, UserQuestionEvent)), "")
        answer = chat.final_analysis or f"(no answer: the chat {chat.status.value})"
        turns.append(f"Q{chat.agent_index + 1}: {asked}\nA{chat.agent_index + 1}: {answer}")
    return "\n\n".join(turns)


async def start_chat(
    session: Session, question: str, deps: Deps, *, reply_to: ThreadReply | None = None
) -> AgentExecution:
    """Start a chat execution that answers ``question`` with the investigation as context.

    ``reply_to``: the Slack thread the question was asked in, where the answer goes.
    """
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
    history = await chat_history(chats, deps) if chats else ""
    opening = [
        ConversationMessage(role="system", content=system_prompt(resolved)),
        ConversationMessage(role="user", content=chat_prompt(session, context, history, question)),
    ]
    execution = new_execution(
        session, CHAT_STAGE, number, "chat", resolved,
        chat_id_for(session.session_id, number), _due(deps),
    )  # fmt: skip
    if reply_to is not None:
        execution = execution.model_copy(update={"reply_to": reply_to})
    asked = UserQuestionEvent(content=question, chat=number)
    if not await deps.store.create_execution(execution, opening, [asked]):
        raise ChatConflictError(f"another question on {session.session_id} is being started")
    await deps.bus.publish(iterate_message(execution, FIRST_ITERATION_STEP))
    await deps.store.mark_published([execution.execution_id], FIRST_ITERATION_STEP)
    return execution

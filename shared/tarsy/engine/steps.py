"""The step engine: what one invocation of the step function does with one message.

A ``start_session``/``start_stage`` message creates a stage (:mod:`tarsy.engine.chains`).
An ``iterate`` message runs ONE iteration of one execution, read top to bottom
in :func:`iterate`::

    load state → triage → claim → prepare the turn → call the model (streaming)
    → run the tools → decide → commit (one batch) → publish what comes next

At-least-once delivery is made safe by :func:`triage`:

* ``message.step < execution.step``: the step is already committed. If the
  next message may never have been published (a crash between commit and
  publish), publish it again; a finished execution re-runs its fan-in.
* ``message.step == execution.step``: claim the lease (another invocation
  holding it raises LeaseHeldError: Pub/Sub redelivers later), run, commit
  under the claim, publish.
* ``message.step > execution.step``: cannot happen in order; acknowledged.

Errors are mapped once, in :func:`handle`: transient ones are re-raised so
Pub/Sub redelivers; configuration and permanent errors fail the session with
the reason and the message is acknowledged (see :mod:`tarsy.errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Coroutine
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar, assert_never

from tarsy import telemetry
from tarsy.agent.strategies.base import IterationOutcome
from tarsy.agent.strategies.registry import get_strategy
from tarsy.app import Deps
from tarsy.config.schema import ResolvedAgentConfig, TarsyConfig
from tarsy.engine import chains, gathering, lifecycle, progression, sub_agents, transitions
from tarsy.engine.iteration import (
    ModelCall,
    Ports,
    ToolRun,
    Turn,
    build_turn,
    complete_waiting_turn,
    cost_of,
    run_iteration,
)
from tarsy.engine.messages import FIRST_ITERATION_STEP, due_after_republish, iterate_message
from tarsy.engine.progression import Decision, FanIn, Next
from tarsy.engine.roles import PauseScope, resolve_execution, rules
from tarsy.engine.sub_agents import PendingTurn
from tarsy.engine.transitions import ExecutionUpdate, SessionUpdate, StageUpdate
from tarsy.errors import ConfigError, LeaseHeldError, PermanentError, TransientError
from tarsy.llm.base import LLMResult
from tarsy.llm.fallback import CallWrapper, Candidate, FallbackProvider
from tarsy.llm.registry import get_provider
from tarsy.log import fields
from tarsy.models import (
    AgentExecution,
    ErrorInfo,
    ExecutionStatus,
    Session,
    StepMessage,
    SubAgentWait,
    TokenUsage,
    utcnow,
)
from tarsy.notify.session_end import on_session_end
from tarsy.persistence.ports import LeaseRenewal
from tarsy.persistence.progress import ProgressWriter
from tarsy.persistence.store import Claim, FollowUp, NewConversation, StepCommit, StepState
from tarsy.tools.base import ToolListing
from tarsy.tools.selection import restrict_listing

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Thought signatures are only useful while an execution runs; the TTL policy deletes them.
PROVIDER_STATE_TTL = timedelta(hours=1)


# ─── entry ────────────────────────────────────────────────────────────────────


async def handle(message: StepMessage, deps: Deps) -> None:
    """Run one step message, mapping errors once.

    Raises TransientError when the message must be redelivered; records
    everything else from the error tree on the execution and session. The
    session's end is announced after any message that may have ended it: a
    step that only went on to the next one skips that read of the session.
    """
    log = fields(session_id=message.session_id, execution_id=message.execution_id)
    logger.info("step %s %s", message.kind, message.step or message.stage, extra=log)
    may_have_ended = True
    try:
        if message.runs_step:
            may_have_ended = await iterate(message, deps)
        else:
            await chains.start_stage(message.session_id, message.stage, deps)
    except TransientError:
        raise
    except ConfigError as error:
        await lifecycle.fail(message, ErrorInfo(message=str(error), code="configuration"), deps)
    except PermanentError as error:
        await lifecycle.fail(message, ErrorInfo(message=str(error), code="permanent"), deps)
    if may_have_ended:
        await on_session_end(message.session_id, deps)


async def handle_dead_letter(message: StepMessage, deps: Deps, *, delivery_attempts: str) -> None:
    """Fail what a message Pub/Sub gave up delivering (a late one is dropped: lifecycle)."""
    await lifecycle.dead_letter(message, deps, delivery_attempts=delivery_attempts)
    await on_session_end(message.session_id, deps)


# ─── one iteration, top to bottom ─────────────────────────────────────────────


async def iterate(message: StepMessage, deps: Deps) -> bool:
    """Run step ``message.step`` of execution ``message.execution_id``.

    Returns False when the session cannot have ended here (the step went on to
    the next, or the message was a duplicate); True whenever it may have.
    """
    # Model attempts, retries and summaries share this deadline (Settings.step_budget_seconds).
    budget = time.monotonic() + deps.settings.step_budget_seconds
    # The conversation is read alongside the state: the claim then needs no read after it.
    state = await deps.store.get_step_state(
        message.execution_id, message.session_id, list(deps.config.mcp_servers),
        conversation=True,
    )  # fmt: skip
    execution, session = state.execution, state.session
    if execution is None or session is None or state.update_time is None:
        logger.error("execution %s or its session is missing; dropping", message.execution_id)
        return False
    fate = triage(message, execution, session, utcnow())
    if fate != "run":
        await _settle(fate, message, execution, state.update_time, session, deps)
        return fate not in ("heal", "ahead")
    if execution.awaiting is not None:
        await collect_answers(message, state, execution.awaiting, budget, deps)
        return True
    claim = await claim_step(message, state.update_time, deps)
    running = execution.model_copy(update={"status": ExecutionStatus.ACTIVE})
    if execution.gather_pending:
        return await gather_step(message, running, session, state, claim, budget, deps)
    async with Heartbeat(
        deps.store, message.execution_id, claim, _lease(deps),
        deps.settings.step_cancel_poll_seconds,
    ) as heartbeat:  # fmt: skip
        with telemetry.agent_span(
            execution.agent,
            session_id=message.session_id,
            execution_id=message.execution_id,
            step=message.step,
            iteration=execution.iteration + 1,
        ) as agent:
            turn = await prepare_turn(running, session, state, budget, deps)
            agent.set_model(
                provider_name=telemetry.genai_provider_name(turn.config.provider, deps.settings),
                model=turn.config.provider.model,
            )
            ports = live_ports(turn, message.step, deps)
            done = await heartbeat.unless_cancelled(run_iteration(turn, message.step, ports))
    if done is None:  # cancelled while the model or the tools ran: end it now
        await after_lost_commit(message, deps)
        return True
    call, tools, outcome = done.call, done.tools, done.outcome
    if tools.dispatches:
        await wait_for_sub_agents(message, turn, call, tools, outcome, heartbeat.claim, deps)
        return True
    commit, decision = build_commit(
        message, turn, call, tools, outcome, heartbeat.claim, deps.config, _due(deps)
    )
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return True
    await publish_next(message, turn, outcome, commit, decision, deps)
    return outcome.next != "continue"


async def gather_step(
    message: StepMessage,
    execution: AgentExecution,
    session: Session,
    state: StepState,
    claim: Claim,
    budget: float,
    deps: Deps,
) -> bool:
    """Run the execution's gather phase (tarsy.engine.gathering), commit it, publish step 2.

    Returns whether the session may have ended (a cancel that came meanwhile).
    """
    config = resolve_execution(deps.config, session, execution)
    async with Heartbeat(
        deps.store, message.execution_id, claim, _lease(deps),
        deps.settings.step_cancel_poll_seconds,
    ) as heartbeat:  # fmt: skip
        listing = await _agent_listing(config, state, budget, deps)
        work = gathering.gather_evidence(deps.config, config, session, deps.tools, listing)
        gathered = await heartbeat.unless_cancelled(work)
    if gathered is None:  # cancelled while gathering
        await after_lost_commit(message, deps)
        return True
    stage = execution.stage
    context = await chains.previous_context(session, stage, deps) if stage > 0 else ""
    opening = gathering.opening_with_evidence(deps.config, config, session, context, gathered)
    commit = gathering.gather_commit(
        message, execution, session, opening.messages, gathered, heartbeat.claim,
        utcnow() + _due(deps), brief_chars=opening.brief_chars,
    )  # fmt: skip
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return True
    done = execution.model_copy(update={"gather_pending": False})
    await deps.bus.publish(iterate_message(done, message.step + 1))
    return False


async def _agent_listing(
    config: ResolvedAgentConfig, state: StepState, budget: float, deps: Deps
) -> ToolListing:
    """The MCP tools an agent may call this step (the alert's allow-lists applied)."""
    if not config.mcp_servers or deps.tools is None:
        return ToolListing()
    listing = await deps.tools.list_tools(config.mcp_servers, state.tool_lists, budget=budget)
    return restrict_listing(listing, config.mcp_tools)


Fate = Literal[
    "run", "heal", "fan_in", "ahead", "settled", "cancel", "cancel_one", "time_out", "leased"
]


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


async def _settle(
    fate: Fate,
    message: StepMessage,
    execution: AgentExecution,
    read_time: datetime,
    session: Session,
    deps: Deps,
) -> None:
    """Everything but running: heal, fan in, cancel, time out, or wait for the lease.

    ``read_time`` is when ``execution`` was last written, as the step read it.
    """
    if fate == "fan_in":
        await chains.after_execution(execution, deps)  # the fan-in may not have run
    elif fate == "heal":
        await _heal_publish(execution, read_time, deps, utcnow())
    elif fate == "ahead":
        logger.warning(
            "message for step %s but execution %s is at step %s; dropping",
            message.step,
            execution.execution_id,
            execution.step,
        )
    elif fate == "cancel":
        await lifecycle.cancel_execution(execution, session, deps)
    elif fate == "cancel_one":
        await lifecycle.cancel_one(execution, deps)
    elif fate == "time_out":
        await lifecycle.time_out(session, deps)
    elif fate == "leased":
        until = execution.lease_until.isoformat() if execution.lease_until else "?"
        raise LeaseHeldError(
            f"execution {execution.execution_id!r} step {execution.step} is leased until {until}"
        )


async def _heal_publish(
    execution: AgentExecution, read_time: datetime, deps: Deps, now: datetime
) -> None:
    """Re-publish the execution's current step if its message is overdue.

    A duplicate of a committed step arrives while the next step's message is
    most likely still on its way: publishing again on every duplicate would
    only multiply messages. Once the next step is overdue, it may have been
    lost, or it may only be queued behind a backlog longer than the due time;
    so the re-publish first moves the due time on, under a precondition on
    the execution as this step read it, and only the one duplicate (or sweep)
    whose write wins publishes. Each copy is a duplicate of the next step in
    turn: without the gate, every one of them would publish again.
    """
    if execution.status.is_terminal or execution.status == ExecutionStatus.PAUSED:
        return
    if execution.published_step >= execution.step or execution.lease_owner:
        return
    if execution.due_at is not None and execution.due_at > now:
        return
    if not await deps.store.postpone_execution(
        execution.execution_id,
        read_time=read_time,
        until=due_after_republish(execution, now, _due(deps)),
    ):
        return  # the step was claimed, or someone else re-published it
    logger.info(
        "re-publishing step %s of %s (its message may have been lost)",
        execution.step,
        execution.execution_id,
    )
    await deps.bus.publish(iterate_message(execution, execution.step))


async def after_lost_commit(message: StepMessage, deps: Deps) -> None:
    """The execution changed under the step: a cancel, or a takeover after the lease ran out.

    A cancel marks the execution (see :func:`tarsy.engine.transitions.request_cancel_of_execution`),
    so a step that was mid-call when it came ends the execution here instead of
    committing and publishing what would follow.
    """
    execution = await deps.store.get_execution(message.execution_id)
    if execution is None or not execution.cancel_requested or execution.status.is_terminal:
        return  # another invocation took over after our lease expired; it owns the step now
    session = await deps.store.get_session(message.session_id)
    if session is not None and session.cancel_requested:
        await lifecycle.cancel_execution(execution, session, deps)
    elif session is not None:
        await lifecycle.cancel_one(execution, deps)


def _due(deps: Deps) -> timedelta:
    return timedelta(seconds=deps.settings.step_due_seconds)


def _lease(deps: Deps) -> timedelta:
    return timedelta(seconds=deps.settings.step_lease_seconds)


class Heartbeat:
    """Renews a running step's lease, and cuts the step short when it is cancelled.

    The lease is renewed every third of it, so a slow step is never stolen:
    the lease can then be short (a minute), and a step whose process died is
    re-run soon after it expires. Each renewal is conditional on the claim's
    update time and yields the one the commit must present; once a renewal
    finds the execution changed (a cancel, a takeover), it stops, and the
    commit will fail the same way.

    Meanwhile :meth:`unless_cancelled` reads the execution every
    ``cancel_poll`` seconds: a cancel of the session or of this execution marks
    it, and the work in flight (the model call with its retries and backoff
    sleeps, the tool calls) is cancelled at once instead of running on.
    """

    def __init__(
        self,
        store: LeaseRenewal,
        execution_id: str,
        claim: Claim,
        lease: timedelta,
        cancel_poll: float,
    ) -> None:
        self.claim = claim
        self._store = store
        self._execution_id = execution_id
        self._lease = lease
        self._cancel_poll = cancel_poll
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        # Let a renewal in flight finish: its new update time is the commit's precondition.
        self._stop.set()
        if self._task is not None:
            await self._task

    async def unless_cancelled(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Run ``work``; None if a cancel of this execution arrived first (work cancelled)."""
        task = asyncio.ensure_future(work)
        while True:
            done, _ = await asyncio.wait({task}, timeout=self._cancel_poll)
            if done:
                return task.result()
            current = await self._store.get_execution(self._execution_id)
            if current is None or current.cancel_requested or current.status.is_terminal:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                logger.info("step of %s cut short: cancelled", self._execution_id)
                return None

    async def _beat(self) -> None:
        interval = self._lease.total_seconds() / 3
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=interval)
                return
            except TimeoutError:
                pass
            renewed = await self._store.renew(
                self._execution_id, self.claim, utcnow() + self._lease
            )
            if renewed is None:
                logger.warning("step of %s lost its claim while running", self._execution_id)
                return
            self.claim = renewed


def _lease_owner() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def claim_step(message: StepMessage, read_time: datetime, deps: Deps) -> Claim:
    """Take the execution's lease for this step (LeaseHeldError if someone wrote it since)."""
    return await deps.store.claim(
        message.execution_id,
        owner=_lease_owner(),
        until=utcnow() + _lease(deps),
        read_time=read_time,
        step=message.step,
    )


# ─── preparing the turn ───────────────────────────────────────────────────────


async def prepare_turn(
    execution: AgentExecution, session: Session, state: StepState, budget: float, deps: Deps
) -> Turn:
    """Resolve the config, read the conversation, list the tools: the frozen turn."""
    config = resolve_execution(deps.config, session, execution)
    strategy = get_strategy(execution.strategy)
    # The alert's tool allow-lists apply (ToolSelectionError: a named tool is not listed).
    listing = (
        await _agent_listing(config, state, budget, deps) if strategy.uses_tools else ToolListing()
    )
    if strategy.uses_tools:
        listing = sub_agents.with_message_agent(listing, execution, config, deps.config.agents)
    messages = state.conversation
    if messages is None:  # written since it was read alongside the state: read it as claimed
        messages = await deps.store.load_messages(execution.execution_id)
    return build_turn(
        execution, session, config, strategy, messages, state.provider_state, listing, budget
    )


def live_ports(turn: Turn, step: int, deps: Deps) -> Ports:
    """What a step's iteration talks to: the configured providers, MCP, Firestore."""
    return Ports(
        provider=provider_for(turn.config, turn.execution.execution_id, deps),
        tools=deps.tools,
        sub_agents=deps.store,
        config=deps.config,
        progress=ProgressWriter(deps.store, turn.execution.execution_id, step),
    )


def provider_for(config: ResolvedAgentConfig, execution_id: str, deps: Deps) -> FallbackProvider:
    """The agent's provider, then its ``fallback`` providers, each call traced."""
    names = [config.provider_name, *config.provider.fallback]
    candidates = [
        Candidate(
            name=name,
            config=provider,
            provider=get_provider(provider, deps.settings),
        )
        for name, provider in (
            (name, config.provider if index == 0 else deps.config.llm_providers[name])
            for index, name in enumerate(names)
        )
    ]
    return FallbackProvider(
        candidates, config.provider.fallback_on, observe=_traced(deps, execution_id)
    )


def _traced(deps: Deps, execution_id: str) -> CallWrapper:
    def observe(candidate: Candidate, call: Awaitable[LLMResult]) -> Awaitable[LLMResult]:
        return telemetry.traced_model_call(
            call,
            provider_name=telemetry.genai_provider_name(candidate.config, deps.settings),
            model=candidate.config.model,
            conversation_id=execution_id,
        )

    return observe


# ─── deciding and committing ──────────────────────────────────────────────────


def execution_update(
    execution: AgentExecution, outcome: IterationOutcome, now: datetime, next_due: datetime | None
) -> ExecutionUpdate:
    """The execution's status change after this iteration (pure)."""
    progress = transitions.count_iteration(
        execution, failed_attempt=outcome.failed_attempt, next_due=next_due
    )
    if outcome.next == "complete":
        return transitions.complete_execution(
            execution, outcome.final_analysis, now, progress=progress
        )
    if outcome.next == "fail":
        update = transitions.fail_execution(execution, outcome.error, now, progress=progress)
        return transitions.await_fan_in(update, next_due) if next_due else update
    if outcome.next == "pause":
        return transitions.pause_execution(execution, outcome.error, progress=progress)
    return progress


FINISHED: dict[str, ExecutionStatus] = {
    "complete": ExecutionStatus.COMPLETED,
    "fail": ExecutionStatus.FAILED,
}


def build_commit(
    message: StepMessage,
    turn: Turn,
    call: ModelCall | None,
    tools: ToolRun,
    outcome: IterationOutcome,
    claim: Claim | None,
    config: TarsyConfig,
    due: timedelta,
) -> tuple[StepCommit, Decision | None]:
    """Everything this step writes, as one atomic batch, and what follows it.

    When the execution ends, the chain state machine decides what follows
    (:func:`tarsy.engine.progression.after_execution`); a :class:`Next` joins the
    batch (the stage result, the session's status, the next execution), a
    :class:`FanIn` is left to :func:`tarsy.engine.chains.after_execution`.
    ``call`` is None for the step that completes a turn with its sub-agents' answers.
    """
    now = utcnow()
    execution, session = turn.execution, turn.session
    records = step_records(message, turn, call, tools, claim, config, now)
    finished = FINISHED.get(outcome.next)
    decision: Decision | None = None
    if finished is not None:
        ended = execution.model_copy(update={"error": outcome.error})
        # The session as this commit leaves it: its spend includes this step's own, so a
        # budget crossed by a stage's last call is seen before the next stage starts.
        spent = session.model_copy(
            update={"tokens": session.tokens + records.usage, "cost": session.cost + records.cost}
        )
        decision = progression.after_execution(
            config, spent, ended, finished, outcome.final_analysis, now, now + due
        )
    # Due: the next step; or, once finished, what follows it until that is published
    # (a parallel stage's fan-in, or the decided message).
    follows = not isinstance(decision, Next) or decision.publish is not None
    awaits = outcome.next == "continue" or (finished is not None and follows)
    update = execution_update(execution, outcome, now, now + due if awaits else None)
    commit = records.model_copy(
        update={
            "messages": outcome.messages,
            "timeline": outcome.timeline,
            "execution": update,
            "stage_index": execution.stage if execution.stage >= 0 else None,
            "finished_status": finished,
        }
    )
    if outcome.next == "pause":
        commit.stage, commit.session = _paused(rules(execution.role).pauses, session, outcome)
    if isinstance(decision, Next):
        commit.stage, commit.session = decision.stage, decision.session
        commit.create_execution = decision.create
        commit.create_opening = decision.opening
    return commit, decision


def _paused(
    scope: PauseScope, session: Session, outcome: IterationOutcome
) -> tuple[StageUpdate | None, SessionUpdate | None]:
    """What a pause at max iterations pauses besides the execution, by its role's scope."""
    match scope:
        case "stage_and_session":
            return transitions.pause_stage(), transitions.pause_session(session, outcome.error)
        case "session":
            return None, transitions.pause_session(session, outcome.error)
        case "nothing":
            return None, None
        case _:
            assert_never(scope)


def step_records(
    message: StepMessage,
    turn: Turn,
    call: ModelCall | None,
    tools: ToolRun,
    claim: Claim | None,
    config: TarsyConfig,
    now: datetime,
) -> StepCommit:
    """What every step commits: the call's and the tools' records, spend, provider state."""
    usage = tools.usage + (call.interaction.tokens if call is not None else TokenUsage())
    price = config.price_for(turn.config.provider.model)
    commit = StepCommit(
        execution_id=turn.execution.execution_id,
        session_id=turn.session.session_id,
        step=message.step,
        next_step=message.step + 1,
        claim=claim,
        llm_interaction=call.interaction if call is not None else None,
        mcp_interactions=tools.records,
        summary_interactions=tools.interactions,
        usage=usage,
        cost=(call.interaction.cost if call is not None else 0) + cost_of(price, tools.usage),
        role=turn.execution.role,
    )
    if call is not None and call.result is not None and call.result.provider_state:
        commit.provider_state = call.result.provider_state
        commit.provider_state_expire_at = now + PROVIDER_STATE_TTL
    return commit


# ─── sub-agents: waiting for their answers, and collecting them ───────────────


async def wait_for_sub_agents(
    message: StepMessage,
    turn: Turn,
    call: ModelCall,
    tools: ToolRun,
    outcome: IterationOutcome,
    claim: Claim | None,
    deps: Deps,
) -> None:
    """Commit a turn that messaged sub-agents as waiting, then start their conversations.

    The turn's messages are written by the step that collects the answers
    (:func:`collect_answers`); this one writes what happened so far: the
    call, the other tools' results, the messages sent, and the conversations.
    """
    assert call.result is not None
    now = utcnow()
    timeout = timedelta(seconds=turn.config.sub_agent_timeout_seconds)
    wait = SubAgentWait(
        step=message.step,
        call_ids=[d.call_id for d in tools.dispatches],
        deadline=now + timeout,
    )
    shown, _answers_later = sub_agents.split_timeline(outcome.timeline, tools.dispatches)
    new, follow_ups = conversation_writes(turn, tools, message.step, now + _due(deps), deps)
    commit = step_records(message, turn, call, tools, claim, deps.config, now).model_copy(
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
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return
    for started in new:
        await deps.bus.publish(iterate_message(started.execution, FIRST_ITERATION_STEP))
    for follow_up in follow_ups:
        reopened, _ = tools.conversations[follow_up.execution_id]
        await deps.bus.publish(iterate_message(reopened, follow_up.step))
    logger.info(
        "messaged %d sub-agents; waiting until %s",
        len(tools.dispatches),
        wait.deadline.isoformat(),
        extra=fields(session_id=turn.session.session_id, execution_id=message.execution_id),
    )


def conversation_writes(
    turn: Turn, tools: ToolRun, step: int, due: datetime, deps: Deps
) -> tuple[list[NewConversation], list[FollowUp]]:
    """The conversations a turn starts and the follow-ups it sends (pure but for config)."""
    parent = turn.execution
    new: list[NewConversation] = []
    follow_ups: list[FollowUp] = []
    for dispatch in tools.dispatches:
        config = deps.config.resolve_sub_agent(turn.session.chain_id, dispatch.agent_name)
        event = sub_agents.message_event(parent.agent, dispatch)
        if dispatch.new:
            new.append(
                NewConversation(
                    execution=sub_agents.sub_agent_execution(
                        parent, dispatch, step, config, first_step=FIRST_ITERATION_STEP, due=due
                    ),
                    opening=sub_agents.sub_agent_opening(
                        config, turn.session, parent.agent, dispatch.message
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
                    conversation, dispatch.call_id, step, config.max_iterations, due
                ),
                read_time=read_time,
                message=sub_agents.follow_up_message(parent.agent, dispatch.message),
                event=event,
            )
        )
    return new, follow_ups


async def collect_answers(
    message: StepMessage, state: StepState, wait: SubAgentWait, budget: float, deps: Deps
) -> None:
    """Complete a waiting turn with its sub-agents' answers as the tool results.

    Runs when the last answer came in (it publishes this step) or, past the
    deadline, when the sweeper re-publishes it: the calls still unanswered
    then get an error observation and their conversations are cancelled. A
    message that arrives before either finds nothing to do.
    """
    execution, session = state.execution, state.session
    assert execution is not None and session is not None and state.update_time is not None
    answers = await deps.store.list_answers(execution.execution_id, wait.step)
    silent = [call_id for call_id in wait.call_ids if call_id not in answers]
    if silent and utcnow() < wait.deadline:
        logger.info(
            "%d of %d sub-agent answers still to come for %s",
            len(silent), len(wait.call_ids), execution.execution_id,
        )  # fmt: skip
        return
    pending = await deps.store.get_pending_turn(execution.execution_id, wait.step)
    if pending is None:
        raise PermanentError(f"the turn of step {wait.step} of {execution.execution_id} is lost")
    claim = await claim_step(message, state.update_time, deps)
    running = execution.model_copy(update={"status": ExecutionStatus.ACTIVE})
    turn = await prepare_turn(running, session, state, budget, deps)
    outcome = complete_waiting_turn(turn, pending, answers)
    commit, decision = build_commit(
        message, turn, None, ToolRun(), outcome, claim, deps.config, _due(deps)
    )
    commit.execution = transitions.stop_awaiting(commit.execution)
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return
    if silent:  # their answers would come too late: stop those conversations
        late = {d.conversation_id for d in pending.dispatches if d.call_id in silent}
        await lifecycle.cancel_sub_agents(execution.execution_id, deps, only=late)
    await publish_next(message, turn, outcome, commit, decision, deps)


async def publish_next(
    message: StepMessage,
    turn: Turn,
    outcome: IterationOutcome,
    commit: StepCommit,
    decision: Decision | None,
    deps: Deps,
) -> None:
    """Publish what follows the committed step: the next step, the decision, or the fan-in."""
    if outcome.next == "continue":
        await deps.bus.publish(iterate_message(turn.execution, message.step + 1))
        return
    if commit.finished_status is None or decision is None:
        return  # paused
    if isinstance(decision, FanIn):
        finished = turn.execution.model_copy(
            update={"status": commit.finished_status, "final_analysis": outcome.final_analysis}
        )
        await chains.after_execution(finished, deps)
        return
    if decision.publish is not None:
        await deps.bus.publish(decision.publish)
        # One batch: the next step is known published, and nothing more is due here.
        await deps.store.settle_advance(turn.execution.execution_id, decision.publish)

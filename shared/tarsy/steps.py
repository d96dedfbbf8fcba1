"""The step engine: what one invocation of the step function does with one message.

A ``start_session``/``start_stage`` message creates a stage (:mod:`tarsy.chains`).
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
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from tarsy import chains, sub_agents, telemetry, transitions
from tarsy.app import Deps
from tarsy.chains import FIRST_ITERATION_STEP, Advance, iterate_message
from tarsy.chunking import cap_strings
from tarsy.config.schema import ResolvedAgentConfig, TarsyConfig
from tarsy.errors import ConfigError, LeaseHeldError, LLMError, PermanentError, TransientError
from tarsy.llm import LLMProvider, LLMResult, get_provider
from tarsy.llm.base import GenerateRequest
from tarsy.llm.pricing import cost_of as cost_of  # re-exported: replay and tests use it
from tarsy.llm.pricing import priced
from tarsy.log import fields
from tarsy.models import (
    AgentExecution,
    CodeExecution,
    ErrorInfo,
    ExecutionStatus,
    FailedProvider,
    LLMInteraction,
    MCPInteraction,
    Session,
    StepMessage,
    SubAgentWait,
    TimelineEvent,
    TokenUsage,
    utcnow,
)
from tarsy.notify.session_end import on_session_end
from tarsy.progress import ProgressWriter
from tarsy.store import Claim, FollowUp, NewConversation, StepCommit, StepState, Store
from tarsy.strategies import finish
from tarsy.strategies.base import IterationOutcome, IterationState, Strategy, budget_crossed
from tarsy.strategies.registry import get_strategy
from tarsy.sub_agents import MESSAGE_AGENT, Dispatch, DispatchPlan, PendingTurn
from tarsy.summarize import shrink_results
from tarsy.tool_selection import restrict_listing
from tarsy.tools import ToolListing, ToolResult, error_result
from tarsy.transitions import ExecutionUpdate

logger = logging.getLogger(__name__)

INTERACTION_TEXT_CHARS = 64 * 1024  # per string in an interaction record's request copy
# Thought signatures are only useful while an execution runs; the TTL policy deletes them.
PROVIDER_STATE_TTL = timedelta(hours=1)
# Strategy-layer retry (seed 000 Q5): after the transport layer gave up, a retryable
# failure gets one more step; the second consecutive one fails the execution.
MAX_CONSECUTIVE_FAILURES = 2


# ─── entry ────────────────────────────────────────────────────────────────────


async def handle(message: StepMessage, deps: Deps) -> None:
    """Run one step message, mapping errors once.

    Raises TransientError when the message must be redelivered; records
    everything else from the error tree on the execution and session.
    """
    log = fields(session_id=message.session_id, execution_id=message.execution_id)
    logger.info("step %s %s", message.kind, message.step or message.stage, extra=log)
    try:
        if message.kind == "iterate":
            await iterate(message, deps)
        else:
            await chains.start_stage(message.session_id, message.stage, deps)
    except TransientError:
        raise
    except ConfigError as error:
        await chains.fail(message, ErrorInfo(message=str(error), code="configuration"), deps)
    except PermanentError as error:
        await chains.fail(message, ErrorInfo(message=str(error), code="permanent"), deps)
    await on_session_end(message.session_id, deps)


async def handle_dead_letter(message: StepMessage, deps: Deps, *, delivery_attempts: str) -> None:
    """Fail the execution and session of a message that Pub/Sub gave up delivering."""
    reason = ErrorInfo(
        message=(
            f"step {message.kind!r} #{message.step or message.stage} could not be processed "
            f"after {delivery_attempts} delivery attempts"
        ),
        code="dead_letter",
    )
    await chains.fail(message, reason, deps, unless_leased=True)
    await on_session_end(message.session_id, deps)


# ─── one iteration, top to bottom ─────────────────────────────────────────────


async def iterate(message: StepMessage, deps: Deps) -> None:
    """Run step ``message.step`` of execution ``message.execution_id``."""
    # Model attempts, retries and summaries share this deadline (Settings.step_budget_seconds).
    budget = time.monotonic() + deps.settings.step_budget_seconds
    state = await deps.store.get_step_state(
        message.execution_id, message.session_id, list(deps.config.mcp_servers)
    )
    execution, session = state.execution, state.session
    if execution is None or session is None or state.update_time is None:
        logger.error("execution %s or its session is missing; dropping", message.execution_id)
        return
    fate = triage(message, execution, session, utcnow())
    if fate != "run":
        await _settle(fate, message, execution, session, deps)
        return
    if execution.awaiting is not None:
        await collect_answers(message, state, execution.awaiting, budget, deps)
        return
    claim = await claim_step(message, state.update_time, deps)
    running = execution.model_copy(update={"status": ExecutionStatus.ACTIVE})
    async with Heartbeat(deps.store, message.execution_id, claim, _lease(deps)) as heartbeat:
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
            call = await call_model(turn, message.step, deps)
            tools = await run_tools(turn, call, deps)
    outcome = decide(turn, call, tools)
    if tools.dispatches:
        await wait_for_sub_agents(message, turn, call, tools, outcome, heartbeat.claim, deps)
        return
    commit, advance = build_commit(
        message, turn, call, tools, outcome, heartbeat.claim, deps.config, _due(deps)
    )
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return
    await publish_next(message, turn, outcome, commit, advance, deps)


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
    if execution.role != "chat":  # a chat runs on a finished session
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
    fate: Fate, message: StepMessage, execution: AgentExecution, session: Session, deps: Deps
) -> None:
    """Everything but running: heal, fan in, cancel, time out, or wait for the lease."""
    if fate == "fan_in":
        await chains.after_execution(execution, deps)  # the fan-in may not have run
    elif fate == "heal":
        await _heal_publish(execution, deps, utcnow())
    elif fate == "ahead":
        logger.warning(
            "message for step %s but execution %s is at step %s; dropping",
            message.step,
            execution.execution_id,
            execution.step,
        )
    elif fate == "cancel":
        await chains.cancel_execution(execution, session, deps)
    elif fate == "cancel_one":
        await chains.cancel_one(execution, deps)
    elif fate == "time_out":
        await chains.time_out(session, deps)
    elif fate == "leased":
        until = execution.lease_until.isoformat() if execution.lease_until else "?"
        raise LeaseHeldError(
            f"execution {execution.execution_id!r} step {execution.step} is leased until {until}"
        )


async def _heal_publish(execution: AgentExecution, deps: Deps, now: datetime) -> None:
    """Re-publish the execution's current step if its message is overdue.

    A duplicate of a committed step arrives while the next step's message is
    most likely still on its way: publishing again on every duplicate would
    only multiply messages. Once the next step is overdue, it was lost.
    """
    if execution.status.is_terminal or execution.status == ExecutionStatus.PAUSED:
        return
    if execution.published_step >= execution.step or execution.lease_owner:
        return
    if execution.due_at is not None and execution.due_at > now:
        return
    logger.info(
        "re-publishing step %s of %s (its message may have been lost)",
        execution.step,
        execution.execution_id,
    )
    await deps.bus.publish(iterate_message(execution, execution.step))


async def after_lost_commit(message: StepMessage, deps: Deps) -> None:
    """The execution changed under the step: a cancel, or a takeover after the lease ran out.

    A cancel marks the execution (see :func:`tarsy.transitions.request_cancel_of_execution`),
    so a step that was mid-call when it came ends the execution here instead of
    committing and publishing what would follow.
    """
    execution = await deps.store.get_execution(message.execution_id)
    if execution is None or not execution.cancel_requested or execution.status.is_terminal:
        return  # another invocation took over after our lease expired; it owns the step now
    session = await deps.store.get_session(message.session_id)
    if session is not None and session.cancel_requested:
        await chains.cancel_execution(execution, session, deps)
    elif session is not None:
        await chains.cancel_one(execution, deps)


def _due(deps: Deps) -> timedelta:
    return timedelta(seconds=deps.settings.step_due_seconds)


def _lease(deps: Deps) -> timedelta:
    return timedelta(seconds=deps.settings.step_lease_seconds)


class Heartbeat:
    """Renews a running step's lease every third of it, so a slow step is never stolen.

    The lease can then be short (a minute), and a step whose process died is
    re-run soon after it expires. Each renewal is conditional on the claim's
    update time and yields the one the commit must present; once a renewal
    finds the execution changed (a cancel, a takeover), it stops, and the
    commit will fail the same way.
    """

    def __init__(self, store: Store, execution_id: str, claim: Claim, lease: timedelta) -> None:
        self.claim = claim
        self._store = store
        self._execution_id = execution_id
        self._lease = lease
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


@dataclass
class Turn:
    """What one iteration works with: who runs, with what config, tools and request."""

    execution: AgentExecution
    session: Session
    config: ResolvedAgentConfig
    strategy: Strategy
    provider: LLMProvider
    state: IterationState
    request: GenerateRequest
    budget: float  # time.monotonic() deadline shared by model attempts and summaries


async def prepare_turn(
    execution: AgentExecution, session: Session, state: StepState, budget: float, deps: Deps
) -> Turn:
    """Resolve the config, read the conversation, list the tools, build the request."""
    config = chains.resolve_execution(deps.config, session, execution)
    strategy = get_strategy(execution.strategy)
    listing = ToolListing()
    if strategy.uses_tools and config.mcp_servers and deps.tools is not None:
        listing = await deps.tools.list_tools(config.mcp_servers, state.tool_lists)
        # The alert's tool allow-lists (ToolSelectionError: a named tool is not listed).
        listing = restrict_listing(listing, config.mcp_tools)
    if strategy.uses_tools and sub_agents.offers_message_agent(execution, config):
        tool = sub_agents.message_agent_tool(config, deps.config.agents)
        listing = listing.model_copy(update={"tools": [*listing.tools, tool]})
    iteration = IterationState(
        execution=execution,
        config=config,
        messages=await deps.store.load_messages(execution.execution_id),
        provider_state=state.provider_state,
        tools=listing,
    )
    return Turn(
        execution=execution,
        session=session,
        config=config,
        strategy=strategy,
        provider=get_provider(config.provider, deps.settings),
        state=iteration,
        request=strategy.build_request(iteration),
        budget=budget,
    )


# ─── the model call ───────────────────────────────────────────────────────────


@dataclass
class ModelCall:
    """The model's answer (or its failure) and the record of the call."""

    interaction: LLMInteraction
    result: LLMResult | None = None
    error: LLMError | None = None


async def call_model(turn: Turn, step: int, deps: Deps) -> ModelCall:
    """Call the model (then its fallbacks), streaming progress at most once a second.

    A call that still fails after the transport retries with a kind its
    provider lists in ``fallback_on`` is made again on the next provider of
    ``fallback``, forward only, within the step's budget. Thought signatures
    are the answering provider's own: a fallback gets none and leaves none.

    Once the session's spend has crossed its chain's budget (``max_tokens``,
    ``max_cost_usd``), a call that could still use tools becomes the strategy's
    conclusion call: the execution ends with a final analysis that says it was
    cut short.
    """
    spent = budget_crossed(turn.session.tokens.total_tokens, turn.session.cost, turn.config)
    if spent is not None and turn.strategy.uses_tools and turn.request.tool_choice != "none":
        turn.state = turn.state.model_copy(update={"budget_note": spent})
        turn.request = turn.strategy.build_request(turn.state)
    interaction = LLMInteraction(
        step=step,
        model=turn.config.provider.model,
        provider=turn.provider.name,
        provider_name=turn.config.provider_name,
        # The full conversation is in messages/; the record keeps a bounded copy.
        request=cap_strings(
            turn.request.model_dump(mode="json", exclude={"thought_signatures"}),
            INTERACTION_TEXT_CHARS,
        ),
    )
    progress = ProgressWriter(deps.store, turn.execution.execution_id, step)
    started = time.perf_counter()
    candidates = [turn.config.provider_name, *turn.config.provider.fallback]
    for index, name in enumerate(candidates):
        config = deps.config.llm_providers[name] if index else turn.config.provider
        provider = get_provider(config, deps.settings) if index else turn.provider
        request = (
            turn.request.model_copy(update={"config": config, "thought_signatures": {}})
            if index
            else turn.request
        )
        interaction.provider_name, interaction.model = name, config.model
        interaction.provider = provider.name
        try:
            result = await telemetry.traced_model_call(
                provider.generate(request, progress, budget=turn.budget),
                provider_name=telemetry.genai_provider_name(config, deps.settings),
                model=config.model,
                conversation_id=turn.execution.execution_id,
            )
        except LLMError as error:
            falls_back = (
                index + 1 < len(candidates)
                and error.kind in turn.config.provider.fallback_on
                and time.monotonic() < turn.budget
            )
            if falls_back:
                logger.warning("provider %s failed (%s); falling back", name, error.code)
                interaction.failed_providers.append(
                    FailedProvider(
                        provider=name, model=config.model, error=error.info, attempts=error.attempts
                    )
                )
                continue
            interaction.duration_ms = (time.perf_counter() - started) * 1000
            interaction.error = error.info
            interaction.attempts = error.attempts
            return ModelCall(interaction=interaction, error=error)
        if index:
            result.provider_state = {}
        interaction.duration_ms = (time.perf_counter() - started) * 1000
        interaction.response_text = result.text
        interaction.thinking_text = result.thinking
        interaction.tool_calls = result.tool_calls
        interaction.code_executions = [
            CodeExecution(code=c.code, outcome=c.outcome, output=c.output)
            for c in result.code_executions
        ]
        interaction.tokens = result.usage
        interaction.attempts = result.attempts
        interaction.metadata = result.metadata
        interaction.finish_reason = result.raw_finish_reason or result.finish_reason
        interaction.error = finish.cut_short_error(result)
        interaction.cost, price_note = priced(deps.config, config, result.usage)
        if price_note:
            interaction.metadata = {**result.metadata, "price": price_note}
        return ModelCall(interaction=interaction, result=result)
    raise AssertionError("unreachable: the last candidate returns or records its error")


# ─── the tools ────────────────────────────────────────────────────────────────


@dataclass
class ToolRun:
    """The tool calls of a turn: results as the model sees them, records, extra usage.

    ``interactions`` are the records of the calls that summarized large results
    (``usage`` is their sum), written as ``llm_interactions/{step}-summary-{n}``.
    """

    results: list[ToolResult] = field(default_factory=list)
    records: list[MCPInteraction] = field(default_factory=list)
    summaries: list[TimelineEvent] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    interactions: list[LLMInteraction] = field(default_factory=list)
    # message_agent calls sent to sub-agents: the turn waits for their answers.
    dispatches: list[Dispatch] = field(default_factory=list)
    # The execution's sub-agent conversations as read (with update times), if asked.
    conversations: dict[str, tuple[AgentExecution, datetime]] = field(default_factory=dict)


async def run_tools(turn: Turn, call: ModelCall, deps: Deps) -> ToolRun:
    """Run the calls the model asked for, all at once, and shrink large results.

    Under ``tool_choice: none`` (a conclusion call, or an agent's choice) no call
    is ever run, whatever the model returned (seed 001 R6).
    """
    if call.result is None or call.result.cut_short or turn.request.tool_choice == "none":
        return ToolRun()
    calls = turn.strategy.tool_calls(turn.state, call.result)
    if not calls:
        return ToolRun()
    step = call.interaction.step
    # message_agent goes to sub-agents (when this agent has it); everything else to MCP.
    offered = turn.state.tools.get(MESSAGE_AGENT) is not None
    messages = [c for c in calls if offered and c.name == MESSAGE_AGENT]
    calls = [c for c in calls if c not in messages]
    plan, conversations = DispatchPlan(), {}
    if messages:
        conversations = await deps.store.list_sub_agents(turn.execution.execution_id)
        plan = sub_agents.plan_dispatch(
            turn.execution, turn.config, messages, step,
            {eid: execution for eid, (execution, _) in conversations.items()},
        )  # fmt: skip
    if not calls:
        results = []
    elif deps.tools is None:
        results = [error_result(c, "no tool executor is configured") for c in calls]
    else:
        results = await deps.tools.call_tools(calls, turn.state.tools)
    shrunk = await shrink_results(
        results,
        deps.config.mcp_servers,
        execution_id=turn.execution.execution_id,
        step=step,
        provider=turn.provider,
        config=turn.config.provider,
        context=_investigation_context(turn.session),
        budget=turn.budget,
    )
    price = deps.config.price_for(turn.config.provider.model)
    for record in shrunk.interactions:
        record.cost = cost_of(price, record.tokens)
    return ToolRun(
        results=[*shrunk.results, *plan.refused],
        records=[_mcp_record(step, r) for r in shrunk.results],
        summaries=shrunk.timeline,
        usage=shrunk.usage,
        interactions=shrunk.interactions,
        dispatches=plan.dispatches,
        conversations=conversations,
    )


def _investigation_context(session: Session, limit: int = 4000) -> str:
    """What a tool-result summary needs to know about the investigation."""
    return f"Alert type: {session.alert_type}\n{session.alert_data[:limit]}"


def _mcp_record(step: int, result: ToolResult) -> MCPInteraction:
    return MCPInteraction(
        step=step,
        call_id=result.call_id,
        server=result.server,
        tool=result.tool,
        arguments=result.arguments,
        result=result.full_content,
        is_error=result.is_error,
        error=result.error,
        duration_ms=result.duration_ms,
        shown_as=result.shown_as,
        masked=result.masked,
    )


# ─── deciding and committing ──────────────────────────────────────────────────


def after_llm_failure(execution: AgentExecution, error: ErrorInfo) -> IterationOutcome:
    """Retry the iteration in a later step, or fail on a second failure in a row."""
    failures = execution.consecutive_failures + 1
    if error.retryable and failures < MAX_CONSECUTIVE_FAILURES:
        return IterationOutcome(next="continue", error=error, failed_attempt=True)
    if error.retryable:
        error = error.model_copy(
            update={"message": f"{failures} consecutive failed iterations; last: {error.message}"}
        )
    return IterationOutcome(next="fail", error=error)


def decide(turn: Turn, call: ModelCall, tools: ToolRun) -> IterationOutcome:
    """The strategy's verdict on the answer and the tool results (pure)."""
    if call.result is None:
        assert call.error is not None
        return after_llm_failure(turn.execution, call.error.info)
    cut = finish.cut_short_error(call.result)
    if cut is not None:  # never a conclusion, never acted on: a failed attempt
        outcome = after_llm_failure(turn.execution, cut)
        outcome.timeline.append(finish.cut_short_event(call.result, cut, turn.state.iteration))
        return outcome
    outcome = turn.strategy.on_result(turn.state, call.result, tools.results)
    outcome.timeline.extend(tools.summaries)
    if turn.state.tools.unavailable and outcome.timeline:
        outcome.timeline[0].metadata["unavailable_servers"] = dict(turn.state.tools.unavailable)
    if outcome.timeline and opens_the_investigation(turn.execution) and turn.session.runbook_error:
        # The watcher of the first agent learns why it works without its runbook.
        outcome.timeline[0].metadata["runbook_error"] = turn.session.runbook_error
    return outcome


def opens_the_investigation(execution: AgentExecution) -> bool:
    """Whether this is the first iteration of an agent of the first stage."""
    return execution.role == "agent" and execution.stage == 0 and execution.iteration == 0


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
) -> tuple[StepCommit, Advance | None]:
    """Everything this step writes, as one atomic batch, and what it publishes after.

    When the execution ends and alone decides what follows (:func:`chains.plan_advance`),
    the stage result, the session's status and the next execution join the batch.
    ``call`` is None for the step that completes a turn with its sub-agents' answers.
    """
    now = utcnow()
    execution, session = turn.execution, turn.session
    finished = FINISHED.get(outcome.next)
    advance: Advance | None = None
    if finished is not None:
        ended = execution.model_copy(update={"error": outcome.error})
        advance = chains.plan_advance(
            config, session, ended, finished, outcome.final_analysis, now, now + due
        )
    # Due: the next step; or, once finished, what follows it until that is published
    # (a parallel stage's fan-in, or the planned advance's message).
    follows = advance is None or advance.publish is not None
    awaits = outcome.next == "continue" or (finished is not None and follows)
    update = execution_update(execution, outcome, now, now + due if awaits else None)
    commit = step_records(message, turn, call, tools, claim, config, now).model_copy(
        update={
            "messages": outcome.messages,
            "timeline": outcome.timeline,
            "execution": update,
            "stage_index": execution.stage if execution.stage >= 0 else None,
            "finished_status": finished,
        }
    )
    if outcome.next == "pause" and execution.role != "chat":
        if execution.role == "agent":
            commit.stage = transitions.pause_stage()
        commit.session = transitions.pause_session(session, outcome.error)
    if advance is not None:
        commit.stage, commit.session = advance.stage, advance.session
        commit.create_execution = advance.create
        commit.create_opening = advance.opening
    return commit, advance


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
        cost=(call.interaction.cost if call is not None else 0.0) + cost_of(price, tools.usage),
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
    timeout = turn.config.sub_agent_timeout_seconds
    results = sub_agents.turn_results(pending, answers, timeout)
    outcome = turn.strategy.on_result(turn.state, pending.result, results)
    _shown_before, answered = sub_agents.split_timeline(outcome.timeline, pending.dispatches)
    outcome = outcome.model_copy(update={"timeline": answered})
    commit, advance = build_commit(
        message, turn, None, ToolRun(), outcome, claim, deps.config, _due(deps)
    )
    commit.execution = transitions.stop_awaiting(commit.execution)
    if not await deps.store.commit_step(commit):
        await after_lost_commit(message, deps)
        return
    if silent:  # their answers would come too late: stop those conversations
        late = {d.conversation_id for d in pending.dispatches if d.call_id in silent}
        await chains.cancel_sub_agents(execution.execution_id, deps, only=late)
    await publish_next(message, turn, outcome, commit, advance, deps)


async def publish_next(
    message: StepMessage,
    turn: Turn,
    outcome: IterationOutcome,
    commit: StepCommit,
    advance: Advance | None,
    deps: Deps,
) -> None:
    """Publish what follows the committed step: the next step, the advance, or the fan-in."""
    if outcome.next == "continue":
        await deps.bus.publish(iterate_message(turn.execution, message.step + 1))
        return
    if commit.finished_status is None:
        return  # paused
    if advance is None:
        finished = turn.execution.model_copy(
            update={"status": commit.finished_status, "final_analysis": outcome.final_analysis}
        )
        await chains.after_execution(finished, deps)
        return
    if advance.publish is not None:
        await deps.bus.publish(advance.publish)
        # One batch: the next step is known published, and nothing more is due here.
        await deps.store.settle_advance(turn.execution.execution_id, advance.publish)

"""The step engine: what one invocation of the step function does with one message.

Each message runs at most one LLM iteration. The rules that make at-least-once
delivery safe:

* ``message.step < execution.step``: the step is already committed. If the next
  step's message may never have been published (a crash between commit and
  publish), publish it again; otherwise acknowledge.
* ``message.step == execution.step``: claim the lease (fails if another
  invocation holds it: raise, Pub/Sub redelivers later), run the iteration,
  commit atomically under the claim, publish what comes next.
* ``message.step > execution.step``: cannot happen in order; acknowledge and log.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tarsy import chains
from tarsy.bus import Publisher
from tarsy.chains import iterate_message
from tarsy.chunking import cap_strings
from tarsy.config.schema import ModelPrice, TarsyConfig
from tarsy.errors import LeaseHeldError, LLMError
from tarsy.llm import collect, get_provider
from tarsy.log import fields
from tarsy.models import (
    AgentExecution,
    ErrorInfo,
    ExecutionStatus,
    LLMInteraction,
    MCPInteraction,
    Session,
    StepMessage,
    TimelineEvent,
    TokenUsage,
    utcnow,
)
from tarsy.progress import ProgressWriter
from tarsy.settings import Settings
from tarsy.store import StepCommit, Store
from tarsy.strategies.base import IterationOutcome, IterationState
from tarsy.strategies.registry import get_strategy
from tarsy.summarize import shrink_results
from tarsy.tools import ToolExecutor, ToolListing, ToolResult, error_result

logger = logging.getLogger(__name__)

INTERACTION_TEXT_CHARS = 64 * 1024  # per string in an interaction record's request copy
# Thought signatures are only useful while an execution runs; the TTL policy deletes them.
PROVIDER_STATE_TTL = timedelta(hours=1)


# Strategy-layer retry (seed 000 Q5): after the transport layer gave up, a retryable
# failure gets one more step; the second consecutive one fails the execution.
MAX_CONSECUTIVE_FAILURES = 2


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


def cost_of(price: ModelPrice | None, usage: TokenUsage) -> float:
    """USD cost of one call; thinking tokens are billed as output. 0 without a price."""
    if price is None:
        return 0.0
    output = usage.output_tokens + usage.thinking_tokens
    return (
        usage.input_tokens * price.input_per_million + output * price.output_per_million
    ) / 1_000_000


@dataclass(frozen=True)
class Deps:
    """What the engine talks to; built once per process by the function entry point."""

    settings: Settings
    config: TarsyConfig
    store: Store
    bus: Publisher
    tools: ToolExecutor | None = None


def _lease_owner() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def handle(message: StepMessage, deps: Deps) -> None:
    """Run one step message. Raises TransientError when the message must be redelivered."""
    log_fields = fields(
        session_id=message.session_id, execution_id=message.execution_id, step=message.step
    )
    logger.info("step %s", message.kind, extra=log_fields)
    if message.kind == "start_session":
        await _start_stage(message, 0, deps)
    elif message.kind == "start_stage":
        await _start_stage(message, message.step, deps)
    elif message.kind == "iterate":
        await _iterate(message, deps)
    else:
        logger.error("no handler for step kind %r; dropping", message.kind, extra=log_fields)


# ─── start ────────────────────────────────────────────────────────────────────


async def _start_stage(message: StepMessage, index: int, deps: Deps) -> None:
    """``start_session`` (stage 0) and ``start_stage`` (stage ``message.step``)."""
    session = await deps.store.get_session(message.session_id)
    if session is None:
        logger.error("session %s does not exist; dropping", message.session_id)
        return
    if session.status.is_terminal:
        return
    if session.cancel_requested:
        await chains.mark_cancelled(session.session_id, deps)
        return
    await chains.start_stage(session, index, deps)


# ─── iterate ──────────────────────────────────────────────────────────────────


async def _iterate(message: StepMessage, deps: Deps) -> None:
    loaded = await deps.store.get_step_state(message.execution_id, message.session_id)
    execution, read_time, session = loaded.execution, loaded.update_time, loaded.session
    if execution is None or session is None or read_time is None:
        logger.error("execution %s or its session is missing; dropping", message.execution_id)
        return
    if message.step < execution.step:
        if execution.status.is_terminal:
            await chains.after_execution(execution, deps)  # the fan-in may not have run
        else:
            await _heal_publish(execution, deps)
        return
    if message.step > execution.step:
        logger.warning(
            "message for step %s but execution %s is at step %s; dropping",
            message.step,
            execution.execution_id,
            execution.step,
        )
        return
    if execution.status.is_terminal or execution.status == ExecutionStatus.PAUSED:
        return
    now = utcnow()
    if execution.role != "chat":  # a chat runs on a finished session
        if session.cancel_requested:
            await _cancel_execution(execution, deps)
            return
        if session.deadline is not None and now > session.deadline:
            await time_out(session.session_id, deps)
            return
    if execution.lease_owner and execution.lease_until and execution.lease_until > now:
        raise LeaseHeldError(
            f"execution {execution.execution_id!r} step {execution.step} is leased until "
            f"{execution.lease_until.isoformat()}"
        )
    claim = await deps.store.claim(
        execution.execution_id,
        owner=_lease_owner(),
        until=now + timedelta(seconds=deps.settings.step_lease_seconds),
        read_time=read_time,
        step=message.step,
    )
    resolved = chains.resolve_execution(deps, session, execution)
    strategy = get_strategy(execution.strategy)
    listing = ToolListing()
    if strategy.uses_tools and resolved.mcp_servers and deps.tools is not None:
        listing = await deps.tools.list_tools(resolved.mcp_servers)
    state = IterationState(
        execution=execution,
        config=resolved,
        messages=await deps.store.load_messages(execution.execution_id),
        provider_state=loaded.provider_state,
        tools=listing,
    )
    request = strategy.build_request(state)
    provider = get_provider(resolved.provider, deps.settings)
    interaction = LLMInteraction(
        step=message.step,
        model=resolved.provider.model,
        provider=provider.name,
        # The full conversation is in messages/; the record keeps a bounded copy.
        request=cap_strings(
            request.model_dump(mode="json", exclude={"thought_signatures"}),
            INTERACTION_TEXT_CHARS,
        ),
    )
    provider_state: dict[str, str] = {}
    mcp_records: list[MCPInteraction] = []
    extra_usage = TokenUsage()
    started = time.perf_counter()
    try:
        progress = ProgressWriter(deps.store, execution.execution_id, message.step)
        result = await collect(provider.generate(request, progress))
    except LLMError as e:
        interaction.duration_ms = (time.perf_counter() - started) * 1000
        interaction.error = e.info
        interaction.attempts = e.attempts
        outcome = after_llm_failure(execution, e.info)
    else:
        interaction.duration_ms = (time.perf_counter() - started) * 1000
        interaction.response_text = result.text
        interaction.thinking_text = result.thinking
        interaction.tool_calls = result.tool_calls
        interaction.tokens = result.usage
        interaction.attempts = result.attempts
        interaction.metadata = result.metadata
        interaction.cost = cost_of(deps.config.price_for(resolved.provider.model), result.usage)
        provider_state = result.provider_state
        calls = strategy.tool_calls(state, result)
        tool_results: list[ToolResult] = []
        summary_events: list[TimelineEvent] = []
        if calls:
            if deps.tools is None:
                tool_results = [error_result(c, "no tool executor is configured") for c in calls]
            else:
                tool_results = await deps.tools.call_tools(calls, listing)
            shrunk = await shrink_results(
                tool_results,
                deps.config.mcp_servers,
                execution_id=execution.execution_id,
                provider=provider,
                config=resolved.provider,
                context=_investigation_context(session),
            )
            tool_results, summary_events, extra_usage = (
                shrunk.results,
                shrunk.timeline,
                shrunk.usage,
            )
            mcp_records = [_mcp_record(message.step, r) for r in tool_results]
        outcome = strategy.on_result(state, result, tool_results)
        outcome.timeline.extend(summary_events)
        if listing.unavailable and outcome.timeline:
            outcome.timeline[0].metadata["unavailable_servers"] = dict(listing.unavailable)
    commit = _commit_for(message, execution, session, outcome, interaction)
    commit.claim = claim
    commit.mcp_interactions = mcp_records
    if extra_usage.total_tokens:
        commit.usage = commit.usage + extra_usage
        commit.cost += cost_of(deps.config.price_for(resolved.provider.model), extra_usage)
    if provider_state:
        commit.provider_state = provider_state
        commit.provider_state_expire_at = utcnow() + PROVIDER_STATE_TTL
    if not await deps.store.commit_step(commit):
        return  # another invocation took over after our lease expired; it owns the step now
    if commit.finished_status is not None:
        finished = execution.model_copy(
            update={"status": commit.finished_status, "final_analysis": outcome.final_analysis}
        )
        await chains.after_execution(finished, deps)
        return
    if outcome.next == "continue":
        # Cancellation may have been asked for while the model was thinking.
        current = await deps.store.get_session(session.session_id)
        if current is not None and current.cancel_requested and execution.role != "chat":
            await _cancel_execution(execution, deps)
            return
        await deps.bus.publish(iterate_message(execution, message.step + 1))


def _investigation_context(session: Session, limit: int = 4000) -> str:
    """What a tool-result summary needs to know about the investigation."""
    alert = session.alert_data if len(session.alert_data) <= limit else session.alert_data[:limit]
    return f"Alert type: {session.alert_type}\n{alert}"


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


def _commit_for(
    message: StepMessage,
    execution: AgentExecution,
    session: Session,
    outcome: IterationOutcome,
    interaction: LLMInteraction,
) -> StepCommit:
    now = utcnow()
    execution_fields: dict[str, Any] = {"iteration": execution.iteration + 1}
    if outcome.failed_attempt:
        # The same iteration runs again in the next step; only the failure is counted.
        execution_fields = {"consecutive_failures": execution.consecutive_failures + 1}
    else:
        execution_fields["consecutive_failures"] = 0
    stage_fields: dict[str, Any] = {}
    session_fields: dict[str, Any] = {}
    finished: ExecutionStatus | None = None
    if outcome.next == "complete":
        finished = ExecutionStatus.COMPLETED
        execution_fields.update(
            status=finished.value, final_analysis=outcome.final_analysis, completed_at=now
        )
    elif outcome.next == "fail":
        finished = ExecutionStatus.FAILED
        error = outcome.error.model_dump() if outcome.error else None
        execution_fields.update(status=finished.value, error=error, completed_at=now)
    elif outcome.next == "pause":
        error = outcome.error.model_dump() if outcome.error else None
        execution_fields.update(status=ExecutionStatus.PAUSED.value, error=error)
        if execution.role == "agent":
            stage_fields.update(status=ExecutionStatus.PAUSED.value)
        session_fields.update(status=ExecutionStatus.PAUSED.value, error=error)
    return StepCommit(
        execution_id=execution.execution_id,
        session_id=session.session_id,
        step=message.step,
        next_step=message.step + 1,
        messages=outcome.messages,
        timeline=outcome.timeline,
        llm_interaction=interaction,
        execution_fields=execution_fields,
        usage=interaction.tokens,
        cost=interaction.cost,
        stage_index=execution.stage if execution.stage >= 0 else None,
        stage_fields=stage_fields,
        session_fields=session_fields,
        finished_status=finished,
        role=execution.role,
    )


async def _cancel_execution(execution: AgentExecution, deps: Deps) -> None:
    """End a cancelled session's execution (and the session) without another LLM call."""
    now = utcnow()
    cancelled = ExecutionStatus.CANCELLED.value
    await deps.store.update_execution(
        execution.execution_id,
        {"status": cancelled, "completed_at": now, "lease_owner": None, "lease_until": None},
    )
    await deps.store.update_session(
        execution.session_id, {"status": cancelled, "completed_at": now}
    )
    logger.info(
        "cancelled",
        extra=fields(session_id=execution.session_id, execution_id=execution.execution_id),
    )


async def time_out(session_id: str, deps: Deps) -> None:
    """End a session past its deadline: it and its unfinished executions become timed_out."""
    now = utcnow()
    timed_out = ExecutionStatus.TIMED_OUT.value
    error = ErrorInfo(message="the session passed its deadline", code="deadline", retryable=False)
    for execution in await deps.store.list_executions(session_id):
        if not execution.status.is_terminal:
            await deps.store.update_execution(
                execution.execution_id,
                {"status": timed_out, "completed_at": now, "lease_owner": None,
                 "lease_until": None, "error": error.model_dump()},
            )  # fmt: skip
    await deps.store.update_session(
        session_id, {"status": timed_out, "completed_at": now, "error": error.model_dump()}
    )
    logger.warning("session timed out", extra=fields(session_id=session_id))


async def _heal_publish(execution: AgentExecution, deps: Deps) -> None:
    """Re-publish the execution's current step if its message may have been lost."""
    if execution.status.is_terminal or execution.status == ExecutionStatus.PAUSED:
        return
    if execution.published_step >= execution.step or execution.lease_owner:
        return
    logger.info(
        "re-publishing step %s of %s (its message may have been lost)",
        execution.step,
        execution.execution_id,
    )
    await deps.bus.publish(iterate_message(execution, execution.step))


async def handle_dead_letter(message: StepMessage, deps: Deps, *, delivery_attempts: str) -> None:
    """Fail the execution and session of a message that Pub/Sub gave up delivering."""
    reason = ErrorInfo(
        message=(
            f"step {message.kind!r} #{message.step} could not be processed after "
            f"{delivery_attempts} delivery attempts"
        ),
        code="dead_letter",
        retryable=False,
    )
    logger.error(reason.message, extra=fields(session_id=message.session_id))
    now = utcnow()
    failed = ExecutionStatus.FAILED.value
    if message.execution_id:
        execution = await deps.store.get_execution(message.execution_id)
        if execution is not None and not execution.status.is_terminal:
            await deps.store.update_execution(
                message.execution_id,
                {
                    "status": failed,
                    "error": reason.model_dump(),
                    "completed_at": now,
                    "lease_owner": None,
                    "lease_until": None,
                },
            )
    session = await deps.store.get_session(message.session_id)
    if session is not None and not session.status.is_terminal:
        await deps.store.update_session(
            message.session_id,
            {"status": failed, "error": reason.model_dump(), "completed_at": now},
        )

"""One iteration of an agent, its I/O passed in: what the step engine and replay both run.

Design constraint: the engine (:mod:`tarsy.engine.steps`) and ``tarsy replay``
must run the same iteration, or replay reports differences that are not in the
session. So the iteration is built here around what it talks to, passed in as
:class:`Ports` (a provider, a tool executor, the sub-agent directory, a
progress sink): the engine passes the live ones; replay passes recorded ones.

A :class:`Turn` is built before the model call and frozen: whether the
session's budget is spent, and so whether the call must conclude, is decided
there (:func:`build_turn`), not rewritten mid-call. Fallback is a provider
(:class:`~tarsy.llm.fallback.FallbackProvider`): the core makes one call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypedDict

from tarsy.agent.strategies import finish
from tarsy.agent.strategies.base import IterationOutcome, IterationState, Strategy, budget_crossed
from tarsy.agent.window import fit_to_window
from tarsy.config.schema import ResolvedAgentConfig, TarsyConfig
from tarsy.engine import sub_agents
from tarsy.engine.sub_agents import (
    MESSAGE_AGENT,
    Dispatch,
    DispatchPlan,
    PendingTurn,
    SubAgentAnswer,
)
from tarsy.errors import LLMError
from tarsy.llm.backends import capabilities_of
from tarsy.llm.base import GenerateRequest, LLMProvider, LLMResult, Progress
from tarsy.llm.fallback import FallbackError, FallbackResult
from tarsy.llm.pricing import cost_of as cost_of  # re-exported: replay and tests use it
from tarsy.llm.pricing import priced
from tarsy.models import (
    AgentExecution,
    CodeExecution,
    ConversationMessage,
    ErrorInfo,
    LLMInteraction,
    MCPInteraction,
    Session,
    TimelineEvent,
    TokenUsage,
)
from tarsy.money import usd_float
from tarsy.persistence.chunking import cap_strings
from tarsy.tools.base import ToolExecutor, ToolListing, ToolResult, error_result
from tarsy.tools.summarize import shrink_results

INTERACTION_TEXT_CHARS = 64 * 1024  # per string in an interaction record's request copy
# Strategy-layer retry (seed 000 Q5): after the transport layer gave up, a retryable
# failure gets one more step; the second consecutive one fails the execution.
MAX_CONSECUTIVE_FAILURES = 2


# ─── the turn ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Turn:
    """What one iteration works with, decided before the model call."""

    execution: AgentExecution
    session: Session
    config: ResolvedAgentConfig
    strategy: Strategy
    state: IterationState
    request: GenerateRequest
    budget: float  # time.monotonic() deadline shared by model attempts and summaries
    # What the session's spend crossed of its budget: the call then concludes.
    spent: str | None = None


def build_turn(
    execution: AgentExecution,
    session: Session,
    config: ResolvedAgentConfig,
    strategy: Strategy,
    messages: list[ConversationMessage],
    provider_state: Mapping[str, str],
    tools: ToolListing,
    budget: float,
) -> Turn:
    """The turn's state and request (pure).

    Once the session's spend has crossed its chain's budget (``max_tokens``,
    ``max_cost_usd``), a call that could still use tools becomes the strategy's
    conclusion call: the execution ends with a final analysis that says it was
    cut short.
    """
    state = IterationState(
        execution=execution,
        config=config,
        messages=messages,
        provider_state=dict(provider_state),
        tools=tools,
    )
    request = strategy.build_request(state)
    spent = budget_crossed(session.tokens.total_tokens, usd_float(session.cost), config)
    if spent is not None and strategy.uses_tools and request.tool_choice != "none":
        state = state.model_copy(update={"budget_note": spent})
        request = strategy.build_request(state)
    return Turn(execution, session, config, strategy, state, fitted(request), budget, spent)


def fitted(request: GenerateRequest) -> GenerateRequest:
    """The request with its oldest tool results elided if it outgrew the model's window."""
    window = capabilities_of(request.config).context_window
    fit = fit_to_window(request.messages, window, request.config.max_output_tokens)
    if not fit.elided:
        return request
    return request.model_copy(update={"messages": fit.messages})


# ─── what an iteration talks to ───────────────────────────────────────────────


class SubAgentDirectory(Protocol):
    """Where a turn finds its execution's sub-agent conversations (with update times)."""

    async def list_sub_agents(
        self, parent_execution_id: str
    ) -> dict[str, tuple[AgentExecution, datetime]]:
        """The parent's sub-agent conversations by execution id."""
        ...


@dataclass(frozen=True)
class Ports:
    """What one iteration talks to: live in the engine, recorded in replay."""

    provider: LLMProvider
    tools: ToolExecutor | None
    sub_agents: SubAgentDirectory
    config: TarsyConfig  # MCP server settings (summaries) and model prices
    progress: Progress | None = None


@dataclass(frozen=True)
class Iteration:
    """One iteration's call, tool run and verdict."""

    call: ModelCall
    tools: ToolRun
    outcome: IterationOutcome


async def run_iteration(turn: Turn, step: int, ports: Ports) -> Iteration:
    """Call the model, run the tools it asked for, and take the strategy's verdict."""
    call = await call_model(turn, step, ports)
    tools = await run_tools(turn, call, ports)
    return Iteration(call=call, tools=tools, outcome=decide(turn, call, tools))


# ─── the model call ───────────────────────────────────────────────────────────


@dataclass
class ModelCall:
    """The model's answer (or its failure) and the record of the call."""

    interaction: LLMInteraction
    result: LLMResult | None = None
    error: LLMError | None = None


async def call_model(turn: Turn, step: int, ports: Ports) -> ModelCall:
    """Call the model once (its fallbacks are the provider's), streaming to ``ports.progress``."""
    interaction = LLMInteraction(
        step=step,
        model=turn.config.provider.model,
        provider=ports.provider.name,
        provider_name=turn.config.provider_name,
        # The full conversation is in messages/; the record keeps a bounded copy.
        request=request_record(turn.request),
    )
    started = time.perf_counter()
    try:
        result = await ports.provider.generate(turn.request, ports.progress, budget=turn.budget)
    except LLMError as error:
        interaction.duration_ms = (time.perf_counter() - started) * 1000
        if isinstance(error, FallbackError):
            interaction.provider_name, interaction.model = (
                error.tried.name,
                error.tried.config.model,
            )
            interaction.provider = error.tried.provider.name
            interaction.failed_providers = error.failed_providers
        interaction.error = error.info
        interaction.attempts = error.attempts
        return ModelCall(interaction=interaction, error=error)
    answering = turn.config.provider
    if isinstance(result, FallbackResult):
        interaction.provider_name, interaction.model = result.answered_by, result.model
        interaction.provider, interaction.failed_providers = result.backend, result.failed_providers
        answering = ports.config.llm_providers.get(result.answered_by, answering)
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
    interaction.cost, price_note = priced(ports.config, answering, result.usage)
    if price_note:
        interaction.metadata = {**result.metadata, "price": price_note}
    return ModelCall(interaction=interaction, result=result)


def request_record(request: GenerateRequest) -> dict[str, Any]:
    """The bounded copy of a request its interaction record keeps (no signatures)."""
    record: dict[str, Any] = cap_strings(
        request.model_dump(mode="json", exclude={"thought_signatures"}), INTERACTION_TEXT_CHARS
    )
    return record


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


async def run_tools(turn: Turn, call: ModelCall, ports: Ports) -> ToolRun:
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
        conversations = await ports.sub_agents.list_sub_agents(turn.execution.execution_id)
        plan = sub_agents.plan_dispatch(
            turn.execution, turn.config, messages, step,
            {eid: execution for eid, (execution, _) in conversations.items()},
        )  # fmt: skip
    if not calls:
        results = []
    elif ports.tools is None:
        results = [error_result(c, "no tool executor is configured") for c in calls]
    else:
        results = await ports.tools.call_tools(calls, turn.state.tools, budget=turn.budget)
    shrunk = await shrink_results(
        results,
        ports.config.mcp_servers,
        execution_id=turn.execution.execution_id,
        step=step,
        provider=ports.provider,
        config=turn.config.provider,
        context=investigation_context(turn.session),
        budget=turn.budget,
    )
    price = ports.config.price_for(turn.config.provider.model)
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


def investigation_context(session: Session, limit: int = 4000) -> str:
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


# ─── the verdict ──────────────────────────────────────────────────────────────


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
    """The strategy's verdict on the answer and the tool results.

    Pure: it reads the turn and returns a new outcome; no event or record it was
    given is changed (a noted event is a copy).
    """
    if call.result is None:
        assert call.error is not None
        return after_llm_failure(turn.execution, call.error.info)
    cut = finish.cut_short_error(call.result)
    if cut is not None:  # never a conclusion, never acted on: a failed attempt
        failed = after_llm_failure(turn.execution, cut)
        shown = finish.cut_short_event(call.result, cut, turn.state.iteration)
        # The retry is told why, and to be shorter.
        told = (
            finish.retry_messages(cut, turn.request.config.max_output_tokens)
            if failed.failed_attempt
            else []
        )
        return failed.model_copy(
            update={
                "timeline": [*failed.timeline, shown],
                "messages": [*failed.messages, *told],
            }
        )
    outcome = turn.strategy.on_result(turn.state, call.result, tools.results)
    timeline = noted_first([*outcome.timeline, *tools.summaries], setup_notes(turn))
    return outcome.model_copy(update={"timeline": timeline})


class SetupNotes(TypedDict, total=False):
    """Fields of the base timeline event that tell a watcher how the turn was set up."""

    unavailable_servers: dict[str, str]
    runbook_error: str


def setup_notes(turn: Turn) -> SetupNotes:
    """What the first event of a turn tells its watcher about the turn's setup.

    The MCP servers it goes without, and for the first agent, why it works
    without its runbook.
    """
    notes = SetupNotes()
    if turn.state.tools.unavailable:
        notes["unavailable_servers"] = dict(turn.state.tools.unavailable)
    if opens_the_investigation(turn.execution) and turn.session.runbook_error:
        notes["runbook_error"] = turn.session.runbook_error
    return notes


def noted_first(timeline: list[TimelineEvent], notes: SetupNotes) -> list[TimelineEvent]:
    """``timeline`` with ``notes`` set on a copy of its first event (every type carries them)."""
    if not timeline or not notes:
        return timeline
    return [timeline[0].model_copy(update=notes), *timeline[1:]]


def opens_the_investigation(execution: AgentExecution) -> bool:
    """Whether this is the first iteration of an agent of the first stage."""
    return execution.role == "agent" and execution.stage == 0 and execution.iteration == 0


def complete_waiting_turn(
    turn: Turn, pending: PendingTurn, answers: Mapping[str, SubAgentAnswer]
) -> IterationOutcome:
    """A turn that messaged sub-agents, completed with their answers as the tool results.

    The verdict is the strategy's on the whole turn; its timeline holds what the
    waiting step did not show yet (the answers). A call with no answer (past
    the deadline) gets an error observation.
    """
    timeout = turn.config.sub_agent_timeout_seconds
    results = sub_agents.turn_results(pending, answers, timeout)
    outcome = turn.strategy.on_result(turn.state, pending.result, results)
    _shown_before, answered = sub_agents.split_timeline(outcome.timeline, pending.dispatches)
    return outcome.model_copy(update={"timeline": answered})

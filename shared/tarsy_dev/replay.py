"""Replay: re-run a finished session's reasoning from its records through the current code.

``tarsy replay ID`` reads what every execution of a session wrote (a
:class:`~tarsy.persistence.recording.SessionRecording`) and runs each execution again,
step by step, the way :mod:`tarsy.engine.steps` runs it: the current strategy
builds the request (current prompts), a :class:`ReplayProvider` answers with
the model reply recorded for that step, the strategy picks the tool calls
(current parser), a :class:`ReplayToolExecutor` answers with the recorded
tool results, and :func:`tarsy.engine.iteration.decide` gives the strategy's verdict.
No model, no tool, no network: the same recording gives the same report.
What differs from the recording is reported: each step's request, messages,
timeline and tool calls, the steps that ran, and how the execution ended.

With a :class:`LiveModel` (``--model``) a real provider answers instead,
while the tools still answer from the recording: the same incident, another
prompt or model.

Openings follow the current prompts where a pure builder exists: an agent's
(:func:`tarsy.agent.prompts.initial_messages`, with the earlier stages' replayed
results as context) and the executive summary's
(:func:`tarsy.engine.progression.summary_opening`). An agent that began with a gather step
(evidence first) replays it first: the current collectors plan their calls,
the recorded tool results answer them, the current checks read them, and
the opening is rebuilt with the findings. A synthesis and a chat start from
their recorded openings (:mod:`tarsy.engine.chains` builds those inside the stage
handlers).

Nothing here writes anywhere: loading the recording is the only I/O, and it
happens before the replay (:func:`load_recording`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from google.cloud import firestore
from pydantic import AliasChoices, BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tarsy.agent.context import ExecutionRecord, format_stages
from tarsy.agent.prompts import initial_messages
from tarsy.agent.strategies.base import IterationOutcome
from tarsy.agent.strategies.registry import get_strategy
from tarsy.config.schema import LLMProviderConfig, ResolvedAgentConfig, TarsyConfig
from tarsy.engine import gathering, transitions
from tarsy.engine.iteration import (
    INTERACTION_TEXT_CHARS,
    Iteration,
    ModelCall,
    Ports,
    Turn,
    build_turn,
    complete_waiting_turn,
    request_record,
    run_iteration,
)
from tarsy.engine.messages import FIRST_ITERATION_STEP
from tarsy.engine.progression import stage_result_of, summary_opening
from tarsy.engine.roles import resolve_execution
from tarsy.engine.steps import execution_update
from tarsy.engine.sub_agents import PendingTurn, split_timeline, with_message_agent
from tarsy.errors import FailureKind, LLMError, ToolSelectionError
from tarsy.llm.base import (
    Budget,
    Capabilities,
    Chunk,
    CodeExecutionChunk,
    FinalChunk,
    GenerateRequest,
    LLMProvider,
    LLMResult,
    Progress,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolDefinition,
    UsageChunk,
)
from tarsy.llm.fallback import Candidate, FallbackProvider
from tarsy.llm.provider import StreamingProvider
from tarsy.llm.retry import call_with_retries
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    DetectionEvent,
    ErrorInfo,
    ExecutionStatus,
    FailedProvider,
    LLMInteraction,
    MCPInteraction,
    MCPToolCallEvent,
    MCPToolSummaryEvent,
    TimelineEvent,
    TokenUsage,
    ToolCall,
    utcnow,
)
from tarsy.persistence.chunking import cap_strings
from tarsy.persistence.recording import OPENING_STEP, RecordedExecution, SessionRecording
from tarsy.persistence.store import Store
from tarsy.tools.base import CachedToolList, ToolListing, ToolResult, error_result
from tarsy.tools.selection import restrict_listing
from tarsy.tools.summarize import SUMMARY_SYSTEM

# More steps than any execution can take (max_iterations, a conclusion, retried
# failures): a replay that gets here stops rather than loop.
MAX_REPLAY_STEPS = 500
# How an execution can end without its steps deciding it: the replay stops where
# the recording does and reports no difference for that.
_STOPPED_FROM_OUTSIDE = frozenset({ExecutionStatus.CANCELLED, ExecutionStatus.TIMED_OUT})
_OUTSIDE_ERROR_CODES = frozenset({"dead_letter", "configuration", "permanent", "deadline"})
# Of a string that differs, how much around the first difference a report shows.
EXCERPT_CHARS = 60


# ─── the report ───────────────────────────────────────────────────────────────

DifferenceKind = Literal[
    "opening", "request", "messages", "timeline", "tool_calls", "steps", "outcome"
]


class Difference(BaseModel):
    """One way a replayed execution differs from its recording."""

    step: int | None = Field(description="the step, or None for the execution as a whole")
    kind: DifferenceKind
    path: str = Field(default="", description="where inside, e.g. timeline[1].content")
    recorded: str | None = None
    replayed: str | None = None

    def describe(self) -> str:
        """One line: where, what was recorded, what the replay produced."""
        where = f"step {self.step} " if self.step is not None else ""
        target = self.path or self.kind
        return f"{where}{target}: recorded {self.recorded} → replayed {self.replayed}"


class ExecutionReplay(BaseModel):
    """The replay of one execution, against its recording."""

    execution_id: str
    role: str
    stage: int
    agent: str
    strategy: str
    opening: Literal["rebuilt", "recorded"]
    recorded_status: ExecutionStatus
    replayed_status: ExecutionStatus
    recorded_steps: int
    replayed_steps: int
    final_analysis: str | None = None
    differences: list[Difference] = Field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Whether nothing differs from the recording."""
        return not self.differences


class ReplayReport(BaseModel):
    """The replay of a session: one entry per execution, in the order they ran."""

    session_id: str
    mode: Literal["recorded", "model"]
    model: str | None = Field(default=None, description="the live model (--model), if any")
    executions: list[ExecutionReplay]
    skipped: dict[str, str] = Field(default_factory=dict, description="execution_id → why")

    @property
    def identical(self) -> bool:
        """Whether no execution differs from its recording."""
        return all(execution.identical for execution in self.executions)

    @property
    def difference_count(self) -> int:
        """How many differences in all."""
        return sum(len(execution.differences) for execution in self.executions)


# ─── the recorded model and tools ─────────────────────────────────────────────


def _failure_kind(error: ErrorInfo) -> FailureKind:
    """A failure kind that is retried exactly when the recorded error was retryable."""
    if error.code in ("timeout", "step_budget"):
        return "timeout"
    return "server" if error.retryable else "client"


class RecordedSummary(BaseModel):
    """A recorded call that summarized a large tool result: what it asked and answered."""

    messages: list[dict[str, Any]] | None = Field(
        default=None, description="the request's messages as recorded, if the call was recorded"
    )
    text: str
    thinking: str = ""
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    error: ErrorInfo | None = None


def recorded_summaries(recorded: RecordedExecution, step: int) -> list[RecordedSummary]:
    """A step's summarization calls: their interaction records, else their timeline events."""
    calls = recorded.summary_interactions.get(step, [])
    if calls:
        return [
            RecordedSummary(
                messages=call.request.get("messages"),
                text=call.response_text,
                thinking=call.thinking_text,
                tokens=call.tokens,
                error=call.error,
            )
            for call in calls
        ]
    return [
        RecordedSummary(text=event.content, tokens=TokenUsage(output_tokens=event.summary_tokens))
        for event in recorded.timeline.get(step, [])
        if isinstance(event, MCPToolSummaryEvent)
    ]


def _request_messages(request: GenerateRequest) -> list[dict[str, Any]]:
    """A request's messages as an interaction record keeps them (long strings capped)."""
    messages: list[dict[str, Any]] = cap_strings(
        [message.model_dump(mode="json") for message in request.messages], INTERACTION_TEXT_CHARS
    )
    return messages


class ReplayProvider(StreamingProvider):
    """Answers one step's requests with what was recorded for that step.

    The step's own call gets the recorded interaction (or its recorded error);
    a call that summarizes a large tool result (:mod:`tarsy.tools.summarize`) gets
    the recorded summary whose request asked the same, else the next one in
    order. What was not recorded is an error the strategy sees like any
    failed call. The summary requests asked are kept for comparison.
    """

    name = "replay"
    capabilities = Capabilities(
        streaming=True, thinking=True, function_calling=True, native_tools=True, code_execution=True
    )

    def __init__(
        self, step: int, reply: LLMInteraction | None, summaries: Sequence[RecordedSummary] = ()
    ) -> None:
        self._step = step
        self._reply = reply
        self._summaries = list(summaries)
        self.served = 0
        self.summary_requests: list[list[dict[str, Any]]] = []

    def attempt(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        """Stream the recorded answer to ``request`` (a summary, or the step's reply)."""
        if request.messages and request.messages[0].content == SUMMARY_SYSTEM:
            return self._summary(request)
        return self._main()

    async def _main(self) -> AsyncIterator[Chunk]:
        reply = self._reply
        if reply is None:
            raise LLMError(
                "client", f"no model reply was recorded for step {self._step}", code="replay_end"
            )
        self.served += 1
        if reply.error is not None:
            raise LLMError(_failure_kind(reply.error), reply.error.message, code=reply.error.code)
        if reply.thinking_text:
            yield ThinkingChunk(text=reply.thinking_text)
        if reply.response_text:
            yield TextChunk(text=reply.response_text)
        for call in reply.tool_calls:
            yield ToolCallChunk(call_id=call.id, name=call.name, arguments=call.arguments)
        for run in reply.code_executions:
            yield CodeExecutionChunk(code=run.code, outcome=run.outcome, output=run.output)
        yield UsageChunk(usage=reply.tokens)
        yield FinalChunk(metadata=reply.metadata)

    async def _summary(self, request: GenerateRequest) -> AsyncIterator[Chunk]:
        asked = _request_messages(request)
        self.summary_requests.append(asked)
        same = [s for s in self._summaries if s.messages == asked]
        if not (same or self._summaries):
            raise LLMError(
                "client", f"no tool-result summary was recorded for step {self._step}",
                code="replay_end",
            )  # fmt: skip
        summary = (same or self._summaries)[0]
        self._summaries.remove(summary)
        if summary.error is not None:
            raise LLMError(
                _failure_kind(summary.error), summary.error.message, code=summary.error.code
            )
        if summary.thinking:
            yield ThinkingChunk(text=summary.thinking)
        yield TextChunk(text=summary.text)
        yield UsageChunk(usage=summary.tokens)
        yield FinalChunk()

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        """One attempt, never retried: the recorded error is already the last one."""
        once = request.config.retry.model_copy(update={"max_retries": 0})
        return await call_with_retries(lambda: self.attempt(request), once, progress, budget=budget)


class FailedReplay:
    """A fallback candidate that fails again as it was recorded to fail."""

    name = "replay"
    capabilities = ReplayProvider.capabilities

    def __init__(self, failed: FailedProvider) -> None:
        self._failed = failed

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        """Raise the recorded failure."""
        error = self._failed.error
        raise LLMError(
            _failure_kind(error), error.message, code=error.code, attempts=self._failed.attempts
        )


class RecordedSubAgents:
    """The sub-agent conversations an execution had before a step, from the recording."""

    def __init__(self, recording: SessionRecording, parent: RecordedExecution) -> None:
        self._parent = parent
        self._conversations = [
            recorded.execution
            for recorded in recording.executions
            if recorded.execution.parent_execution_id == parent.execution.execution_id
        ]
        self.step = FIRST_ITERATION_STEP

    async def list_sub_agents(
        self, parent_execution_id: str
    ) -> dict[str, tuple[AgentExecution, datetime]]:
        """The conversations created before the current step's model call was recorded."""
        call = self._parent.llm_interactions.get(self.step)
        return {
            e.execution_id: (e, e.created_at)
            for e in self._conversations
            if call is None or e.created_at < call.created_at
        }


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class ReplayToolExecutor:
    """A :class:`~tarsy.tools.base.ToolExecutor` that answers from an execution's MCP records.

    A call gets the record of the current step with its call id, else the
    first unused record of that step with its tool and arguments (a live model
    names its calls anew); a call nothing was recorded for gets an error
    result. The listing is the one the recorded requests carried, else the
    cached tool lists of the recording.
    """

    def __init__(
        self,
        listing: ToolListing,
        records: dict[int, list[MCPInteraction]],
        unavailable: dict[int, dict[str, str]],
    ) -> None:
        self._listing = listing
        self._records = records
        self._unavailable = unavailable
        self._step = FIRST_ITERATION_STEP
        self._unused: list[MCPInteraction] = []
        self.unanswered: list[ToolCall] = []

    def at_step(self, step: int) -> None:
        """Serve the records of ``step`` from now on."""
        self._step = step
        self._unused = list(self._records.get(step, []))

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
    ) -> ToolListing:
        """The recorded listing of ``servers``, without those unavailable at this step.

        ``cached`` and ``budget`` are ignored: the listing comes with the recording.
        """
        down = {s: r for s, r in self._unavailable.get(self._step, {}).items() if s in servers}
        tools = [
            tool
            for tool in self._listing.tools
            if tool.name.split(".", 1)[0] in servers and tool.name.split(".", 1)[0] not in down
        ]
        return ToolListing(tools=tools, unavailable=down)

    async def call_tools(
        self, calls: Sequence[ToolCall], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        """The recorded result of every call, in call order."""
        results: list[ToolResult] = []
        for call in calls:
            record = self._take(call)
            if record is None:
                self.unanswered.append(call)
                results.append(error_result(call, "replay: no result was recorded for this call"))
                continue
            results.append(
                ToolResult(
                    call_id=call.id,
                    name=f"{record.server}.{record.tool}",
                    arguments=record.arguments,
                    content=record.result,
                    full_content=record.result,
                    is_error=record.is_error,
                    error=record.error,
                    duration_ms=record.duration_ms,
                    masked=record.masked,
                )
            )
        return results

    def _take(self, call: ToolCall) -> MCPInteraction | None:
        match = next((r for r in self._unused if r.call_id == call.id), None)
        if match is None:
            arguments = _arguments(call)
            match = next(
                (
                    r
                    for r in self._unused
                    if f"{r.server}.{r.tool}" == call.name and r.arguments == arguments
                ),
                None,
            )
        if match is not None:
            self._unused.remove(match)
        return match


def recorded_listing(
    recorded: RecordedExecution, config: ResolvedAgentConfig, tool_lists: dict[str, CachedToolList]
) -> ToolListing:
    """The tools the execution was offered: as its requests carried them, else as cached.

    Function-calling requests carry the tool definitions; a text strategy
    (ReAct) lists them in its prompt only, so they come from the MCP tool-list
    cache read with the recording, in the agent's server order.
    """
    for step in recorded.steps:
        carried = recorded.llm_interactions[step].request.get("tools") or []
        if carried:
            return ToolListing(tools=[ToolDefinition.model_validate(t) for t in carried])
    tools: list[ToolDefinition] = []
    for server in config.mcp_servers:
        if server in tool_lists:
            tools.extend(tool_lists[server].tools)
    try:  # the alert's tool allow-lists, as the step applied them
        return restrict_listing(ToolListing(tools=tools), config.mcp_tools)
    except ToolSelectionError:
        return ToolListing(tools=tools)  # the cache moved on since; the recording tells


def _unavailable_by_step(recorded: RecordedExecution) -> dict[int, dict[str, str]]:
    """Servers a step found unavailable, as its first timeline event noted them."""
    found: dict[int, dict[str, str]] = {}
    for step, events in recorded.timeline.items():
        noted = events[0].unavailable_servers if events else None
        if noted is not None:
            found[step] = dict(noted)
    return found


# ─── the live model (--model) ─────────────────────────────────────────────────


@dataclass(frozen=True)
class LiveModel:
    """Re-run the reasoning on a real provider; the tools still answer from the recording.

    Attributes:
        provider: The provider for an execution's (possibly overridden) config,
            e.g. ``lambda config: tarsy.llm.registry.get_provider(config, settings)``.
        model: A model name to use instead of the configured one, if any.
    """

    provider: Callable[[LLMProviderConfig], LLMProvider]
    model: str | None = None


# ─── comparing ────────────────────────────────────────────────────────────────


def _excerpts(recorded: str, replayed: str) -> tuple[str, str]:
    """Both strings around their first difference, quoted."""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)) if a != b),
        min(len(recorded), len(replayed)),
    )
    start = max(0, at - EXCERPT_CHARS // 3)

    def cut(text: str) -> str:
        piece = text[start : start + EXCERPT_CHARS]
        return (
            ("…" if start else "")
            + repr(piece)
            + ("…" if start + EXCERPT_CHARS < len(text) else "")
        )

    return cut(recorded), cut(replayed)


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def diff_values(recorded: Any, replayed: Any, path: str = "") -> list[tuple[str, str, str]]:
    """Where two JSON-like values differ: ``(path, recorded, replayed)`` per difference."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        found: list[tuple[str, str, str]] = []
        for key in sorted(set(recorded) | set(replayed), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded:
                found.append((where, "(absent)", _shown(replayed[key])))
            elif key not in replayed:
                found.append((where, _shown(recorded[key]), "(absent)"))
            else:
                found.extend(diff_values(recorded[key], replayed[key], where))
        return found
    if isinstance(recorded, list) and isinstance(replayed, list):
        found = []
        for index in range(max(len(recorded), len(replayed))):
            where = f"{path}[{index}]"
            if index >= len(recorded):
                found.append((where, "(absent)", _shown(replayed[index])))
            elif index >= len(replayed):
                found.append((where, _shown(recorded[index]), "(absent)"))
            else:
                found.extend(diff_values(recorded[index], replayed[index], where))
        return found
    if recorded == replayed:
        return []
    if isinstance(recorded, str) and isinstance(replayed, str):
        return [(path, *_excerpts(recorded, replayed))]
    return [(path, _shown(recorded), _shown(replayed))]


def _differences(
    step: int | None, kind: DifferenceKind, recorded: Any, replayed: Any, path: str
) -> list[Difference]:
    return [
        Difference(step=step, kind=kind, path=where, recorded=old, replayed=new)
        for where, old, new in diff_values(recorded, replayed, path)
    ]


def _events(events: Sequence[TimelineEvent]) -> list[dict[str, Any]]:
    """Timeline events as compared: everything but when they were written."""
    return [json.loads(event.model_dump_json(exclude={"created_at"})) for event in events]


def _messages(messages: Sequence[ConversationMessage]) -> list[dict[str, Any]]:
    return [message.model_dump(mode="json") for message in messages]


@dataclass
class Replayed:
    """An execution as its replay left it: its state and whole timeline (for later stages)."""

    execution: AgentExecution
    timeline: list[TimelineEvent] = field(default_factory=list)


@dataclass
class _StepResult:
    step: int
    request: dict[str, Any] | None  # None: the step that collects sub-agents' answers
    outcome: IterationOutcome
    calls: list[ToolResult]
    summary_requests: list[list[dict[str, Any]]] | None  # None: not known (a live model)


def previous_context(
    config: TarsyConfig, chain_id: str, before: int, replayed: Sequence[Replayed]
) -> str:
    """The earlier stages' results, as :func:`tarsy.engine.chains.previous_context` gives them."""
    chain = config.chain(chain_id)
    stages: list[tuple[str, list[ExecutionRecord]]] = []
    for index in range(before):
        in_stage = {r.execution.execution_id: r for r in replayed if r.execution.stage == index}
        chosen = stage_result_of([r.execution for r in in_stage.values()])
        records = [
            ExecutionRecord(execution=e, timeline=in_stage[e.execution_id].timeline) for e in chosen
        ]
        stages.append((chain.stages[index].name, records))
    return format_stages(stages)


def _last_stage_result(replayed: Sequence[Replayed]) -> str:
    """The analysis the executive summary is given: the last stage's (synthesis, else agent)."""
    staged = [r for r in replayed if r.execution.stage >= 0]
    if not staged:
        return ""
    last = max(r.execution.stage for r in staged)
    chosen = stage_result_of([r.execution for r in staged if r.execution.stage == last])
    return chosen[-1].final_analysis or "" if chosen else ""


def _opening(
    recording: SessionRecording,
    recorded: RecordedExecution,
    config: TarsyConfig,
    resolved: ResolvedAgentConfig,
    replayed: Sequence[Replayed],
) -> tuple[list[ConversationMessage], Literal["rebuilt", "recorded"]]:
    session, execution = recording.session, recorded.execution
    if execution.role == "agent":
        context = previous_context(config, session.chain_id, execution.stage, replayed)
        return initial_messages(resolved, session, context), "rebuilt"
    if execution.role == "summary":
        _, opening = summary_opening(config, session, _last_stage_result(replayed), utcnow())
        return opening, "rebuilt"
    return list(recorded.opening), "recorded"


def _apply(execution: AgentExecution, outcome: IterationOutcome, steps: int = 1) -> AgentExecution:
    """The execution after a turn's update (:func:`tarsy.engine.steps.execution_update`)."""
    update = execution_update(execution, outcome, utcnow(), None)
    fields = {name: getattr(update, name) for name in update.written() - {"release_lease"}}
    return execution.model_copy(update={**fields, "step": execution.step + steps})


def _stopped_from_outside(execution: AgentExecution) -> bool:
    """Whether the recorded execution was ended by a cancel, a deadline or a dead letter."""
    if execution.status in _STOPPED_FROM_OUTSIDE:
        return True
    return execution.error is not None and execution.error.code in _OUTSIDE_ERROR_CODES


class SessionSpend:
    """The session's committed spend (tokens, USD) a step saw, for the chain's budget check.

    :func:`tarsy.engine.iteration.build_turn` makes a call the conclusion call once the
    session's spend has crossed the budget. A recorded step saw what every call
    recorded before it had cost (ordered by the records' ``created_at``; for
    agents running in parallel this approximates the commit order). A step
    that was not recorded (a live model) sees what the replay has spent so far.
    """

    def __init__(self, recording: SessionRecording, *, live: bool) -> None:
        self._live = live
        self._calls = [
            (call.created_at, call.tokens.total_tokens, call.cost)
            for recorded in recording.executions
            for call in [
                *recorded.llm_interactions.values(),
                *(c for calls in recorded.summary_interactions.values() for c in calls),
            ]
        ]
        self.tokens = 0
        self.cost = 0  # nano-dollars

    def before(self, recorded: LLMInteraction | None) -> tuple[int, int]:
        """The spend the step whose own call is ``recorded`` saw."""
        if self._live or recorded is None:
            return self.tokens, self.cost
        earlier = [(tokens, cost) for at, tokens, cost in self._calls if at < recorded.created_at]
        return sum(t for t, _ in earlier), sum(c for _, c in earlier)

    def add(self, usage: TokenUsage, cost: int) -> None:
        """Count what a replayed step spent."""
        self.tokens += usage.total_tokens
        self.cost += cost


class _ExecutionReplayer:
    """Drives one execution's strategy over its recording, step by step, as steps.iterate does."""

    def __init__(
        self,
        recording: SessionRecording,
        recorded: RecordedExecution,
        config: TarsyConfig,
        live: LiveModel | None,
        spend: SessionSpend,
    ) -> None:
        self.recording = recording
        self.recorded = recorded
        self.config = config
        self.live = live
        self.spend = spend
        session, execution = recording.session, recorded.execution
        resolved = resolve_execution(config, session, execution)
        if live is not None and live.model is not None:
            provider = resolved.provider.model_copy(update={"model": live.model})
            resolved = resolved.model_copy(update={"provider": provider})
        self.resolved = resolved
        self.strategy = get_strategy(execution.strategy)
        self.tools = ReplayToolExecutor(
            recorded_listing(recorded, resolved, recording.tool_lists),
            recorded.mcp_interactions,
            _unavailable_by_step(recorded),
        )
        self.sub_agents = RecordedSubAgents(recording, recorded)

    def _provider(self, step: int) -> tuple[LLMProvider, ReplayProvider | None]:
        """The step's provider: live, or the recorded reply behind its recorded fallbacks."""
        if self.live is not None:
            return self.live.provider(self.resolved.provider), None
        reply = self.recorded.llm_interactions.get(step)
        answering = ReplayProvider(step, reply, recorded_summaries(self.recorded, step))
        failed = reply.failed_providers if reply is not None else []
        if not failed:
            return answering, answering
        candidates = [
            Candidate(f.provider, self._provider_config(f.provider), FailedReplay(f))
            for f in failed
        ]
        assert reply is not None
        name = reply.provider_name or self.resolved.provider_name
        candidates.append(Candidate(name, self._provider_config(name), answering))
        return FallbackProvider(candidates, get_args(FailureKind)), answering

    def _provider_config(self, name: str) -> LLMProviderConfig:
        return self.config.llm_providers.get(name, self.resolved.provider)

    async def _step(
        self,
        step: int,
        execution: AgentExecution,
        messages: list[ConversationMessage],
        provider_state: dict[str, str],
    ) -> tuple[list[_StepResult], ModelCall, IterationOutcome]:
        """One iteration through the engine's core, on the recorded model and tools.

        A turn that messaged sub-agents is two steps in the engine (the waiting
        one shows the turn so far; the next collects the answers, with no model
        call): two step results here, and the outcome of the whole turn.
        """
        self.tools.at_step(step)
        self.sub_agents.step = step
        listing = ToolListing()
        if self.strategy.uses_tools and self.resolved.mcp_servers:
            listing = await self.tools.list_tools(self.resolved.mcp_servers)
        if self.strategy.uses_tools:
            listing = with_message_agent(listing, execution, self.resolved, self.config.agents)
        # The session's spend as it stood before this step: a spent budget concludes.
        tokens, cost = self.spend.before(self.recorded.llm_interactions.get(step))
        session = self.recording.session.model_copy(
            update={"tokens": TokenUsage(total_tokens=tokens), "cost": cost}
        )
        turn = build_turn(
            execution, session, self.resolved, self.strategy, messages, provider_state,
            listing, math.inf,
        )  # fmt: skip
        provider, recorded = self._provider(step)
        ports = Ports(
            provider=provider, tools=self.tools, sub_agents=self.sub_agents, config=self.config
        )
        done = await run_iteration(turn, step, ports)
        self.spend.add(
            done.call.interaction.tokens + done.tools.usage,
            done.call.interaction.cost + sum(i.cost for i in done.tools.interactions),
        )
        asked = recorded.summary_requests if recorded is not None else None
        if not (done.tools.dispatches and done.call.result is not None):
            result = _StepResult(
                step, request_record(turn.request), done.outcome, done.tools.results, asked
            )
            return [result], done.call, done.outcome
        shown, answered = self._with_answers(turn, step, done)
        waiting = _StepResult(step, request_record(turn.request), shown, done.tools.results, asked)
        collecting = _StepResult(step + 1, None, answered, [], None)
        return [waiting, collecting], done.call, answered

    def _with_answers(
        self, turn: Turn, step: int, done: Iteration
    ) -> tuple[IterationOutcome, IterationOutcome]:
        """What the waiting step showed, and the turn completed with its recorded answers."""
        assert done.call.result is not None
        pending = PendingTurn(
            step=step,
            result=done.call.result,
            tool_results=done.tools.results,
            dispatches=done.tools.dispatches,
        )
        shown, _ = split_timeline(done.outcome.timeline, done.tools.dispatches)
        answered = complete_waiting_turn(
            turn, pending, self.recorded.sub_agent_answers.get(step, {})
        )
        return IterationOutcome(next="continue", timeline=shown), answered

    def _gathered(self) -> bool:
        """Whether the recorded execution began with a gather step (evidence first)."""
        events = self.recorded.timeline.get(FIRST_ITERATION_STEP, [])
        return any(
            isinstance(e, DetectionEvent) or (isinstance(e, MCPToolCallEvent) and e.gathered)
            for e in events
        )

    async def _gather(
        self, replayed: Sequence[Replayed]
    ) -> tuple[_StepResult, list[ConversationMessage]]:
        """Run the gather step on the recorded tool results, with the current collectors.

        The current catalog plans the calls and the current checks read them, so
        a changed collector or detection shows as a difference of step 1.
        """
        session = self.recording.session
        self.tools.at_step(FIRST_ITERATION_STEP)
        listing = await self.tools.list_tools(self.resolved.mcp_servers)
        gathered = await gathering.gather_evidence(
            self.config, self.resolved, session, self.tools, listing
        )
        execution = self.recorded.execution
        context = previous_context(self.config, session.chain_id, execution.stage, replayed)
        opening = gathering.opening_with_evidence(
            self.config, self.resolved, session, context, gathered
        ).messages
        outcome = IterationOutcome(next="continue", timeline=gathering.gathered_events(gathered))
        calls = [c.result for c in gathered.calls]
        return _StepResult(FIRST_ITERATION_STEP, None, outcome, calls, None), opening

    async def run(self, replayed: Sequence[Replayed]) -> tuple[ExecutionReplay, Replayed]:
        """Replay every step; compare each with its recording."""
        recorded, recording = self.recorded, self.recording
        opening, how = _opening(recording, recorded, self.config, self.resolved, replayed)
        results: list[_StepResult] = []
        first_step = FIRST_ITERATION_STEP
        if self._gathered() and how == "rebuilt":
            gather_result, with_evidence = await self._gather(replayed)
            results.append(gather_result)
            opening = with_evidence or opening
            first_step += 1
        differences: list[Difference] = []
        if how == "rebuilt":
            differences += _differences(
                OPENING_STEP, "opening", _messages(recorded.opening), _messages(opening), "messages"
            )
        execution = recorded.execution.model_copy(
            update={
                "status": ExecutionStatus.ACTIVE,
                "step": first_step,
                "iteration": 0,
                "consecutive_failures": 0,
                "max_iterations": self.resolved.max_iterations,
                "final_analysis": None,
                "error": None,
                "completed_at": None,
            }
        )
        messages = list(opening)
        timeline = list(recorded.timeline.get(OPENING_STEP, []))
        timeline += [event for result in results for event in result.outcome.timeline]
        provider_state: dict[str, str] = {}
        last_recorded = max(recorded.steps, default=OPENING_STEP)
        stopped_at_recording_end = False
        while execution.step <= MAX_REPLAY_STEPS:
            step = execution.step
            if (
                self.live is None
                and step > last_recorded
                and _stopped_from_outside(recorded.execution)
            ):
                stopped_at_recording_end = True  # the recording ends where it was stopped
                break
            step_results, call, outcome = await self._step(
                step, execution, messages, provider_state
            )
            results += step_results
            if call.result is not None:
                provider_state.update(call.result.provider_state)
            for result in step_results:
                messages += result.outcome.messages
                timeline += result.outcome.timeline
            execution = _apply(execution, outcome, steps=len(step_results))
            follow_up = recorded.follow_ups.get(execution.step)
            if outcome.next == "complete" and follow_up is not None:
                # Messaged again by its parent: the conversation goes on (a sub-agent).
                messages.append(follow_up.message)
                timeline += follow_up.events
                reopened = transitions.reopen_sub_agent(
                    execution, follow_up.call_id, execution.parent_step or 0,
                    self.resolved.max_iterations, utcnow(),
                )  # fmt: skip
                fields = {n: getattr(reopened, n) for n in ("status", "max_iterations")}
                execution = execution.model_copy(update={**fields, "final_analysis": None})
                continue
            if outcome.next == "pause" and step < last_recorded:
                # Resumed in the recording: continue with the iterations it was given.
                extra = recorded.execution.max_iterations - execution.max_iterations
                if extra > 0:
                    resumed = transitions.resume_execution(execution, extra, utcnow())
                    execution = execution.model_copy(
                        update={
                            "status": resumed.status,
                            "max_iterations": resumed.max_iterations,
                            "error": None,
                        }
                    )
                    continue
            if outcome.next != "continue":
                break
        differences += self._compare_steps(results)
        replayed_status = execution.status
        if stopped_at_recording_end:
            replayed_status = recorded.execution.status
        elif not execution.status.is_terminal and execution.status is not ExecutionStatus.PAUSED:
            replayed_status = ExecutionStatus.FAILED  # ran out of steps
        differences += _differences(
            None, "outcome", recorded.execution.status.value, replayed_status.value, "status"
        )
        if not stopped_at_recording_end:
            differences += _differences(
                None,
                "outcome",
                recorded.execution.final_analysis,
                execution.final_analysis,
                "final_analysis",
            )
        report = ExecutionReplay(
            execution_id=recorded.execution.execution_id,
            role=recorded.execution.role,
            stage=recorded.execution.stage,
            agent=recorded.execution.agent,
            strategy=recorded.execution.strategy,
            opening=how,
            recorded_status=recorded.execution.status,
            replayed_status=replayed_status,
            recorded_steps=len(recorded.steps),
            # Like recorded_steps, the steps after the gather step (which calls no model).
            replayed_steps=len(results) - (first_step - FIRST_ITERATION_STEP),
            final_analysis=execution.final_analysis,
            differences=differences,
        )
        return report, Replayed(execution=execution, timeline=timeline)

    def _compare_steps(self, results: Sequence[_StepResult]) -> list[Difference]:
        recorded = self.recorded
        differences: list[Difference] = []
        for result in results:
            step = result.step
            interaction = recorded.llm_interactions.get(step)
            if result.request is None and interaction is None:  # collected sub-agent answers
                differences += self._compare_records(result)
                continue
            if interaction is None or result.request is None:
                differences.append(
                    Difference(step=step, kind="steps", recorded="(no such step)", replayed="ran")
                )
                continue
            differences += _differences(
                step, "request", interaction.request, result.request, "request"
            )
            differences += self._compare_records(result)
            recorded_asks = [
                c.request.get("messages") for c in recorded.summary_interactions.get(step, [])
            ]
            if result.summary_requests is not None and recorded_asks:
                differences += _differences(
                    step, "request", recorded_asks, result.summary_requests, "summary_requests"
                )
            differences += _differences(
                step,
                "tool_calls",
                [_call_key(r.call_id, f"{r.server}.{r.tool}", r.arguments)
                 for r in recorded.mcp_interactions.get(step, [])],
                [_call_key(r.call_id, r.name, r.arguments) for r in result.calls],
                "tool_calls",
            )  # fmt: skip
        ran = {result.step for result in results}
        for step in recorded.steps:
            if step not in ran:
                differences.append(
                    Difference(step=step, kind="steps", recorded="ran", replayed="(not reached)")
                )
        return differences

    def _compare_records(self, result: _StepResult) -> list[Difference]:
        """A step's messages and timeline against the recorded ones."""
        step, recorded = result.step, self.recorded
        return [
            *_differences(
                step, "messages", _messages(recorded.messages.get(step, [])),
                _messages(result.outcome.messages), "messages",
            ),
            *_differences(
                step, "timeline", _events(recorded.timeline.get(step, [])),
                _events(result.outcome.timeline), "timeline",
            ),
        ]  # fmt: skip


def _call_key(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"call_id": call_id, "tool": name, "arguments": arguments}


# ─── replaying a session ──────────────────────────────────────────────────────


def _why_skipped(recorded: RecordedExecution) -> str | None:
    if not recorded.steps:
        return "no step ran"
    status = recorded.execution.status
    if not status.is_terminal and status is not ExecutionStatus.PAUSED:
        return f"still {status.value}"
    return None


async def replay(
    recording: SessionRecording, config: TarsyConfig, live: LiveModel | None = None
) -> ReplayReport:
    """Replay every execution of a recorded session through the current code.

    Args:
        recording: The session's records (:func:`load_recording`).
        config: The configuration to resolve agents, prompts and strategies with.
        live: Answer with a real model instead of the recorded replies.

    Returns:
        What differs from the recording, execution by execution.
    """
    report = ReplayReport(
        session_id=recording.session.session_id,
        mode="recorded" if live is None else "model",
        model=None if live is None else live.model,
        executions=[],
    )
    replayed: list[Replayed] = []
    spend = SessionSpend(recording, live=live is not None)

    # The stages in order, then the summary, then what follows it (chats, scoring...):
    # each may read what came before.
    def position(recorded: RecordedExecution) -> tuple[int, int]:
        execution = recorded.execution
        if execution.stage >= 0:
            return 0, execution.stage
        return (1 if execution.role == "summary" else 2), 0

    order = sorted(recording.executions, key=position)
    for recorded in order:
        reason = _why_skipped(recorded)
        if reason is not None:
            report.skipped[recorded.execution.execution_id] = reason
            replayed.append(Replayed(execution=recorded.execution, timeline=recorded.events))
            continue
        replayer = _ExecutionReplayer(recording, recorded, config, live, spend)
        result, state = await replayer.run(replayed)
        report.executions.append(result)
        replayed.append(state)
    return report


# ─── reading the recording ────────────────────────────────────────────────────


class RecordingSource(BaseSettings):
    """Where ``tarsy replay`` reads a session: the environment, else ``.local/stack.env``."""

    model_config = SettingsConfigDict(
        env_file=".local/stack.env", extra="ignore", frozen=True, populate_by_name=True
    )

    project_id: str = Field(
        default="tarsy-local", validation_alias=AliasChoices("GOOGLE_CLOUD_PROJECT", "GCP_PROJECT")
    )
    firestore_database: str = Field(
        default="(default)", validation_alias="TARSY_FIRESTORE_DATABASE"
    )
    firestore_emulator_host: str | None = Field(
        default=None, validation_alias="FIRESTORE_EMULATOR_HOST"
    )

    def store(self) -> Store:
        """A store on this project's Firestore (the emulator when a host is given)."""
        if self.firestore_emulator_host and "FIRESTORE_EMULATOR_HOST" not in os.environ:
            # The client library finds the emulator only through its environment.
            os.environ["FIRESTORE_EMULATOR_HOST"] = self.firestore_emulator_host
        client = firestore.AsyncClient(project=self.project_id, database=self.firestore_database)
        return Store(client)


async def load_recording(store: Store, session_id: str, config: TarsyConfig) -> SessionRecording:
    """Read a finished session's records (the only I/O of a replay).

    Args:
        store: Where the session is.
        session_id: The session.
        config: Names the MCP servers whose cached tool lists come with the recording.

    Returns:
        The recording.

    Raises:
        LookupError: There is no such session, or it is still running.
    """
    recording = await store.load_recording(session_id, list(config.mcp_servers))
    if recording is None:
        raise LookupError(f"no session {session_id!r}")
    status = recording.session.status
    if not status.is_terminal and status is not ExecutionStatus.PAUSED:
        raise LookupError(f"session {session_id} is {status.value}; replay a finished session")
    return recording

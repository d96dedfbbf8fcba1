"""The controller interface: one iteration as a pure function.

The step function (the I/O shell) loads state from Firestore, asks the strategy
for the LLM request, makes the call, and hands the result back to the strategy,
which decides what to record and what happens next. Strategies do no I/O.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import ResolvedAgentConfig
from tarsy.llm.base import Capabilities, CodeExecutionChunk, GenerateRequest, LLMResult
from tarsy.models import (
    AgentExecution,
    CodeExecution,
    ConversationMessage,
    ErrorInfo,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    TimelineEvent,
    ToolCall,
    TurnNotes,
)
from tarsy.tools.base import ToolListing, ToolResult

NextAction = Literal["continue", "complete", "fail", "pause"]
# Why a call is a conclusion call (no tools, tool_choice "none", a final answer forced).
ConclusionReason = Literal["max_iterations", "loop_detected", "budget"]


class IterationState(DeferredModel):
    """What an iteration knows: the execution, its config and its conversation so far."""

    execution: AgentExecution
    config: ResolvedAgentConfig
    messages: list[ConversationMessage]
    provider_state: dict[str, str] = Field(default_factory=dict)
    tools: ToolListing = Field(default_factory=ToolListing)
    # Set when the session's spend has crossed its budget: what was crossed.
    budget_note: str | None = None

    @property
    def iteration(self) -> int:
        """The number of this iteration (1-based)."""
        return self.execution.iteration + 1

    @property
    def is_conclusion(self) -> bool:
        """Whether this is the extra, tool-less call after ``max_iterations`` (conclude mode)."""
        return self.iteration > self.execution.max_iterations

    @property
    def at_limit(self) -> bool:
        """Whether this iteration used the last of ``max_iterations``."""
        return self.iteration >= self.execution.max_iterations

    @property
    def loop_threshold(self) -> int:
        """Identical tool calls (same tool, same arguments) that make a loop; 0: no detection."""
        return self.config.loop_detection_threshold


class IterationOutcome(DeferredModel):
    """What an iteration produced and what happens next."""

    messages: list[ConversationMessage] = Field(default_factory=list)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    next: NextAction
    final_analysis: str | None = None
    error: ErrorInfo | None = None
    # True when the LLM call failed and the same iteration is tried again next step.
    failed_attempt: bool = False


class Strategy(Protocol):
    """An iteration strategy (controller): pure functions around one LLM call.

    The step function calls, in order: ``build_request`` → the LLM →
    ``tool_calls`` → the tool executor (all calls at once) → ``on_result``.
    """

    name: str
    requires: Capabilities
    uses_tools: bool

    def build_request(self, state: IterationState) -> GenerateRequest:
        """Return the LLM request of this iteration."""
        ...

    def tool_calls(self, state: IterationState, result: LLMResult) -> list[ToolCall]:
        """The tool calls the model asked for (the shell runs them before ``on_result``)."""
        ...

    def on_result(
        self, state: IterationState, result: LLMResult, tool_results: list[ToolResult]
    ) -> IterationOutcome:
        """Turn the model's answer and the tool results into records and the next action."""
        ...


def missing_capabilities(required: Capabilities, offered: Capabilities) -> list[str]:
    """Return the names of capabilities ``required`` asks for that ``offered`` lacks."""
    return [
        name
        for name, wanted in required.model_dump().items()
        if wanted is True and not getattr(offered, name)
    ]


def turn_notes(state: IterationState, result: LLMResult) -> TurnNotes:
    """An iteration's first notes: its number, and the provider metadata a watcher should see.

    Seed 000: a suppressed native tool is noted where the response appears.
    """
    notes = TurnNotes(iteration=state.iteration)
    suppressed = result.metadata.get("native_tools_suppressed")
    if suppressed:
        notes["native_tools_suppressed"] = [str(name) for name in suppressed]
    return notes


# ─── tool_choice and the conclusion call ──────────────────────────────────────

FIXED_CHOICES = ("auto", "required", "none")


def conclusion_reason(
    state: IterationState, history: Sequence[ToolCall]
) -> ConclusionReason | None:
    """Why this iteration must be a tool-less conclusion call, or None if it may use tools.

    After ``max_iterations`` (``on_max_iterations: conclude``), once a second
    loop was detected in the execution (the first one only got a warning), and
    once the session's budget is spent (:func:`budget_crossed`).
    """
    if state.budget_note is not None:
        return "budget"
    if state.is_conclusion:
        return "max_iterations"
    if state.loop_threshold and len(looped_in(history, state.loop_threshold, state.tools)) >= 2:
        return "loop_detected"
    return None


def tool_choice_for(state: IterationState, reason: ConclusionReason | None) -> str:
    """The ``tool_choice`` of this iteration's call: "none" to conclude, else the agent's.

    A named function that is not among the listed tools (its server is down, or
    a stage gave the agent other servers) falls back to "auto".
    """
    if reason is not None:
        return "none"
    choice = state.config.tool_choice
    if choice not in FIXED_CHOICES and choice not in state.tools.names:
        return "auto"
    return choice


class Budget(Protocol):
    """A session's limits: an agent's resolved config or a chain's budget carry them."""

    @property
    def max_tokens(self) -> int | None:
        """Tokens the session may use (None: unlimited)."""
        ...

    @property
    def max_cost_usd(self) -> float | None:
        """USD the session may spend (None: unlimited)."""
        ...


def budget_crossed(tokens: int, cost: float, config: Budget) -> str | None:
    """What the session's spend has crossed of its budget (tokens or USD), or None."""
    if config.max_tokens is not None and tokens >= config.max_tokens:
        return f"the session used {tokens:,} tokens of its {config.max_tokens:,}-token budget"
    if config.max_cost_usd is not None and cost >= config.max_cost_usd:
        return f"the session spent ${cost:.4f} of its ${config.max_cost_usd:g} budget"
    return None


# ─── loop detection ───────────────────────────────────────────────────────────


def effective_arguments(call: ToolCall, tools: ToolListing | None = None) -> dict[str, Any] | None:
    """The call's arguments with its tool's schema defaults filled in (None: not a JSON object).

    ``{"previous": false}`` and an omitted ``previous`` whose default is false
    are the same call: the tool does the same thing for both.
    """
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    tool = tools.get(call.name) if tools is not None else None
    properties = tool.parameters.get("properties") if tool is not None else None
    if isinstance(properties, dict):
        for name, schema in properties.items():
            if isinstance(schema, dict) and "default" in schema and name not in arguments:
                arguments[name] = schema["default"]
    return arguments


def call_key(call: ToolCall, tools: ToolListing | None = None) -> tuple[str, str]:
    """What makes two calls the same: the tool and its effective arguments, key order ignored."""
    arguments = effective_arguments(call, tools)
    if arguments is None:
        return call.name, call.arguments.strip()
    return call.name, json.dumps(arguments, sort_keys=True)


def looped_in(
    history: Sequence[ToolCall], threshold: int, tools: ToolListing | None = None
) -> list[int]:
    """Positions in ``history`` of calls made for the ``threshold``-th time or later."""
    seen: Counter[tuple[str, str]] = Counter()
    looped: list[int] = []
    for n, call in enumerate(history):
        key = call_key(call, tools)
        seen[key] += 1
        if threshold and seen[key] >= threshold:
            looped.append(n)
    return looped


class LoopHit(DeferredModel):
    """A call of this turn that is not run because it repeats an earlier one."""

    repeats: int = Field(description="how many times this call has now been made")
    final: bool = Field(description="a second loop: the next call must conclude")
    observation: str


def loop_warning(name: str, repeats: int) -> str:
    """The observation of the first looping call (it is not run)."""
    return (
        f"Not run: {name} was already called {repeats - 1} times with these same arguments "
        "in this investigation, and its result is in the conversation above. Calling it again "
        "gives no new evidence: use another tool or other arguments, or give your final analysis."
    )


def loop_stop(name: str, repeats: int) -> str:
    """The observation of a looping call after the warning (it is not run)."""
    return (
        f"Not run: {name} with these same arguments again ({repeats} times). The investigation "
        "is going in circles: your next answer must be your final analysis, without tools."
    )


def detect_loops(
    state: IterationState, history: Sequence[ToolCall], calls: Sequence[ToolCall]
) -> dict[str, LoopHit]:
    """The calls of this turn that loop, by call id (pure; empty when detection is off).

    A call loops when it makes ``loop_threshold`` identical calls in the
    execution. The first loop of an execution gets a warning observation;
    from the second on, the observation says to conclude and the next call is
    a conclusion call (:func:`conclusion_reason`). Looping calls are never run.
    """
    threshold = state.loop_threshold
    if not threshold:
        return {}
    seen = Counter(call_key(call, state.tools) for call in history)
    earlier = len(looped_in(history, threshold, state.tools))
    hits: dict[str, LoopHit] = {}
    for call in calls:
        key = call_key(call, state.tools)
        seen[key] += 1
        if seen[key] < threshold:
            continue
        earlier += 1
        final = earlier >= 2
        observation = (loop_stop if final else loop_warning)(call.name, seen[key])
        hits[call.id] = LoopHit(repeats=seen[key], final=final, observation=observation)
    return hits


# ─── timeline events ──────────────────────────────────────────────────────────


def tool_identity(name: str) -> tuple[str, str]:
    """``(server_name, tool_name)`` of a canonical ``server.tool`` name (seed 003)."""
    server, _, tool = name.rpartition(".")
    return server, tool


def tool_events(
    calls: Sequence[ToolCall],
    results: Sequence[ToolResult],
    loops: Mapping[str, LoopHit] | None = None,
) -> list[TimelineEvent]:
    """``llm_tool_call`` and ``mcp_tool_call`` events for an iteration's calls, call by call.

    A looping call (not run) has its ``llm_tool_call`` only, marked
    ``loop_detected`` with the observation the model was given instead.
    """
    events: list[TimelineEvent] = []
    by_id = {r.call_id: r for r in results}
    for call in calls:
        server, tool = tool_identity(call.name)
        hit = (loops or {}).get(call.id)
        events.append(
            LLMToolCallEvent(
                content=f"{call.name} {call.arguments}",
                call_id=call.id,
                tool_name=tool,
                server_name=server,
                arguments=call.arguments,
                loop_detected=None if hit is None else True,
                repeats=None if hit is None else hit.repeats,
                observation=None if hit is None else hit.observation,
            )
        )
        result = by_id.get(call.id)
        if result is None:
            continue
        events.append(
            MCPToolCallEvent(
                content=result.content,
                call_id=call.id,
                tool_name=result.tool,
                server_name=result.server,
                arguments=result.arguments,
                is_error=result.is_error,
                duration_ms=round(result.duration_ms, 1),
                shown_as=result.shown_as,
            )
        )
    return events


def thinking_events(
    text: str, notes: TurnNotes, source: Literal["native", "react"]
) -> list[TimelineEvent]:
    """An ``llm_thinking`` event (``source`` native or react), if there was thinking."""
    if not text:
        return []
    return [LLMThinkingEvent(content=text, source=source, **notes)]


def render_code_executions(executions: Sequence[CodeExecutionChunk]) -> str:
    """Code the model ran in its sandbox and what came of it, as Markdown."""
    parts: list[str] = []
    for execution in executions:
        if execution.code:
            parts.append(f"```python\n{execution.code.rstrip()}\n```")
        if execution.outcome or execution.output:
            outcome = f" ({execution.outcome})" if execution.outcome else ""
            parts.append(f"Output{outcome}:\n```\n{execution.output.rstrip()}\n```")
    return "\n\n".join(parts)


def code_execution_events(result: LLMResult, notes: TurnNotes) -> list[TimelineEvent]:
    """Gemini's code-execution parts as one ``llm_response`` (``source: code_execution``).

    The code and its output are shown as the event's content; the records are
    in ``code_executions`` and on the LLM interaction record.
    """
    if not result.code_executions:
        return []
    records = [
        CodeExecution.model_validate(c.model_dump(exclude={"type"})) for c in result.code_executions
    ]
    return [
        LLMResponseEvent(
            content=render_code_executions(result.code_executions),
            source="code_execution",
            code_executions=records,
            **notes,
        )
    ]


# ─── outcomes ─────────────────────────────────────────────────────────────────


def conclude(
    state: IterationState,
    answer: str,
    analysis: str,
    timeline: list[TimelineEvent],
    notes: TurnNotes,
) -> IterationOutcome:
    """Complete the execution: ``answer`` joins the conversation, ``analysis`` is the result."""
    timeline.append(FinalAnalysisEvent(content=analysis, agent=state.config.agent, **notes))
    return IterationOutcome(
        messages=[ConversationMessage(role="assistant", content=answer)],
        timeline=timeline,
        next="complete",
        final_analysis=analysis,
    )


def force_conclusion(
    state: IterationState,
    reason: ConclusionReason,
    answer: str,
    analysis: str,
    timeline: list[TimelineEvent],
    notes: TurnNotes,
) -> IterationOutcome:
    """End a conclusion call: its answer is the final analysis, whatever else it asked for.

    Tool calls in a conclusion call are never run. Only a conclusion call that
    gave no text at all fails the execution (``code`` is the reason). An
    analysis cut short by the budget says so first.
    """
    notes = notes.copy()
    notes["forced_conclusion"] = reason
    if analysis.strip() and reason == "budget":
        analysis = f"_(Cut short: {state.budget_note}.)_\n\n{analysis.strip()}"
    if analysis.strip():
        return conclude(state, answer, analysis.strip(), timeline, notes)
    what = {
        "max_iterations": f"max_iterations ({state.execution.max_iterations})",
        "loop_detected": "a tool-call loop",
        "budget": "the session's budget was spent",
    }[reason]
    return IterationOutcome(
        messages=[ConversationMessage(role="assistant", content=answer)] if answer else [],
        timeline=timeline,
        next="fail",
        error=ErrorInfo(
            message=f"no final answer after {what} and a conclusion call",
            code=reason,
            retryable=False,
        ),
    )


def continue_or_stop(
    state: IterationState, messages: list[ConversationMessage], timeline: list[TimelineEvent]
) -> IterationOutcome:
    """After a tool iteration: go on, or apply ``on_max_iterations`` at the limit (seed 003).

    ``conclude`` grants one more call, without tools, for the final answer (a
    strategy ends it with :func:`force_conclusion`); ``pause`` stops with status
    paused until ``POST /sessions/{id}/resume``.
    """
    limit = state.execution.max_iterations
    if state.at_limit and state.config.on_max_iterations == "pause":
        return IterationOutcome(
            messages=messages,
            timeline=timeline,
            next="pause",
            error=ErrorInfo(
                message=f"paused at max_iterations ({limit}); resume to continue",
                code="max_iterations",
                retryable=True,
            ),
        )
    return IterationOutcome(messages=messages, timeline=timeline, next="continue")

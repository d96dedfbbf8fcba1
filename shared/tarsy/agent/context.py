"""How a finished stage's results reach the next stage (seed 003's ContextFormatter).

Each stage becomes ``### Results from '<stage>' stage:``; each execution's
content sits between ``<!-- Analysis Result START -->`` and ``END`` markers, so
that markdown in it cannot run into the next part; comment markers inside the
content are escaped so that it cannot close the block early. Parallel stages
get a header per agent with its status. Pure functions over stored records.

The formatter is chosen by the stage that reads the context (seed 003): the
next sequential stage and the chat read :func:`format_stages`, where thinking
stays internal; a synthesis agent reads :func:`format_synthesis_stage`, each
agent's whole investigation history (its thinking included) under a header
naming the agent, its provider, its strategy, its status and its error, after a
line counting the agents that succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from tarsy._pydantic import DeferredModel
from tarsy.models import (
    AgentExecution,
    DetectionEvent,
    ExecutionStatus,
    ExecutiveSummaryEvent,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    MCPToolSummaryEvent,
    TimelineEvent,
    UserQuestionEvent,
)

START_MARKER = "<!-- Analysis Result START -->"
END_MARKER = "<!-- Analysis Result END -->"


class ExecutionRecord(DeferredModel):
    """One execution with its timeline, as the formatter reads it."""

    execution: AgentExecution
    timeline: list[TimelineEvent]


def escape_markers(text: str) -> str:
    """Defuse HTML comment markers inside content (so it cannot fake a block boundary)."""
    return text.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def tool_label(server_name: str, tool_name: str) -> str:
    """``server.tool`` from seed 003's ``server_name`` and ``tool_name`` (no server: the tool)."""
    return f"{server_name}.{tool_name}" if server_name and tool_name else tool_name


def format_execution(events: Sequence[TimelineEvent], *, thinking: bool = False) -> str:
    """An execution's investigation trail: responses, tool calls and results, the analysis.

    Args:
        events: the execution's timeline, in order.
        thinking: include the model's thinking (for a synthesis agent, which weighs
            how each agent reasoned; the next stage reads conclusions only).
    """
    lines: list[str] = []
    for event in events:
        match event:
            case LLMThinkingEvent() if thinking:
                lines.append(f"### Thinking\n\n{event.content}\n")
            case FinalAnalysisEvent():
                lines.append(f"## Analysis Result\n\n{event.content}\n")
            case LLMResponseEvent():
                if event.error:
                    continue  # a malformed ReAct answer; its correction follows
                if event.source == "code_execution":
                    lines.append(f"### Code Execution\n\n{event.content}\n")
                    continue
                lines.append(f"### LLM Response\n\n{event.content}\n")
            case LLMToolCallEvent():
                tool = tool_label(event.server_name, event.tool_name)
                lines.append(f"Tool request [{tool}]: {event.arguments}")
            case MCPToolCallEvent():
                tool = tool_label(event.server_name, event.tool_name)
                lines.append(f"Tool call [{tool}]: {event.content}")
            case MCPToolSummaryEvent():
                tool = tool_label(event.server_name, event.tool_name)
                lines.append(f"Tool result summary [{tool}]: {event.content}")
            case LLMThinkingEvent() | ExecutiveSummaryEvent():
                continue  # internal reasoning / the closing summary: not stage output
            case UserQuestionEvent():
                lines.append(f"User question: {event.content}")
            case DetectionEvent():
                lines.append(f"Automatic check: {event.content}")
            case _:
                # A new event type must say here whether the next stage reads it.
                assert_never(event)
    return "\n".join(lines) + ("\n" if lines else "")


def format_stage(stage_name: str, records: Sequence[ExecutionRecord]) -> str:
    """One stage's results, with per-agent headers when several agents ran."""
    parts = [f"### Results from '{stage_name}' stage:\n"]
    for number, record in enumerate(records, start=1):
        if len(records) > 1:
            execution = record.execution
            parts.append(f"#### Agent {number}: {execution.agent}")
            parts.append(f"**Status**: {execution.status.value}\n")
        parts.append(START_MARKER)
        parts.append(escape_markers(format_execution(record.timeline)).rstrip("\n"))
        parts.append(END_MARKER + "\n")
    return "\n".join(parts)


def format_stages(stages: Sequence[tuple[str, Sequence[ExecutionRecord]]]) -> str:
    """All finished stages, in order: the previous-stage context of the next one."""
    return "\n".join(format_stage(name, records) for name, records in stages)


def _synthesis_header(number: int, execution: AgentExecution) -> list[str]:
    """``#### Agent N: name (provider, strategy)``, its status and its error."""
    lines = [
        f"#### Agent {number}: {execution.agent} ({execution.provider}, {execution.strategy})",
        f"**Status**: {execution.status.value}",
    ]
    if execution.error is not None:
        lines.append(f"**Error**: {escape_markers(execution.error.message)}")
    return [*lines, ""]


def format_synthesis_stage(stage_name: str, records: Sequence[ExecutionRecord]) -> str:
    """A parallel stage's results as a synthesis agent reads them (seed 003's synthesis formatter).

    Every agent, whatever its status, with its provider and strategy and its whole
    investigation history, thinking included; a failed agent's error is shown, so
    the synthesis can say which findings are missing and why.
    """
    succeeded = sum(r.execution.status is ExecutionStatus.COMPLETED for r in records)
    parts = [
        f"### Results from parallel stage '{stage_name}':\n",
        f"**Parallel Execution Summary**: {succeeded}/{len(records)} agents succeeded\n",
    ]
    for number, record in enumerate(records, start=1):
        parts.extend(_synthesis_header(number, record.execution))
        parts.append(START_MARKER)
        history = format_execution(record.timeline, thinking=True)
        parts.append(escape_markers(history).rstrip("\n"))
        parts.append(END_MARKER + "\n")
    return "\n".join(parts)

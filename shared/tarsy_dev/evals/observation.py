"""What one evaluated investigation produced, read from the api's session view and records.

Design constraint: figures about how a model behaved (turns, invalid calls,
answers without a tool call, cut replies) are read from what the session
recorded, never from the model under test's own account: the timeline the api
serves, and the LLM interaction records the step function wrote (read from the
stack's Firestore emulator, since the api does not serve them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from tarsy.models import (
    DetectionEvent,
    LLMInteraction,
    LLMResponseEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    TimelineEvent,
    timeline_event,
)
from tarsy.money import money_of, usd_float
from tarsy_dev.client import SessionView


class ToolCallRecord(BaseModel):
    """One tool call the investigation made, and whether it failed."""

    tool: str = Field(description="The tool's name on its server (pods_list).")
    arguments: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False
    gathered: bool = Field(
        default=False, description="Made by the gather phase before the model, not by the model."
    )


class RunObservation(BaseModel):
    """One investigation of one scenario by one model: its outcome, evidence and costs."""

    scenario: str
    model: str
    attempt: int = Field(default=1, ge=1)
    session_id: str | None = None
    status: str = Field(description="The session's final status, or 'error' if none was read.")
    error: str | None = None
    final_analysis: str = ""
    executive_summary: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cost: float = 0.0
    latency_s: float | None = Field(
        default=None, description="From the session's creation to its completion."
    )
    model_s: float | None = Field(
        default=None,
        description="Time inside the model: the sum of the session's LLM interaction records.",
    )
    turns: int | None = Field(
        default=None, description="Model calls of the session (its iterations' records)."
    )
    cut_replies: int | None = Field(
        default=None, description="Replies cut at the output-token limit (from the records)."
    )
    invalid_calls: int = Field(
        default=0,
        description="Replies that broke the action format, and calls of unknown tools or "
        "with arguments their schema refuses.",
    )
    model_tool_calls: int | None = Field(
        default=None,
        description="Tool calls the model asked for (gathered calls are not); None: unread, "
        "every recorded call counts.",
    )
    gather_s: float | None = Field(
        default=None, description="The gather step's own time (evidence first); None: none ran."
    )
    brief_chars: int | None = Field(
        default=None, description="The findings and evidence the opening got (characters)."
    )
    first_model_call_s: float | None = Field(
        default=None,
        description="From the session's creation to the start of its first model call.",
    )
    first_call_prompt_tokens: int | None = Field(
        default=None, description="The prompt tokens of the first investigating model call."
    )
    prompt_read_s: float | None = Field(
        default=None,
        description="Seconds the server spent reading prompts (its own timings; None: it "
        "reports none).",
    )
    detections: list[str] = Field(
        default_factory=list, description="The findings of the automatic checks, as written."
    )
    compact: bool = Field(default=False, description="The run took the compact path.")
    follow_up: bool = Field(
        default=False, description="On the compact path, the model asked for the follow-up."
    )

    @property
    def answered_without_tools(self) -> bool:
        """Whether the run ended in an analysis without the model calling any tool."""
        asked = len(self.tool_calls) if self.model_tool_calls is None else self.model_tool_calls
        return bool(self.final_analysis.strip()) and asked == 0


class RecordFigures(BaseModel):
    """What a session's LLM interaction records say about its model calls."""

    model_s: float = Field(description="Time inside the model, summed over every record.")
    turns: int = Field(description="The model calls of the sessions' iterations.")
    cut_replies: int = Field(description="Those cut at the output-token limit.")
    first_call_at: datetime | None = Field(
        default=None, description="When the first model call started, answered or not."
    )
    first_call_prompt_tokens: int | None = Field(
        default=None, description="The prompt tokens of the first answered model call."
    )
    prompt_read_s: float | None = Field(
        default=None, description="Prompt reading time the server reported, summed."
    )


def record_figures(interactions: Sequence[LLMInteraction]) -> RecordFigures:
    """Time inside the model, turns and cut replies, from a session's interaction records.

    A turn is one iteration's model call (a call that summarized a large tool
    result is not one, but its time counts inside the model). A record is made
    as its call begins, so its ``created_at`` is the call's start. Prompt
    reading time is the server's own account (llama-server's timings, kept on
    the record's metadata), summed over the calls that carry one.
    """
    turns = sorted((i for i in interactions if i.kind == "iteration"), key=lambda i: i.created_at)
    answered = [i for i in turns if i.tokens.input_tokens]
    timings = [i.metadata.get("server_timings") for i in interactions]
    reads = [t["prompt_ms"] for t in timings if isinstance(t, dict) and "prompt_ms" in t]
    return RecordFigures(
        model_s=round(sum(i.duration_ms for i in interactions) / 1000, 3),
        turns=len(turns),
        cut_replies=sum(1 for i in turns if i.error is not None and i.error.code == "truncated"),
        first_call_at=turns[0].created_at if turns else None,
        first_call_prompt_tokens=answered[0].tokens.input_tokens if answered else None,
        prompt_read_s=round(sum(reads) / 1000, 1) if reads else None,
    )


def first_model_call_s(session: dict[str, Any], first_call_at: datetime | None) -> float | None:
    """Seconds from the session's creation to its first model call (None: unknown)."""
    if first_call_at is None or not session.get("created_at"):
        return None
    return _seconds_between(session["created_at"], first_call_at.isoformat())


# What the tool executor answers to a call it cannot make as asked (tarsy.tools.base).
_INVALID_CALL = re.compile(r"^Error calling \S+: (?:unknown tool|invalid arguments|arguments )")
# ReAct replies that were neither an action nor an answer.
_REACT_BROKEN = ("malformed", "thought_only")


def is_invalid(event: TimelineEvent) -> bool:
    """Whether a timeline event records a reply or a call that could not be used as written."""
    if isinstance(event, LLMResponseEvent):
        if event.cut_short or event.nudge or event.answer_error:
            return False
        if event.schema_error is not None:
            return not event.schema_error.startswith("the final answer")
        return event.react_kind in _REACT_BROKEN
    if isinstance(event, MCPToolCallEvent) and event.is_error:
        return bool(_INVALID_CALL.match(event.content))
    return False


def tool_call(event: MCPToolCallEvent) -> ToolCallRecord:
    """The call an ``mcp_tool_call`` event records."""
    return ToolCallRecord(
        tool=event.tool_name,
        arguments=dict(event.arguments),
        is_error=event.is_error,
        gathered=bool(event.gathered),
    )


def _seconds_between(start: Any, end: Any) -> float | None:
    try:
        began = datetime.fromisoformat(str(start))
        ended = datetime.fromisoformat(str(end))
    except ValueError:
        return None
    return max(0.0, (ended - began).total_seconds())


def observe(view: SessionView, *, scenario: str, model: str, attempt: int = 1) -> RunObservation:
    """Read a finished session into an observation.

    Args:
        view: ``GET /sessions/{id}``.
        scenario: The scenario it investigated.
        model: The model under test.
        attempt: Which repetition this is (from 1).

    Returns:
        The observation.
    """
    session = view.session
    tokens = session.get("tokens") or {}
    events = [timeline_event(event) for event in view.timeline]
    calls = [tool_call(event) for event in events if isinstance(event, MCPToolCallEvent)]
    compact = {getattr(event, "compact", None) for event in events}
    asked = sum(1 for event in events if isinstance(event, LLMToolCallEvent))
    error = session.get("error")
    latency = None
    if session.get("created_at") and session.get("completed_at"):
        latency = _seconds_between(session["created_at"], session["completed_at"])
    return RunObservation(
        scenario=scenario,
        model=model,
        attempt=attempt,
        session_id=str(session.get("session_id") or "") or None,
        status=str(session.get("status") or "error"),
        error=str(error.get("message") or error) if isinstance(error, dict) else error,
        final_analysis=str(session.get("final_analysis") or ""),
        executive_summary=str(session.get("executive_summary") or ""),
        tool_calls=calls,
        input_tokens=int(tokens.get("input_tokens") or 0),
        output_tokens=int(tokens.get("output_tokens") or 0),
        thinking_tokens=int(tokens.get("thinking_tokens") or 0),
        cost=usd_float(money_of(session.get("cost") or 0)),
        latency_s=latency,
        invalid_calls=sum(1 for event in events if is_invalid(event)),
        model_tool_calls=asked,
        detections=[event.content for event in events if isinstance(event, DetectionEvent)],
        compact=bool(compact & {"answer", "not_enough"}),
        follow_up="not_enough" in compact,
        **_gather_figures(session),
    )


def _gather_figures(session: dict[str, Any]) -> dict[str, Any]:
    """The gather step's time and brief size, as the session records them (evidence first)."""
    gather = session.get("gather")
    if not isinstance(gather, dict):
        return {}
    return {
        "gather_s": round(float(gather.get("elapsed_ms") or 0.0) / 1000, 3),
        "brief_chars": int(gather.get("brief_chars") or 0),
    }

"""What one evaluated investigation produced, read from the api's session view."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from tarsy_dev.client import SessionView


class ToolCallRecord(BaseModel):
    """One tool call the investigation made, and whether it failed."""

    tool: str = Field(description="The tool's name on its server (pods_list).")
    arguments: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False


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


def tool_call(metadata: dict[str, Any]) -> ToolCallRecord:
    """The call an ``mcp_tool_call`` event records (``tool_name``, or ``tool`` in older records)."""
    return ToolCallRecord(
        tool=str(metadata.get("tool_name") or metadata.get("tool") or ""),
        arguments=dict(metadata.get("arguments") or {}),
        is_error=bool(metadata.get("is_error")),
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
    calls = [
        tool_call(event.get("metadata") or {})
        for event in view.timeline
        if event.get("type") == "mcp_tool_call"
    ]
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
        cost=float(session.get("cost") or 0.0),
        latency_s=latency,
    )

"""Reading a session view's timelines in tests: the model's own events apart from evidence first.

An investigating agent whose alert names a pod begins with a gather step
(tarsy.evidence): gathered tool calls and detections come before the model's
first event. Tests about the model's loop read its events without them.
"""

from __future__ import annotations

from typing import Any

from tarsy.models import DetectionEvent, MCPInteraction, MCPToolCallEvent, timeline_event


def is_evidence(event: dict[str, Any]) -> bool:
    """Whether an event (as the api serves it) is the gather step's: gathered, or a detection."""
    typed = timeline_event(event)
    return isinstance(typed, DetectionEvent) or (
        isinstance(typed, MCPToolCallEvent) and bool(typed.gathered)
    )


def model_timeline(execution: dict[str, Any]) -> list[dict[str, Any]]:
    """An execution's timeline without the gather step's events."""
    return [e for e in execution["timeline"] if not is_evidence(e)]


def model_records(records: list[MCPInteraction]) -> list[MCPInteraction]:
    """The tool records of the model's own calls (not the gather step's)."""
    return [r for r in records if not r.call_id.startswith("gather-")]

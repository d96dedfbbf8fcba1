"""Simulated tool failures: a scenario can make chosen calls fail or hang.

A real cluster's API server times out, a kubelet is unreachable, the metrics API
is briefly gone. A scenario's ``faults`` reproduce that mid-investigation: the
n-th call of a tool (with matching arguments) fails with an error message, after
an optional hang. The counts start when the scenario is loaded (or switched to),
so each investigation meets the same faults in the same places.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel


class Fault(BaseModel):
    """Calls of one tool that fail: which ones, how, and with what message."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    tool: str = Field(description="The tool's name (the scenario checks it is one of ours).")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Only calls with these argument values count (a subset; empty: every call).",
    )
    calls: list[int] = Field(
        default_factory=lambda: [1],
        min_length=1,
        description="Which matching calls fail, counted from 1 (default: the first).",
    )
    kind: Literal["error", "timeout"] = Field(
        default="error", description="error: fails at once; timeout: hangs, then fails."
    )
    seconds: float = Field(default=8.0, ge=0, le=120, description="How long a timeout hangs.")
    message: str = Field(min_length=1, description="The error the tool answers with.")

    @field_validator("calls")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("calls are counted from 1")
        return value

    def applies_to(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether a call of ``tool`` with ``arguments`` is one this fault counts."""
        return tool == self.tool and all(
            _same(arguments.get(key), value) for key, value in self.arguments.items()
        )


def _same(given: Any, wanted: Any) -> bool:
    if isinstance(wanted, str) and isinstance(given, str):
        return given.strip().lower() == wanted.strip().lower()
    return bool(given == wanted)


class FaultPlan:
    """Counts matching calls and says which of them fail (thread-safe)."""

    def __init__(self, faults: Sequence[Fault]) -> None:
        self._faults = list(faults)
        self._counts = [0] * len(self._faults)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Start counting again (a new investigation)."""
        with self._lock:
            self._counts = [0] * len(self._faults)

    def next_failure(self, tool: str, arguments: Mapping[str, Any]) -> Fault | None:
        """Count this call; return the fault it meets, or None if it goes through."""
        hit: Fault | None = None
        with self._lock:
            for index, fault in enumerate(self._faults):
                if not fault.applies_to(tool, arguments):
                    continue
                self._counts[index] += 1
                if hit is None and self._counts[index] in fault.calls:
                    hit = fault
        return hit

"""Simulated API failures: a scenario can make chosen API requests fail or hang.

A real cluster's API server times out, a kubelet is unreachable, the metrics API
is briefly gone. A scenario's ``faults`` reproduce that mid-investigation, at the
Kubernetes API, so every client (kubernetes-mcp-server, kubectl) meets them as it
would a real cluster's: the n-th request of a verb on a resource (in a namespace,
for a name, when given) fails with a ``Status`` after an optional hang. The
counts start when the scenario is served (or switched to), so each
investigation meets the same faults in the same places.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel


class ApiRequest(BaseModel):
    """One request to the API: ``list events`` in a namespace, ``get pods/log`` of a pod."""

    verb: Literal["get", "list"]
    resource: str = Field(description="The resource, with its subresource: events, pods/log.")
    namespace: str | None = None
    name: str | None = None


class Fault(BaseModel):
    """Requests that fail: which ones, how, and with what message."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    verb: Literal["get", "list"]
    resource: str = Field(min_length=1, description="events, pods, pods/log, deployments...")
    namespace: str | None = Field(default=None, description="Only requests in this namespace.")
    name: str | None = Field(default=None, description="Only requests for this object.")
    calls: list[int] = Field(
        default_factory=lambda: [1],
        min_length=1,
        description="Which matching requests fail, counted from 1 (default: the first).",
    )
    kind: Literal["error", "timeout"] = Field(
        default="error",
        description="error: a 500 at once; timeout: hangs, then a 504 (reason Timeout).",
    )
    seconds: float = Field(default=8.0, ge=0, le=120, description="How long a timeout hangs.")
    message: str = Field(min_length=1, description="The Status message the server answers with.")

    @field_validator("calls")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("calls are counted from 1")
        return value

    def applies_to(self, request: ApiRequest) -> bool:
        """Whether ``request`` is one this fault counts."""
        return (
            request.verb == self.verb
            and request.resource == self.resource
            and self.namespace in (None, request.namespace)
            and self.name in (None, request.name)
        )


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

    def next_failure(self, request: ApiRequest) -> Fault | None:
        """Count this request; return the fault it meets, or None if it goes through."""
        hit: Fault | None = None
        with self._lock:
            for index, fault in enumerate(self._faults):
                if not fault.applies_to(request):
                    continue
                self._counts[index] += 1
                if hit is None and self._counts[index] in fault.calls:
                    hit = fault
        return hit

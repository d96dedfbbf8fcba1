"""Running the collectors: rounds of parallel tool calls until nothing new is to be fetched.

Design constraint: plain code, bounded, and through the agent's own tools.
Every call goes through the same :class:`~tarsy.tools.base.ToolExecutor` as
the model's calls (the agent's MCP servers, masking, retries within the
budget), so what is gathered is recorded, masked and shown like any tool
result. A round plans every applicable collector's calls on what is known
so far (:func:`next_round`, pure), runs them at once, and reads their results
into the snapshot; references found (a pod's ConfigMaps, its owner) are
followed in the next round. The phase stops when a round plans nothing new,
at ``max_rounds``, at ``max_calls``, or at the time budget.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from tarsy._pydantic import DeferredModel
from tarsy.evidence import parse
from tarsy.evidence.catalog import Collector, EvidenceSettings, Shape, shape_of_tool
from tarsy.evidence.snapshot import AlertFacts, Detection, Snapshot
from tarsy.evidence.targets import targets_of
from tarsy.models import ToolCall
from tarsy.tools.base import ToolExecutor, ToolListing, ToolResult, error_result

logger = logging.getLogger(__name__)


class PlannedCall(DeferredModel):
    """One call a collector asks for: ``server.tool`` with its rendered arguments."""

    collector: str
    server: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    measures: str = Field(default="", description="what a metric query measures, if it is one")
    shape: Shape = Field(default="table", description="what the result is (the call declares it)")

    @property
    def name(self) -> str:
        """The canonical tool name (``server.tool``)."""
        return f"{self.server}.{self.tool}"

    @property
    def key(self) -> str:
        """Equal for calls that would fetch the same thing."""
        return f"{self.name} {json.dumps(self.arguments, sort_keys=True)}"


class GatheredCall(DeferredModel):
    """A call the gather phase made, with its collector, round and result."""

    collector: str
    round: int
    result: ToolResult
    shape: Shape | None = Field(default=None, description="what the result is, as declared")

    @property
    def read_as(self) -> Shape:
        """The declared shape; a record from before shapes were declared, by its tool."""
        return self.shape or shape_of_tool(self.result.tool)


class Gathered(DeferredModel):
    """What the gather phase produced: the calls, the snapshot, the detections."""

    calls: list[GatheredCall] = Field(default_factory=list)
    snapshot: Snapshot = Field(default_factory=Snapshot)
    detections: list[Detection] = Field(default_factory=list)
    stopped: str = Field(default="complete", description="why gathering ended")
    elapsed_ms: float = 0.0


def next_round(
    collectors: Mapping[str, Collector],
    alert: AlertFacts,
    snapshot: Snapshot,
    done: set[str],
    listing: ToolListing,
    room: int,
) -> list[PlannedCall]:
    """The calls of the next round: what applicable collectors ask for that is not done (pure).

    Args:
        collectors: The applicable collectors, by name, in catalog order.
        alert: What the alert says.
        snapshot: What is known so far.
        done: The keys of the calls already made.
        listing: The tools the agent may call (a collector's unlisted tool is skipped).
        room: How many calls the budget still allows.

    Returns:
        At most ``room`` new calls, each distinct.
    """
    planned: list[PlannedCall] = []
    seen = set(done)
    for name, collector in collectors.items():
        targets = targets_of(collector.for_each, alert, snapshot)[: collector.max_targets]
        for target in targets:
            for call in collector.calls:
                arguments = call.render(target)
                candidate = PlannedCall(
                    collector=name, server=collector.server, tool=call.tool,
                    arguments=arguments or {}, measures=call.measures or "", shape=call.shape,
                )  # fmt: skip
                if arguments is None or listing.get(candidate.name) is None:
                    continue
                if candidate.key in seen:
                    continue
                seen.add(candidate.key)
                planned.append(candidate)
                if len(planned) >= room:
                    return planned
    return planned


async def _run_round(
    tools: ToolExecutor, calls: list[ToolCall], listing: ToolListing, deadline: float
) -> list[ToolResult]:
    """Run a round's calls at once; a call still running at the deadline is cut off.

    Each call runs alone so that one slow call costs only its own result: the
    others are kept, and the cut one becomes an error result that says why.
    """
    tasks = [
        asyncio.create_task(tools.call_tools([call], listing, budget=deadline)) for call in calls
    ]
    remaining = max(deadline - time.monotonic(), 0.0)
    _, pending = await asyncio.wait(tasks, timeout=remaining)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    results: list[ToolResult] = []
    for call, task in zip(calls, tasks, strict=True):
        if task in pending or task.exception() is not None:
            reason = "not gathered: the evidence time budget ran out"
            if task not in pending:
                reason = f"not gathered: {task.exception()!r}"
            results.append(error_result(call, reason))
        else:
            results.append(task.result()[0])
    return results


async def gather(
    collectors: Mapping[str, Collector],
    settings: EvidenceSettings,
    alert: AlertFacts,
    tools: ToolExecutor,
    listing: ToolListing,
) -> Gathered:
    """Run the collectors in rounds within the budgets; read the results; detect.

    Args:
        collectors: The applicable collectors (see :func:`tarsy.evidence.catalog.applicable`).
        settings: Budgets: time, calls, rounds.
        alert: What the alert says.
        tools: The executor of the agent's tools (masking and retries included).
        listing: The agent's tools this step.

    Returns:
        Every call made with its result, the snapshot, and the detections.
    """
    started = time.monotonic()
    deadline = started + settings.budget_seconds
    gathered = Gathered(snapshot=Snapshot(alert=alert))
    done: set[str] = set()
    for number in range(settings.max_rounds):
        room = settings.max_calls - len(gathered.calls)
        if room <= 0:
            gathered.stopped = f"call budget ({settings.max_calls}) reached"
            break
        if time.monotonic() >= deadline:
            gathered.stopped = f"time budget ({settings.budget_seconds:g} s) reached"
            break
        planned = next_round(collectors, alert, gathered.snapshot, done, listing, room)
        if not planned:
            break
        calls = [
            ToolCall(
                id=f"gather-{len(gathered.calls) + n:03d}",
                name=p.name,
                arguments=json.dumps(p.arguments),
            )
            for n, p in enumerate(planned)
        ]
        results = await _run_round(tools, calls, listing, deadline)
        for plan, result in zip(planned, results, strict=True):
            done.add(plan.key)
            gathered.calls.append(
                GatheredCall(
                    collector=plan.collector, round=number, result=result, shape=plan.shape
                )
            )
            parse.add_result(
                gathered.snapshot, plan.shape, plan.arguments, result.full_content,
                result.call_id, is_error=result.is_error, measures=plan.measures,
            )  # fmt: skip
    else:
        gathered.stopped = f"round limit ({settings.max_rounds}) reached"
    # Imported here: only a gather step runs the detections (most steps are model turns).
    from tarsy.evidence.detections import detect

    gathered.detections = detect(gathered.snapshot, disabled=settings.disabled_detections)
    gathered.elapsed_ms = (time.monotonic() - started) * 1000
    logger.info(
        "gathered %d calls in %.0f ms (%s); %d detections",
        len(gathered.calls), gathered.elapsed_ms, gathered.stopped, len(gathered.detections),
    )  # fmt: skip
    return gathered

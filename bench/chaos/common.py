"""What every scenario shares: the deterministic model, the chains, and how a session is compared.

A session's *facts* are what a person would see of it: per execution (keyed by
role, stage and agent, not by id) the timeline as ``(type, content)`` pairs,
and the counts that tell whether anything ran twice. Two runs of the same alert
against the same deterministic model must give equal timelines: the difference
(as multisets, per execution) counts events duplicated and events lost.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tarsy.models import ExecutionStatus
from tarsy.persistence.store import Store
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeReply, FakeToolCall

# Tool-using agents (the kubernetes chain) ask for this many tool turns, then conclude.
TOOL_TURNS = 2
# Alert types, each routed to a chain of CHAOS_CONFIG (or the built-in ones).
ALERT_TYPES = {"default": "chaos-default", "tools": "kubernetes", "parallel": "chaos-parallel"}
# The model's attempt timeout in the stack (the storm's slow replies outlive it).
ATTEMPT_TIMEOUT_S = 5.0

CHAOS_CONFIG = f"""\
# Written by `make chaos` for its own stack (bench/chaos).
llm_providers:
  default:
    backend: google-native
    # Short waits and a short attempt timeout, so that the fault storm stays quick.
    retry: {{max_retries: 3, initial_delay: 0.2, max_delay: 2.0, empty_response_delay: 0.2,
            timeout: {ATTEMPT_TIMEOUT_S:g}}}
agents:
  chaos-logs:
    instructions: Investigate the alert from the logs.
  chaos-metrics:
    instructions: Investigate the alert from the metrics.
agent_chains:
  chaos-parallel:
    alert_types: [chaos-parallel]
    stages:
      - name: investigate
        parallel: true
        agents:
          - name: chaos-logs
          - name: chaos-metrics
"""


def alert(chain: str, n: int = 0, kind: str | None = None) -> dict[str, Any]:
    """The alert body of session ``n`` of a scenario (the same ``n`` gives the same alert)."""
    return {
        "alert_type": kind or ALERT_TYPES[chain],
        "data": {"pod": f"api-{n}", "namespace": "shop", "reason": "CrashLoopBackOff"},
    }


def _without_ids(value: Any) -> Any:
    """``value`` without the ``id`` keys (tool call ids are random, per run)."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def digest(call: FakeCall) -> str:
    """A short hash of what the model was shown: equal requests, equal answers."""
    shown = [call.system_text(), _without_ids(call.body.get("contents", []))]
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:12]


def deterministic(call: FakeCall) -> FakeReply:
    """The zero-latency model: tool turns while tools are offered, then an answer."""
    if call.function_names() and len(call.model_parts()) < TOOL_TURNS:
        return FakeReply(
            thinking="Checking the pods.",
            tool_calls=[FakeToolCall(name="kubernetes__pods_list", args={"namespace": "shop"})],
        )
    return FakeReply(text=f"Analysis {digest(call)}: the config map lost DB_URL; restore it.")


@dataclass
class Facts:
    """What one session (or one chat execution) amounted to."""

    status: str
    timelines: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    llm_records: int = 0  # llm_interactions documents (one per step that called the model)
    iterations: int = 0  # the executions' iteration counters
    due_left: list[str] = field(default_factory=list)  # due times left once terminal
    live_left: int = 0  # executions not terminal although the session is

    @property
    def terminal(self) -> bool:
        return ExecutionStatus(self.status).is_terminal


def _key(role: str, stage: int, agent_index: int) -> str:
    return f"{role}/s{stage}/a{agent_index}"


async def session_facts(store: Store, session_id: str) -> Facts:
    """Read a session back: its status, timelines per execution, counts and leftovers."""
    session = await store.get_session(session_id)
    if session is None:
        return Facts(status="missing")
    facts = Facts(status=session.status.value)
    terminal = session.status.is_terminal
    if terminal and session.due_at is not None:
        facts.due_left.append(f"session (awaiting stage {session.awaiting_stage})")
    for execution in await store.list_executions(session_id):
        key = _key(execution.role, execution.stage, execution.agent_index)
        facts.timelines[key] = [
            (event.type.value, event.content)
            for event in await store.list_timeline(execution.execution_id)
        ]
        facts.llm_records += len(await store.list_llm_interactions(execution.execution_id))
        facts.iterations += execution.iteration
        if terminal and execution.due_at is not None:
            facts.due_left.append(f"{key} ({execution.status.value}, step {execution.step})")
        if terminal and not execution.status.is_terminal:
            facts.live_left += 1
    return facts


@dataclass
class Difference:
    """Timeline events of a run against a reference run, as multisets per execution."""

    duplicated: int = 0
    lost: int = 0
    samples: list[str] = field(default_factory=list)  # a few of them, for the report

    def add(self, other: Difference) -> None:
        self.duplicated += other.duplicated
        self.lost += other.lost
        self.samples.extend(other.samples[: max(0, 6 - len(self.samples))])


def difference(run: Facts, reference: Facts) -> Difference:
    """What ``run`` has more (duplicated) and less (lost) than ``reference``."""
    found = Difference()
    for key in sorted(set(run.timelines) | set(reference.timelines)):
        have = Counter(run.timelines.get(key, []))
        want = Counter(reference.timelines.get(key, []))
        for sign, extra in (("+", have - want), ("-", want - have)):
            for (kind, content), n in extra.items():
                found.samples.append(f"{sign}{n} {key} {kind}: {content[:80]!r}")
        found.duplicated += sum((have - want).values())
        found.lost += sum((want - have).values())
    return found


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation (0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class Stopwatch:
    """Seconds since it was made."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()

    def __call__(self) -> float:
        return self._clock() - self._start

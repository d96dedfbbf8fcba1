"""The gather phase: rounds of calls that follow references, its budgets, and its commit."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tarsy.agent.compact import CHARS_PER_TOKEN as COMPACT_CHARS_PER_TOKEN
from tarsy.agent.compact import MIN_BRIEF_TOKENS, STRUCTURED_GUIDANCE
from tarsy.agent.prompts import EVIDENCE_INSTRUCTIONS
from tarsy.config.loader import load_config
from tarsy.engine.gathering import gather_commit, gathers, opening_with_evidence
from tarsy.engine.messages import iterate_message, new_execution
from tarsy.evidence import brief
from tarsy.evidence.catalog import Collector, EvidenceSettings
from tarsy.evidence.gather import Gathered, gather
from tarsy.evidence.snapshot import AlertFacts
from tarsy.llm.base import ToolDefinition
from tarsy.models import DetectionEvent, MCPToolCallEvent, Session, StepMessage, ToolCall
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList, ToolListing, ToolResult
from tarsy_dev.localstack.local_model import LocalModel, local_config

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d}]
spec:
  containers: [{name: web, envFrom: [{configMapRef: {name: web-env}}]}]
status:
  phase: Running
  containerStatuses:
    - name: web
      ready: false
      restartCount: 4
      lastState: {terminated: {exitCode: 1, reason: Error}}
      state: {waiting: {reason: CrashLoopBackOff}}
"""
CONFIG_MAP = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-env, namespace: shop}\n"
    "data: {HOST: db.shop.svc}\n"
)
REPLICA_SET = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-5d, namespace: shop}\n"


class ClusterTools:
    """A tool executor answering from a fixed cluster, recording the calls in order."""

    def __init__(self, answers: Mapping[tuple[str, str], str]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
    ) -> ToolListing:
        return LISTING

    async def call_tools(
        self, calls: Sequence[ToolCall], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        results = []
        for call in calls:
            arguments = json.loads(call.arguments)
            self.calls.append((call.name, arguments))
            key = (call.name.split(".", 1)[1], str(arguments.get("name", "")))
            text = self.answers.get(key, f'failed: pods "{arguments.get("name")}" not found')
            results.append(
                ToolResult(
                    call_id=call.id,
                    name=call.name,
                    arguments=arguments,
                    content=text,
                    full_content=text,
                    is_error=key not in self.answers,
                )
            )
        return results


LISTING = ToolListing(
    tools=[
        ToolDefinition(name=f"kubernetes.{tool}", description="", parameters={"type": "object"})
        for tool in ("pods_get", "pods_log", "resources_get")
    ]
)


def _collector(for_each: str, tool: str, **arguments: str) -> Collector:
    return Collector.model_validate(
        {"for_each": for_each, "calls": [{"tool": tool, "arguments": arguments}]}
    )


COLLECTORS = {
    "pod": _collector("alert.pod", "pods_get", namespace="{namespace}", name="{name}"),
    "config": _collector(
        "pods.configmaps", "resources_get", kind="ConfigMap", namespace="{namespace}", name="{name}"
    ),
    "owners": _collector(
        "owners", "resources_get", kind="{kind}", namespace="{namespace}", name="{name}"
    ),
    "unlisted-tool": _collector("alert.pod", "nodes_top"),
}
ALERT = AlertFacts(name="PodCrashLooping", labels={"namespace": "shop", "pod": "web-1"})
ANSWERS = {
    ("pods_get", "web-1"): POD,
    ("resources_get", "web-env"): CONFIG_MAP,
    ("resources_get", "web-5d"): REPLICA_SET,
}


async def test_rounds_follow_what_the_previous_round_found_until_nothing_is_new() -> None:
    tools = ClusterTools(ANSWERS)
    result = await gather(COLLECTORS, EvidenceSettings(), ALERT, tools, LISTING)
    assert [(c.round, c.collector, c.result.arguments["name"]) for c in result.calls] == [
        (0, "pod", "web-1"),
        (1, "config", "web-env"),
        (1, "owners", "web-5d"),
    ]
    assert result.stopped == "complete"
    assert [c.result.call_id for c in result.calls] == ["gather-000", "gather-001", "gather-002"]
    assert {o.name for o in result.snapshot.objects} == {"web-1", "web-env", "web-5d"}


async def test_the_call_budget_stops_gathering() -> None:
    tools = ClusterTools(ANSWERS)
    result = await gather(COLLECTORS, EvidenceSettings(max_calls=2), ALERT, tools, LISTING)
    assert len(result.calls) == 2
    assert result.stopped == "call budget (2) reached"


async def test_a_tool_the_agent_does_not_have_is_never_called() -> None:
    tools = ClusterTools(ANSWERS)
    await gather(COLLECTORS, EvidenceSettings(), ALERT, tools, LISTING)
    assert all(name != "kubernetes.nodes_top" for name, _ in tools.calls)


def _session(alert: dict[str, Any]) -> Session:
    return Session(
        session_id="s-1",
        alert_type="kubernetes",
        alert_data=json.dumps(alert),
        chain_id="kubernetes",
    )


def test_an_alert_that_names_nothing_starts_without_a_gather_step() -> None:
    config = load_config(Settings())
    agent = config.resolve("kubernetes", 0, 0)
    assert gathers(config, agent, _session({"labels": {"namespace": "shop", "pod": "web-1"}}))
    assert not gathers(config, agent, _session({"text": "disk is full somewhere"}))
    off = config.model_copy(
        update={
            "agents": {
                **config.agents,
                "kubernetes-investigator": config.agents["kubernetes-investigator"].model_copy(
                    update={"evidence": "off"}
                ),
            }
        }
    )
    agent_off = off.resolve("kubernetes", 0, 0)
    assert agent_off.evidence is None
    assert not gathers(off, agent_off, _session({"labels": {"namespace": "shop", "pod": "web-1"}}))


def test_the_first_message_of_a_gathering_execution_is_a_gather_step() -> None:
    config = load_config(Settings())
    agent = config.resolve("kubernetes", 0, 0)
    due = datetime(2026, 1, 1, tzinfo=UTC)
    session = _session({"labels": {"namespace": "shop", "pod": "web-1"}})
    execution = new_execution(session, 0, 0, "agent", agent, "e-1", due, gathers=True)
    assert iterate_message(execution, 1).kind == "gather"
    summary = new_execution(session, -1, 0, "summary", agent, "e-2", due, gathers=True)
    assert not summary.gather_pending and iterate_message(summary, 1).kind == "iterate"


async def test_the_gather_commit_records_each_call_marks_it_gathered_and_rewrites_the_opening() -> (
    None
):
    config = load_config(Settings())
    agent = config.resolve("kubernetes", 0, 0)
    session = _session({"labels": {"namespace": "shop", "pod": "web-1"}})
    due = datetime(2026, 1, 1, tzinfo=UTC)
    execution = new_execution(session, 0, 0, "agent", agent, "e-1", due, gathers=True)
    gathered = await gather(COLLECTORS, EvidenceSettings(), ALERT, ClusterTools(ANSWERS), LISTING)
    opening = opening_with_evidence(config, agent, session, "", gathered)
    message = StepMessage(session_id="s-1", execution_id="e-1", step=1, kind="gather")
    commit = gather_commit(
        message, execution, session, opening.messages, gathered, None, due,
        brief_chars=opening.brief_chars,
    )  # fmt: skip
    assert commit.session is not None and commit.session.gather is not None
    assert commit.session.gather.calls == 3
    assert 0 < commit.session.gather.brief_chars < len(opening.messages[-1].content)
    assert commit.session.findings == [d.finding for d in gathered.detections]

    assert (commit.step, commit.next_step) == (1, 2)
    assert commit.execution.gather_pending is False and commit.execution.due_at == due
    assert [r.call_id for r in commit.mcp_interactions] == [
        "gather-000",
        "gather-001",
        "gather-002",
    ]
    tool_events = [e for e in commit.timeline if isinstance(e, MCPToolCallEvent)]
    assert all(e.gathered for e in tool_events) and len(tool_events) == 3
    detections = [e for e in commit.timeline if isinstance(e, DetectionEvent)]
    assert [e.content for e in detections] == [d.finding for d in gathered.detections]
    [system, user] = commit.opening
    assert system.role == "system" and user.role == "user"
    assert "Findings of tarsy's automatic checks" in user.content
    assert "[E1] kubernetes.pods_get" in user.content


def test_nothing_gathered_leaves_the_opening_as_it_was() -> None:
    config = load_config(Settings())
    agent = config.resolve("kubernetes", 0, 0)
    session = _session({"labels": {}})
    opening = opening_with_evidence(config, agent, session, "", Gathered())
    assert (opening.messages, opening.brief_chars) == ([], 0)


async def test_the_compact_opening_states_the_answer_form_and_sizes_the_brief_to_read() -> None:
    small = LocalModel(
        url="http://127.0.0.1:1/v1", model="qwen2.5-coder-1.5b-instruct", label="small",
        prompt_tokens_per_second=8.0,
    )  # fmt: skip
    config = load_config(Settings(), user_text=json.dumps(local_config(small, {})))
    agent = config.resolve("kubernetes", 0, 0)
    assert agent.compact is not None
    session = _session({"labels": {"namespace": "shop", "pod": "web-1"}})
    gathered = await gather(COLLECTORS, EvidenceSettings(), ALERT, ClusterTools(ANSWERS), LISTING)
    opening = opening_with_evidence(config, agent, session, "", gathered)
    [system, message] = opening.messages
    assert system.content.endswith(STRUCTURED_GUIDANCE)
    assert "Findings of tarsy's automatic checks" in message.content
    assert "use your tools" not in message.content  # the first call offers none
    # 8 tokens/s for 60 s leaves less than the smallest brief: the brief is that floor
    # (and one line counting what it could not show).
    findings = brief.findings_text(gathered.detections)
    floor = len(findings) + MIN_BRIEF_TOKENS * COMPACT_CHARS_PER_TOKEN
    assert opening.brief_chars <= floor + len("\n\n(99 gathered calls not shown)")
    capable = load_config(Settings()).resolve("kubernetes", 0, 0)
    assert capable.compact is None  # Gemini keeps its tools from the first call
    agentic = opening_with_evidence(config, capable, session, "", gathered)
    assert EVIDENCE_INSTRUCTIONS in agentic.messages[-1].content

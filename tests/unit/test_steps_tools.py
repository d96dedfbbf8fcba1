"""run_tools and the commit around it: tool_choice none runs nothing, summary records join
the commit with their tokens and cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tarsy.agent.strategies.base import IterationOutcome
from tarsy.engine.iteration import ModelCall, Ports, ToolRun, run_tools
from tarsy.engine.steps import build_commit
from tarsy.llm.base import LLMResult
from tarsy.llm.registry import get_provider
from tarsy.models import LLMInteraction, StepMessage, TokenUsage, ToolCall
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList, ToolListing, ToolResult

from .test_steps_commit import CONFIG, DUE, SID, interaction, turn


class RecordingExecutor:
    """A tool executor that only records what it was asked to run."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    async def list_tools(
        self,
        servers: Sequence[str],
        cached: Mapping[str, CachedToolList] | None = None,
        *,
        budget: float | None = None,
    ) -> ToolListing:
        return ToolListing()

    async def call_tools(
        self, calls: Sequence[ToolCall], listing: ToolListing, *, budget: float | None = None
    ) -> list[ToolResult]:
        self.calls.extend(calls)
        return [
            ToolResult(call_id=c.id, name=c.name, content="ok", full_content="ok") for c in calls
        ]


def ports(executor: RecordingExecutor) -> Ports:
    # run_tools reads the config and the tool executor; no sub-agent is messaged here.
    none: Any = None
    provider = get_provider(CONFIG.resolve("default", 0, 0).provider, Settings())
    return Ports(provider=provider, tools=executor, sub_agents=none, config=CONFIG)


async def test_tool_choice_none_never_runs_returned_calls() -> None:
    executor = RecordingExecutor()
    first = turn(strategy="native-thinking")
    current = replace(first, request=first.request.model_copy(update={"tool_choice": "none"}))
    asked = LLMResult(tool_calls=[ToolCall(id="c1", name="kubernetes.pods_get")])
    call = ModelCall(interaction=interaction(), result=asked)
    assert await run_tools(current, call, ports(executor)) == ToolRun()
    assert executor.calls == []


def test_summary_records_join_the_commit_with_their_tokens() -> None:
    usage = TokenUsage(input_tokens=1000, output_tokens=50, total_tokens=1050)
    summary = LLMInteraction(
        step=4, model="gemini-2.5-flash", provider="google-native", request={},
        kind="tool_summary", tool_call_id="c1", tokens=usage, cost=0.01,
    )  # fmt: skip
    message = StepMessage(session_id=SID, execution_id="e", step=4, kind="iterate")
    tools = ToolRun(usage=usage, interactions=[summary])
    commit, _ = build_commit(
        message, turn(), ModelCall(interaction=interaction()), tools,
        IterationOutcome(next="continue"), None, CONFIG, DUE,
    )  # fmt: skip
    assert commit.summary_interactions == [summary]
    assert commit.usage == interaction().tokens + usage

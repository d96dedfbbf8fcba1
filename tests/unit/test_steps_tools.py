"""run_tools and the commit around it: tool_choice none runs nothing, summary records join
the commit with their tokens and cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tarsy.app import Deps
from tarsy.llm.base import LLMResult
from tarsy.models import LLMInteraction, StepMessage, TokenUsage, ToolCall
from tarsy.steps import ModelCall, ToolRun, build_commit, run_tools
from tarsy.strategies.base import IterationOutcome
from tarsy.tools import CachedToolList, ToolListing, ToolResult

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


def deps(executor: RecordingExecutor) -> Deps:
    # run_tools reads only the config and the tool executor.
    none: Any = None
    return Deps(settings=none, config=CONFIG, store=none, bus=none, tools=executor)


async def test_tool_choice_none_never_runs_returned_calls() -> None:
    executor = RecordingExecutor()
    current = turn(strategy="native-thinking")
    current.request = current.request.model_copy(update={"tool_choice": "none"})
    asked = LLMResult(tool_calls=[ToolCall(id="c1", name="kubernetes.pods_get")])
    call = ModelCall(interaction=interaction(), result=asked)
    assert await run_tools(current, call, deps(executor)) == ToolRun()
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

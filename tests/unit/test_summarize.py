"""shrink_results, branch by branch: as is, truncated, summarized, capped, failed → truncated."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from tarsy.config.schema import LLMProviderConfig, MCPServerConfig
from tarsy.errors import LLMError
from tarsy.llm.base import Budget, Capabilities, GenerateRequest, LLMResult, Progress
from tarsy.models import TokenUsage
from tarsy.tools.base import ToolResult, estimate_tokens
from tarsy.tools.summarize import SUMMARY_SYSTEM, Shrunk, shrink_results

CONFIG = LLMProviderConfig(backend="google-native", model="gemini-2.5-flash")
DEADLINE = 12345.0  # a time.monotonic() deadline, passed through untouched

Reply = LLMResult | LLMError | Callable[[GenerateRequest], LLMResult]


class ScriptedProvider:
    """A provider answering summary requests from a script, recording what it was asked."""

    name = "scripted"
    capabilities = Capabilities()

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[GenerateRequest] = []
        self.budgets: list[Budget] = []

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        self.requests.append(request)
        self.budgets.append(budget)
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError):
            raise reply
        if isinstance(reply, LLMResult):
            return reply
        return reply(request)


def result(
    content: str, *, call_id: str = "c1", name: str = "k8s.logs", error: bool = False
) -> ToolResult:
    return ToolResult(
        call_id=call_id, name=name, arguments={"pod": "api-0"}, content=content,
        full_content=content, is_error=error,
    )  # fmt: skip


def tokens(n: int) -> str:
    """Text of about ``n`` tokens (four characters each)."""
    return "x" * (4 * n)


async def shrink(results: list[ToolResult], provider: ScriptedProvider, **server: object) -> Shrunk:
    servers = {"k8s": MCPServerConfig.model_validate({"url": "http://k8s/mcp", **server})}
    return await shrink_results(
        results, servers, execution_id="e1", step=7, provider=provider, config=CONFIG,
        context="Alert type: crash", budget=DEADLINE,
    )  # fmt: skip


def test_defaults_are_tarsys_and_tarsys_shape_is_accepted() -> None:
    server = MCPServerConfig(url="http://k8s/mcp")
    assert (server.max_result_tokens, server.summary_max_tokens) == (5000, 1000)
    assert server.summarize_large_results
    tarsy_shaped = MCPServerConfig.model_validate(
        {
            "url": "http://k8s/mcp",
            "summarization": {
                "enabled": False,
                "size_threshold_tokens": 2000,
                "summary_max_token_limit": 300,
            },
        }
    )
    assert (tarsy_shaped.max_result_tokens, tarsy_shaped.summary_max_tokens) == (2000, 300)
    assert not tarsy_shaped.summarize_large_results
    with pytest.raises(ValidationError, match="unknown summarization keys"):
        MCPServerConfig.model_validate({"url": "u", "summarization": {"enable": True}})


async def test_results_under_the_threshold_and_errors_pass_as_they_are() -> None:
    provider = ScriptedProvider()
    small = result(tokens(5000), call_id="small")
    failed = result(tokens(9000), call_id="failed", error=True)
    shrunk = await shrink([small, failed], provider)
    assert shrunk.results == [small, failed]
    assert (shrunk.interactions, shrunk.timeline, provider.requests) == ([], [], [])


@pytest.mark.parametrize("summarize", [False, None])
async def test_summarizing_off_or_an_unknown_server_truncates(summarize: bool | None) -> None:
    provider = ScriptedProvider()
    big = result(tokens(6000), name="k8s.logs" if summarize is False else "other.logs")
    shrunk = await shrink([big], provider, summarize_large_results=bool(summarize))
    [shown] = shrunk.results
    assert shown.shown_as == "truncated"
    assert shown.content.startswith(tokens(5000))
    assert "truncated: 4000 more characters not shown" in shown.content
    assert shown.full_content == big.full_content  # the record keeps it whole
    assert (shrunk.interactions, provider.requests) == ([], [])


async def test_a_large_result_is_summarized_with_its_own_interaction_record() -> None:
    usage = TokenUsage(input_tokens=6100, output_tokens=40, total_tokens=6140)
    provider = ScriptedProvider(LLMResult(text="3 restarts, exit code 137", usage=usage))
    big = result(tokens(6000))
    shrunk = await shrink([big], provider)

    [shown] = shrunk.results
    assert shown.shown_as == "summarized"
    assert shown.content == "[summary of a 6000-token result]\n3 restarts, exit code 137"
    [request] = provider.requests
    assert request.messages[0].content == SUMMARY_SYSTEM
    assert "at most 1000 tokens" in request.messages[1].content
    assert (request.config.thinking, request.config.native_tools) == (False, [])
    assert provider.budgets == [DEADLINE]  # the step's deadline, not a token count

    [record] = shrunk.interactions
    assert (record.kind, record.tool_call_id, record.step) == ("tool_summary", "c1", 7)
    assert (record.model, record.provider) == ("gemini-2.5-flash", "scripted")
    assert record.response_text == "3 restarts, exit code 137"
    assert record.tokens == usage and record.error is None
    assert record.duration_ms >= 0
    assert shrunk.usage == usage
    [event] = shrunk.timeline
    assert event.type.value == "mcp_tool_summary"
    # Stored as every summary was: the type's fields under metadata.
    assert event.model_dump()["metadata"] == {
        "call_id": "c1", "tool_name": "logs", "server_name": "k8s",
        "original_tokens": 6000, "summary_tokens": 40,
    }  # fmt: skip


async def test_a_summary_longer_than_asked_is_cut_to_the_limit() -> None:
    provider = ScriptedProvider(LLMResult(text=tokens(500)))
    shrunk = await shrink([result(tokens(3000))], provider, max_result_tokens=2000,
                          summary_max_tokens=200)  # fmt: skip
    [shown] = shrunk.results
    assert shown.shown_as == "summarized"
    summary = shown.content.split("\n", 1)[1]
    assert summary.startswith(tokens(200)) and "truncated" in summary
    assert estimate_tokens(summary) < 250
    assert "at most 200 tokens" in provider.requests[0].messages[1].content


async def test_a_failed_summary_falls_back_to_truncation_with_a_marker() -> None:
    error = LLMError("server", "backend unavailable", code="503")
    error.attempts = 4
    provider = ScriptedProvider(error)
    shrunk = await shrink([result(tokens(6000))], provider)

    [shown] = shrunk.results
    assert shown.shown_as == "truncated"
    assert shown.content.startswith(tokens(5000))
    assert "truncated: 4000 more characters" in shown.content
    assert shown.content.endswith(
        "[summarizing this result failed (503); it was truncated instead]"
    )
    [record] = shrunk.interactions
    assert record.error is not None and record.error.code == "503"
    assert record.attempts == 4
    assert (record.kind, record.tool_call_id, record.response_text) == ("tool_summary", "c1", "")
    assert shrunk.timeline == []
    assert shrunk.usage == TokenUsage()


async def test_summaries_of_one_turn_run_concurrently_and_keep_result_order() -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    async def slow(request: GenerateRequest) -> LLMResult:
        started.append(request.messages[1].content)
        if len(started) == 2:
            both_started.set()
        # Each call waits for the other to have started: sequential calls never would.
        await asyncio.wait_for(both_started.wait(), timeout=10)
        return LLMResult(text="short" if "first" in request.messages[1].content else "second")

    class Concurrent(ScriptedProvider):
        async def generate(
            self, request: GenerateRequest, progress: Progress | None = None,
            *, budget: Budget = None,
        ) -> LLMResult:  # fmt: skip
            self.requests.append(request)
            return await slow(request)

    provider = Concurrent()
    first = result("first " + tokens(6000), call_id="a")
    small = result("ok", call_id="b")
    second = result("second " + tokens(6000), call_id="c")
    shrunk = await shrink([first, small, second], provider)
    assert [r.call_id for r in shrunk.results] == ["a", "b", "c"]
    assert [r.shown_as for r in shrunk.results] == ["summarized", "full", "summarized"]
    assert [i.tool_call_id for i in shrunk.interactions] == ["a", "c"]
    assert shrunk.results[0].content.endswith("short")


async def test_a_small_context_window_lowers_the_threshold_to_a_sixteenth_of_it() -> None:
    small = LLMProviderConfig(
        type="openai-compatible", model="qwen", base_url="http://h/v1", context_window=32768
    )
    servers = {"k8s": MCPServerConfig(url="http://k8s/mcp", summarize_large_results=False)}
    shrunk = await shrink_results(
        [result(tokens(3000))], servers, execution_id="e1", provider=ScriptedProvider(),
        config=small, context="Alert type: crash",
    )  # fmt: skip
    [shown] = shrunk.results
    assert shown.shown_as == "truncated"
    assert shown.content.startswith(tokens(2048))
    assert "truncated: 3808 more characters not shown" in shown.content

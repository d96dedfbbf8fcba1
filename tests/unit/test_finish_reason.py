"""A reply cut at the token limit or blocked is recorded and retried, never a conclusion."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.registry import get_strategy
from tarsy.config import load_config
from tarsy.config.schema import LLMProviderConfig, RetryPolicy
from tarsy.engine.iteration import ModelCall, ToolRun, Turn, decide
from tarsy.engine.messages import execution_id_for
from tarsy.errors import LLMError
from tarsy.llm.base import GenerateRequest, LLMResult, finish_reason
from tarsy.llm.google_native import GoogleNativeProvider
from tarsy.llm.langchain_provider import LangChainProvider
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    LLMInteraction,
    LLMResponseEvent,
    Session,
    ToolCall,
)
from tarsy.settings import Settings
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply

SID = "0b7e5c1a-1111-4222-8333-444455556666"
CONFIG = load_config(Settings())
FAST = RetryPolicy(initial_delay=0.01, max_delay=1.0, empty_response_delay=0.01, max_retries=1)


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


def turn(consecutive_failures: int = 0) -> Turn:
    execution = AgentExecution(
        execution_id=execution_id_for(SID, 0, 0), session_id=SID, stage=0, agent="investigator",
        strategy="single-call", provider="default", step=1, iteration=0, max_iterations=1,
        consecutive_failures=consecutive_failures,
    )  # fmt: skip
    resolved = CONFIG.resolve("default", 0, 0)
    state = IterationState(execution=execution, config=resolved, messages=[])
    strategy = get_strategy("single-call")
    session = Session(
        session_id=SID, alert_type="t", alert_data="d", chain_id="default", status="active"
    )
    return Turn(
        execution=execution, session=session, config=resolved, strategy=strategy,
        state=state, request=strategy.build_request(state), budget=0.0,
    )  # fmt: skip


def call(result: LLMResult) -> ModelCall:
    record = LLMInteraction(step=1, model="m", provider="p", request={})
    return ModelCall(interaction=record, result=result)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("MAX_TOKENS", "length"), ("length", "length"), ("max_tokens", "length"),
        ("SAFETY", "blocked"), ("content_filter", "blocked"), ("refusal", "blocked"),
        ("STOP", "stop"), ("end_turn", "stop"), ("tool_calls", "tool_calls"),
        ("FinishReason.RECITATION", "blocked"), ("something_new", "other"), (None, None),
    ],
)  # fmt: skip
def test_every_vendors_finish_reason_is_normalized(raw: str | None, normalized: str | None) -> None:
    assert finish_reason(raw) == normalized


def test_a_truncated_answer_is_a_failed_attempt_marked_on_the_timeline_not_a_conclusion() -> None:
    result = LLMResult(
        text="## Root cause\nThe pod's database", finish_reason="length",
        raw_finish_reason="MAX_TOKENS",
    )  # fmt: skip
    outcome = decide(turn(), call(result), ToolRun())
    assert (outcome.next, outcome.failed_attempt, outcome.final_analysis) == (
        "continue",
        True,
        None,
    )
    assert outcome.error is not None and outcome.error.code == "truncated"
    [event] = outcome.timeline
    assert isinstance(event, LLMResponseEvent)
    assert event.content == "## Root cause\nThe pod's database"
    assert (event.cut_short, event.finish_reason) == ("truncated", "MAX_TOKENS")


def test_the_retry_of_a_truncated_answer_is_told_it_was_cut_and_must_be_shorter() -> None:
    result = LLMResult(text="The cause " * 50, finish_reason="length", raw_finish_reason="length")
    outcome = decide(turn(), call(result), ToolRun())
    [note] = outcome.messages
    assert note.role == "user"
    assert "cut off at the output-token limit" in note.content and "shorter" in note.content


def test_a_second_truncated_answer_in_a_row_fails_the_execution_and_says_why() -> None:
    result = LLMResult(text="The cause", finish_reason="length", raw_finish_reason="length")
    outcome = decide(turn(consecutive_failures=1), call(result), ToolRun())
    assert outcome.next == "fail"
    assert outcome.error is not None
    assert "cut at its output-token limit" in outcome.error.message


def test_a_blocked_answer_with_tool_calls_is_never_acted_on() -> None:
    result = LLMResult(
        text="", finish_reason="blocked", raw_finish_reason="SAFETY",
        tool_calls=[ToolCall(id="c", name="kubernetes.pods_get", arguments="{}")],
    )  # fmt: skip
    outcome = decide(turn(), call(result), ToolRun())
    assert (outcome.next, outcome.failed_attempt) == ("continue", True)
    assert outcome.error is not None and outcome.error.code == "blocked"
    assert outcome.messages == []


def request(**config: Any) -> GenerateRequest:
    return GenerateRequest(
        execution_id="e",
        messages=[ConversationMessage(role="user", content="Why does api-0 crash?")],
        config=LLMProviderConfig(model="gemini-2.5-flash", retry=FAST, **config),
    )


async def test_gemini_max_tokens_reaches_the_result_on_the_native_backend(
    gemini: FakeGemini,
) -> None:
    gemini.script(FakeReply(text="The root cause is", finish_reason="MAX_TOKENS"))
    provider = GoogleNativeProvider(Settings(GEMINI_API_KEY="k", GEMINI_BASE_URL=gemini.url))
    result = await provider.generate(request(backend="google-native"))
    assert (result.finish_reason, result.raw_finish_reason) == ("length", "MAX_TOKENS")


async def test_gemini_max_tokens_reaches_the_result_on_the_langchain_backend(
    gemini: FakeGemini,
) -> None:
    gemini.script(FakeReply(text="The root cause is", finish_reason="MAX_TOKENS"))
    provider = LangChainProvider(Settings(GEMINI_API_KEY="k", GEMINI_BASE_URL=gemini.url))
    result = await provider.generate(request(backend="langchain"))
    assert result.finish_reason == "length"


async def test_a_gemini_safety_block_with_no_text_is_a_blocked_failure(
    gemini: FakeGemini,
) -> None:
    gemini.script(*[FakeReply(text="", finish_reason="SAFETY")] * 2)
    provider = GoogleNativeProvider(Settings(GEMINI_API_KEY="k", GEMINI_BASE_URL=gemini.url))
    with pytest.raises(LLMError) as caught:
        await provider.generate(request(backend="google-native"))
    assert caught.value.code == "blocked"
    assert "SAFETY" in str(caught.value)

"""The evaluation's LLM judge through the real google-genai SDK, against the fake Gemini server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tarsy.agent.scoring import PROMPT_HASH, JudgeReplyError
from tarsy.settings import Settings
from tarsy_dev.client import SessionView
from tarsy_dev.evals.judging import judge_session
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply

VERDICT = {
    "score": 81,
    "categories": {
        name: {"score": 81, "reason": f"{name} fine"}
        for name in ("logical_flow", "consistency", "tool_relevance", "synthesis_quality")
    },
    "missing_tools": [],
}
VIEW = SessionView(
    session={"alert_type": "kubernetes", "alert_data": "{}", "final_analysis": "## Root cause"},
    stages=[],
    executions=[],
    timeline=[],
)


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def settings(fake: FakeGemini) -> Settings:
    return Settings(GEMINI_API_KEY="judge-key", GEMINI_BASE_URL=fake.url)


def test_judge_session_sends_the_prompt_and_parses_the_verdict(fake: FakeGemini) -> None:
    fake.script(FakeReply(text=json.dumps(VERDICT)))
    score = judge_session(
        VIEW,
        model="gemini-2.5-pro",
        settings=settings(fake),
        available_tools=["kubernetes.pods_list"],
    )
    assert score.score == 81 and score.prompt_hash == PROMPT_HASH
    [call] = fake.calls
    assert call.model == "gemini-2.5-pro" and call.api_key == "judge-key"
    assert "logical_flow" in call.system_text()
    assert "Tools the agents could call: kubernetes.pods_list" in call.last_user_text()
    assert call.generation_config().get("responseMimeType") == "application/json"


def test_a_malformed_verdict_raises(fake: FakeGemini) -> None:
    fake.script(FakeReply(text="I would give it an 8."))
    with pytest.raises(JudgeReplyError):
        judge_session(VIEW, model="gemini-2.5-pro", settings=settings(fake), available_tools=[])

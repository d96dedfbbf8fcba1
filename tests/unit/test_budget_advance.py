"""A spent session budget ends the session after the running stage (issue 15, item 8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.engine.progression import (
    Decision,
    Next,
    after_execution,
    skipped_stages,
    with_budget_note,
)
from tarsy.models import AgentExecution, ExecutionStatus, Session, TokenUsage
from tarsy.settings import Settings

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CONFIG_TEXT = """
agent_chains:
  staged:
    alert_types: [staged]
    max_tokens: 1000
    executive_summary: {summary}
    stages:
      - {{name: triage, agent: investigator}}
      - {{name: deep-dive, agent: investigator}}
      - {{name: remediation, agent: investigator}}
"""


def config(summary: bool) -> TarsyConfig:
    text = CONFIG_TEXT.format(summary=str(summary).lower())
    return load_config(Settings(GEMINI_API_KEY="k"), user_text=text)


def session(tokens: int) -> Session:
    return Session(
        session_id="s1", alert_type="staged", alert_data="{}", chain_id="staged",
        status=ExecutionStatus.ACTIVE, current_stage=0,
        tokens=TokenUsage(input_tokens=tokens, total_tokens=tokens),
    )  # fmt: skip


def first_agent() -> AgentExecution:
    return AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="investigator",
        strategy="single-call", provider="default", status=ExecutionStatus.ACTIVE,
    )  # fmt: skip


def advance_after_first_stage(tokens: int, *, summary: bool = True) -> Decision:
    return after_execution(
        config(summary), session(tokens), first_agent(), ExecutionStatus.COMPLETED,
        "pods OOMKilled", NOW, NOW + timedelta(minutes=1),
    )  # fmt: skip


def test_within_the_budget_the_next_stage_starts() -> None:
    advance = advance_after_first_stage(999)
    assert isinstance(advance, Next) and advance.publish is not None
    assert advance.publish.kind == "start_stage" and advance.publish.stage == 1
    assert advance.session is not None and advance.session.completion_reason is None


def test_a_spent_budget_skips_the_stages_left_and_says_so() -> None:
    advance = advance_after_first_stage(1000)
    assert isinstance(advance, Next) and advance.session is not None and advance.create is not None
    assert advance.create.role == "summary"  # the executive summary still runs
    assert advance.session.completion_reason == "budget"
    assert advance.session.final_analysis == (
        "pods OOMKilled\n\n_(Budget spent: the session used 1,000 tokens of its "
        "1,000-token budget; stages not run: deep-dive, remediation.)_"
    )


def test_without_a_summary_the_session_completes_at_once() -> None:
    advance = advance_after_first_stage(5000, summary=False)
    assert isinstance(advance, Next) and advance.session is not None and advance.publish is None
    assert advance.session.status is ExecutionStatus.COMPLETED
    assert advance.session.completion_reason == "budget"


def test_the_note_names_only_stages_that_did_not_run() -> None:
    chain = config(True).chain("staged")
    assert skipped_stages(chain, 0) == ["deep-dive", "remediation"]
    assert skipped_stages(chain, 2) == []
    assert with_budget_note("done", "spent", []) == "done"
    assert with_budget_note("done", None, ["x"]) == "done"
    assert with_budget_note("", "spent", ["x"]) == "_(Budget spent: spent; stages not run: x.)_"

"""The compact path as pure functions: the answer call, its answer, and the bounded follow-up."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tarsy.agent.compact import (
    FINAL_REQUEST,
    FOLLOW_UP_HEAD,
    STRUCTURED_GUIDANCE,
    TEXT_GUIDANCE,
    CompactAnswer,
    answer_schema,
    brief_tokens,
    finding_numbers,
    follow_up_result_chars,
    opening_findings,
    parse_answer,
)
from tarsy.agent.prompts import delimit, relevant_runbook
from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.compact import EMPTY_ANSWER, CompactStrategy
from tarsy.agent.strategies.registry import get_strategy
from tarsy.agent.strategies.schema_actions import (
    TrailingGuidanceActions,
    signature,
    tools_as_text,
)
from tarsy.config.schema import CompactPathSettings, LLMProviderConfig, ResolvedAgentConfig
from tarsy.evidence.brief import findings_text
from tarsy.evidence.snapshot import Detection, ObjectRef
from tarsy.llm.base import Capabilities, LLMResult, ToolDefinition
from tarsy.models import (
    AgentExecution,
    ConversationMessage,
    FinalAnalysisEvent,
    LLMResponseEvent,
)
from tarsy.tools.base import ToolListing, ToolResult

POD_LOG = ToolDefinition(
    name="cluster.pods_log",
    description="Read a pod's log",
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "previous": {"type": "boolean", "default": False},
        },
        "required": ["name"],
    },
)
DB_HOST_EDITED = Detection(
    check="configmap_edited", severity=1, evidence=["gather-001"],
    subject=ObjectRef(kind="ConfigMap", name="api-config"),
    finding="ConfigMap api-config key DB_HOST changed from db to db.prod before the alert",
)  # fmt: skip
NO_SUCH_HOST = Detection(
    check="log_signals", severity=2, evidence=["gather-002"],
    subject=ObjectRef(kind="Pod", name="api-0"),
    finding="Pod api-0 log: name resolution failing for db.prod",
)  # fmt: skip
COMPACT = get_strategy("compact")
assert isinstance(COMPACT, CompactStrategy)
STRATEGY: CompactStrategy = COMPACT
OPENING = [
    ConversationMessage(role="system", content=f"You are investigator.\n\n{STRUCTURED_GUIDANCE}"),
    ConversationMessage(
        role="user",
        content="Alert: pod api-0 crash loops.\n\n"
        + delimit("FINDINGS", findings_text([DB_HOST_EDITED, NO_SUCH_HOST])),
    ),
]


def state(
    messages: list[ConversationMessage] | None = None,
    *,
    iteration: int = 0,
    follow_up_calls: int = 2,
    structured: bool = True,
    tools: list[ToolDefinition] | None = None,
) -> IterationState:
    execution = AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="investigator",
        strategy="compact", provider="local", step=iteration + 2, iteration=iteration,
        max_iterations=20,
    )  # fmt: skip
    provider = LLMProviderConfig(
        type="openai-compatible", model="qwen2.5-1.5b-instruct", base_url="http://127.0.0.1:1/v1",
        max_output_tokens=2048, structured_output=structured,
    )  # fmt: skip
    config = ResolvedAgentConfig(
        agent="investigator", instructions="Investigate.", custom_instructions="",
        iteration_strategy="schema-actions", provider_name="local", provider=provider,
        max_iterations=20, mcp_servers=["cluster"],
        compact=CompactPathSettings(follow_up_calls=follow_up_calls, output_tokens=300),
    )  # fmt: skip
    return IterationState(
        execution=execution,
        config=config,
        messages=list(messages or OPENING),
        tools=ToolListing(tools=[POD_LOG] if tools is None else tools),
    )


def answer(**fields: Any) -> LLMResult:
    body = {
        "broken": "Pod api-0 restarts.",
        "root_cause": "ConfigMap api-config key DB_HOST names db.prod, which has no Service.",
        "findings": [1],
        "fix": "Set DB_HOST back to db in ConfigMap api-config.",
        "evidence_enough": True,
        "check_next": "",
        **fields,
    }
    return LLMResult(text=json.dumps(body))


# ─── the answer call ──────────────────────────────────────────────────────────


def test_the_answer_call_offers_no_tools_and_limits_its_output() -> None:
    request = STRATEGY.build_request(state())
    assert request.tools == []
    assert request.tool_choice == "none"
    assert request.config.max_output_tokens == 300
    assert request.response_schema == answer_schema(300)
    # The opening already holds the answer form: the request is the stored conversation.
    assert [m.content for m in request.messages] == [m.content for m in OPENING]


def test_an_opening_without_the_form_gets_it_and_a_free_text_model_gets_lines() -> None:
    plain = [ConversationMessage(role="system", content="You are investigator."), OPENING[1]]
    request = STRATEGY.build_request(state(plain, structured=False))
    assert request.response_schema is None
    assert request.messages[0].content.endswith(TEXT_GUIDANCE)


def test_an_answer_with_enough_evidence_is_the_final_analysis() -> None:
    outcome = STRATEGY.on_result(state(), answer(), [])
    assert outcome.next == "complete"
    assert outcome.final_analysis is not None
    assert outcome.final_analysis.startswith("**What is broken:** Pod api-0 restarts.")
    assert "**Root cause:** ConfigMap api-config key DB_HOST" in outcome.final_analysis
    final = [e for e in outcome.timeline if isinstance(e, FinalAnalysisEvent)]
    assert final and final[0].compact == "answer"
    assert STRATEGY.tool_calls(state(), answer()) == []


def test_an_answer_that_asks_for_more_opens_a_bounded_follow_up() -> None:
    reply = answer(evidence_enough=False, check_next="the previous container's log")
    outcome = STRATEGY.on_result(state(), reply, [])
    assert outcome.next == "continue"
    assert outcome.final_analysis is None
    follow = outcome.messages[-1]
    assert follow.role == "user" and follow.content.startswith(FOLLOW_UP_HEAD)
    assert "the previous container's log" in follow.content and "at most 2 calls" in follow.content
    shown = [e for e in outcome.timeline if isinstance(e, LLMResponseEvent)]
    assert shown and shown[0].compact == "not_enough"


def test_without_tools_or_follow_up_calls_the_answer_stands() -> None:
    reply = answer(evidence_enough=False, check_next="events")
    assert STRATEGY.on_result(state(follow_up_calls=0), reply, []).next == "complete"
    assert STRATEGY.on_result(state(tools=[]), reply, []).next == "complete"


def test_free_text_is_the_analysis_and_an_empty_reply_is_asked_again_once() -> None:
    prose = STRATEGY.on_result(state(), LLMResult(text="The pod lacks its ConfigMap."), [])
    assert prose.next == "complete"
    assert prose.final_analysis == "The pod lacks its ConfigMap."
    empty = STRATEGY.on_result(state(), LLMResult(text=""), [])
    assert empty.next == "continue"
    assert empty.messages[-1].content == EMPTY_ANSWER
    again = STRATEGY.on_result(state([*OPENING, *empty.messages], iteration=1), LLMResult(), [])
    assert again.next == "fail"
    assert again.error is not None and "empty twice" in again.error.message


# ─── the follow-up ────────────────────────────────────────────────────────────


def followed(reply: LLMResult) -> list[ConversationMessage]:
    return [*OPENING, *STRATEGY.on_result(state(), reply, []).messages]


def test_the_follow_up_calls_tools_with_its_guidance_last_and_the_opening_unchanged() -> None:
    messages = followed(answer(evidence_enough=False, check_next="logs"))
    turn = state(messages, iteration=1)
    request = STRATEGY.build_request(turn)
    # The opening and the answer are sent as read before: a prefix cache keeps them.
    assert [m.content for m in request.messages[:3]] == [m.content for m in messages[:3]]
    assert request.messages[-1].content.startswith(FOLLOW_UP_HEAD)
    assert "cluster.pods_log(name: string, previous?: boolean = false)" in (
        request.messages[-1].content
    )
    assert request.response_schema is not None
    call = {"thought": "t", "action": "call_tool", "tool": "cluster.pods_log",
            "arguments": {"name": "api-0"}}  # fmt: skip
    jsonschema.validate(call, request.response_schema)
    calls = STRATEGY.tool_calls(turn, LLMResult(text=json.dumps(call)))
    assert [c.name for c in calls] == ["cluster.pods_log"]
    assert isinstance(STRATEGY.follow_up(turn), TrailingGuidanceActions)


def test_a_follow_up_result_is_shown_compact_within_its_share_of_the_reading_time() -> None:
    messages = followed(answer(evidence_enough=False, check_next="logs"))
    turn = state(messages, iteration=1)
    reply = {"thought": "t", "action": "call_tool", "tool": "cluster.pods_log",
             "arguments": {"name": "api-0"}}  # fmt: skip
    log = "\n".join(
        f"2026-12-07T10:{n % 60:02d}:00Z request {n} served in 12ms" for n in range(900)
    )
    result = ToolResult(
        call_id="x", name="cluster.pods_log", arguments={"name": "api-0"}, content=log,
        full_content=log,
    )  # fmt: skip
    outcome = STRATEGY.on_result(turn, LLMResult(text=json.dumps(reply)), [result])
    # No reading speed is declared: the share is brief_tokens (1,500) over 2 calls, 2.5 a token.
    limit = follow_up_result_chars(Capabilities(), CompactPathSettings(follow_up_calls=2))
    assert limit == 750 * 2.5
    shown = outcome.messages[-1].content
    assert len(log) > 20 * limit and 0 < len(shown) < 2 * limit
    # A log is shown as the brief shows one: its newest lines, the rest counted.
    assert "earlier lines not shown" in shown and "request 899 served" in shown
    fast = Capabilities(prompt_tokens_per_second=60.0)
    assert follow_up_result_chars(fast, CompactPathSettings(follow_up_calls=3)) == 1200 * 2.5


def test_the_follow_up_concludes_after_its_calls() -> None:
    messages = followed(answer(evidence_enough=False, check_next="logs"))
    for n in range(2):  # two tool turns: the follow-up's whole allowance
        arguments = {"name": f"p{n}"}
        reply = {"thought": "t", "action": "call_tool", "tool": "cluster.pods_log",
                 "arguments": arguments}  # fmt: skip
        turn = state(messages, iteration=1 + n)
        schema = STRATEGY.build_request(turn).response_schema or {}
        jsonschema.validate(reply, schema)  # a tool call is still allowed
        result = ToolResult(
            call_id="x", name="cluster.pods_log", arguments=arguments, content="log",
            full_content="log",
        )  # fmt: skip
        outcome = STRATEGY.on_result(turn, LLMResult(text=json.dumps(reply)), [result])
        assert outcome.next == "continue"
        messages += outcome.messages
    last = state(messages, iteration=3)
    request = STRATEGY.build_request(last)
    # The follow-up ends in the same fixed form as the first answer, without tools.
    assert request.response_schema == answer_schema(300) and request.tool_choice == "none"
    assert request.messages[-1].content.endswith(FINAL_REQUEST)
    assert STRATEGY.tool_calls(last, answer()) == []
    still_unsure = answer(evidence_enough=False, check_next="more logs")
    outcome = STRATEGY.on_result(last, still_unsure, [])
    assert outcome.next == "complete"  # its last answer stands, however unsure
    assert outcome.final_analysis is not None
    assert outcome.final_analysis.startswith("**What is broken:** Pod api-0 restarts.")


def test_a_final_answer_during_the_follow_up_concludes_it() -> None:
    messages = followed(answer(evidence_enough=False, check_next="logs"))
    turn = state(messages, iteration=1)
    cause = "ConfigMap api-config key DB_HOST names db.prod."
    final = {"thought": "t", "action": "final_answer", "answer": cause}
    outcome = STRATEGY.on_result(turn, LLMResult(text=json.dumps(final)), [])
    assert outcome.next == "complete"
    assert outcome.final_analysis == cause


# ─── the answer's forms ───────────────────────────────────────────────────────


def test_a_json_answer_cut_at_the_output_limit_keeps_what_it_wrote() -> None:
    cut = '{"broken": "Pod api-0 restarts.", "root_cause": "Memory limit 64Mi is too lo'
    parsed = parse_answer(cut)
    assert parsed is not None
    assert parsed.broken == "Pod api-0 restarts."
    assert parsed.root_cause == "Memory limit 64Mi is too lo"
    assert parsed.evidence_enough is True


def test_an_answer_in_labelled_lines_is_read() -> None:
    text = (
        "**What is broken:** checkout returns 503.\n"
        "Root cause: NetworkPolicy deny-all in shop blocks port 8080,\n"
        "added before the alert.\n"
        "- Evidence: [E4] the policy.\n"
        "Fix: remove deny-all.\n"
        "Evidence enough: no\n"
        "Check next: the policy's spec\n"
    )
    parsed = parse_answer(text)
    assert parsed == CompactAnswer(
        broken="checkout returns 503.",
        root_cause="NetworkPolicy deny-all in shop blocks port 8080, added before the alert.",
        findings=[],
        evidence="[E4] the policy.",
        fix="remove deny-all.",
        evidence_enough=False,
        check_next="the policy's spec",
    )


def test_the_analysis_quotes_the_cited_findings_word_for_word_in_the_order_cited() -> None:
    outcome = STRATEGY.on_result(state(), answer(findings=[2, 1, 2, 9]), [])
    assert outcome.final_analysis is not None
    evidence = outcome.final_analysis.split("**Evidence:**\n", 1)[1].split("\n\n")[0]
    assert evidence.splitlines() == [
        "- (symptom) Pod api-0 log: name resolution failing for db.prod [E3]",
        "- (likely cause) ConfigMap api-config key DB_HOST changed from db to db.prod "
        "before the alert [E2]",
    ]


def test_an_answer_citing_nothing_keeps_its_own_evidence_text_or_none() -> None:
    own = STRATEGY.on_result(state(), answer(findings=[], evidence="the log says so"), [])
    assert own.final_analysis is not None
    assert "**Evidence:** the log says so" in own.final_analysis
    bare = STRATEGY.on_result(state(), answer(findings=[]), [])
    assert bare.final_analysis is not None and "Evidence" not in bare.final_analysis


def test_findings_are_read_however_a_small_model_cites_them() -> None:
    assert finding_numbers([2, 5]) == [2, 5]
    assert finding_numbers(["2", "#5"]) == [2, 5]
    assert finding_numbers("2, 5 and 7") == [2, 5, 7]
    assert finding_numbers(["3. (likely cause) Service db has 0 endpoints on port 5432"]) == [3]
    assert finding_numbers("[E2] the log") == []
    assert finding_numbers(True) == [] and finding_numbers(None) == []
    cut = '{"broken": "x", "root_cause": "y", "findings": [4, 1'
    parsed = parse_answer(cut)
    assert parsed is not None and parsed.findings == [4, 1]
    lines = parse_answer("Root cause: y\nFindings: 1 and 3\nFix: z")
    assert lines is not None and lines.findings == [1, 3]


def test_the_findings_are_read_back_from_the_opening_they_were_written_in() -> None:
    assert opening_findings(OPENING) == {
        1: "(likely cause) ConfigMap api-config key DB_HOST changed from db to db.prod "
        "before the alert [E2]",
        2: "(symptom) Pod api-0 log: name resolution failing for db.prod [E3]",
    }
    assert opening_findings([ConversationMessage(role="user", content="no findings")]) == {}


def test_text_without_any_part_is_no_answer() -> None:
    assert parse_answer("") is None
    assert parse_answer("Fixing this needs more data.") is None
    assert parse_answer('{"evidence_enough": true}') is None


# ─── sizing ───────────────────────────────────────────────────────────────────


def test_the_brief_is_what_the_reading_time_leaves_within_the_budget() -> None:
    settings = CompactPathSettings(read_seconds=60, brief_tokens=1500)
    known = Capabilities(prompt_tokens_per_second=35.0)
    assert brief_tokens(known, settings, budget_tokens=6000, rest_tokens=800) == 35 * 60 - 800
    fast = Capabilities(prompt_tokens_per_second=1000.0)
    assert brief_tokens(fast, settings, budget_tokens=6000, rest_tokens=800) == 6000
    assert brief_tokens(Capabilities(), settings, budget_tokens=6000, rest_tokens=800) == 1500
    slow = Capabilities(prompt_tokens_per_second=5.0)
    assert brief_tokens(slow, settings, budget_tokens=6000, rest_tokens=800) == 300


def test_a_long_runbook_keeps_the_sections_about_the_alert_in_order() -> None:
    runbook = "\n".join(
        [
            "# Service runbook",
            "General notes. " * 20,
            "## Disk full",
            "Clean the volume. " * 20,
            "## KubePodCrashLooping",
            "Read the previous container's log and the ConfigMap. " * 4,
            "## Certificates",
            "Renew the certificate. " * 20,
        ]
    )
    shown = relevant_runbook(runbook, ["KubePodCrashLooping", "pod api-0 crashloop"], 400)
    assert shown.startswith("## KubePodCrashLooping")
    assert "Renew" not in shown and len(shown) <= 400
    assert relevant_runbook("short", ["x"], 400) == "short"


def test_a_tool_signature_states_arguments_once() -> None:
    assert signature(POD_LOG) == "(name: string, previous?: boolean = false)"
    text = tools_as_text([POD_LOG])
    assert "schema" not in text and "cluster.pods_log(name: string" in text


# ─── the answer's bounds ──────────────────────────────────────────────────────


def _longest_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """The longest answer ``schema`` admits: every text at its limit, every finding cited."""
    properties = schema["properties"]
    answer: dict[str, Any] = {
        name: "w" * spec["maxLength"]
        for name, spec in properties.items()
        if spec["type"] == "string"
    }
    answer["findings"] = list(range(10, 10 + properties["findings"]["maxItems"]))
    answer["evidence_enough"] = False
    return answer


def test_the_longest_answer_the_schema_admits_fits_the_output_limit() -> None:
    # A cut answer is no conclusion: the grammar must close every part before the limit.
    # Three characters a token is the count the bounds assume; prose runs about four.
    for output_tokens in (200, 300, 600, 1200, 4000):
        schema = answer_schema(output_tokens)
        longest = _longest_answer(schema)
        jsonschema.validate(longest, schema)
        assert len(json.dumps(longest)) / 3 <= output_tokens


def test_the_schema_refuses_a_repeated_list_and_a_runaway_text() -> None:
    schema = answer_schema(600)
    longest = _longest_answer(schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**longest, "findings": list(range(1, 30))}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**longest, "root_cause": longest["root_cause"] + "w"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**longest, "findings": [0]}, schema)


def test_no_text_bound_exceeds_what_llama_cpp_compiles() -> None:
    # llama.cpp writes maxLength N as char{0,N} and refuses repetition counts of a few
    # thousand; a large output limit must not produce one.
    schema = answer_schema(8192)
    lengths = [s["maxLength"] for s in schema["properties"].values() if "maxLength" in s]
    assert lengths and max(lengths) <= 1500

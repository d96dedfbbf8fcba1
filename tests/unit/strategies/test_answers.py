"""Small-model care: a copied template is no answer, an answer naming no evidence is nudged once,
and the retry of a cut reply is told so."""

from __future__ import annotations

import json

import pytest

from tarsy.agent.strategies import answers, finish
from tarsy.agent.strategies.base import IterationState
from tarsy.agent.strategies.native_thinking import (
    ChatStrategy,
    NativeThinkingStrategy,
    NativeToolsStrategy,
)
from tarsy.agent.strategies.react import ReActStrategy
from tarsy.agent.strategies.schema_actions import SchemaActionsStrategy, unwritten_answer
from tarsy.config.schema import LLMProviderConfig, ResolvedAgentConfig
from tarsy.llm.base import LLMResult, ToolDefinition
from tarsy.models import AgentExecution, ConversationMessage, ErrorInfo, LLMResponseEvent
from tarsy.tools.base import ToolListing
from tests.unit.timeline_events import expect

PODS = ToolDefinition(
    name="cluster.pods_get",
    description="Get one pod",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}},
)
POD_YAML = """\
metadata:
  name: checkout-api-5f7d9c
  namespace: shop
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{}'
spec:
  containers:
  - image: registry.example.com/checkout-api:2.4.1
    envFrom:
    - configMapRef: {name: checkout-config}
status:
  phase: Running
"""
NAMED = "The ConfigMap checkout-config points the pod at a host that does not exist."
UNNAMED = "Your final analysis is in Markdown."


def conversation(*evidence: ConversationMessage) -> list[ConversationMessage]:
    return [
        ConversationMessage(role="system", content="You are investigator."),
        ConversationMessage(role="user", content="Pod checkout-api-5f7d9c crash loops."),
        *evidence,
    ]


def observed(text: str = POD_YAML) -> list[ConversationMessage]:
    return conversation(
        ConversationMessage(role="assistant", content="Thought: look.\nAction: cluster.pods_get"),
        ConversationMessage(role="user", content=f"Observation: {text}"),
    )


def state(
    strategy: str,
    messages: list[ConversationMessage],
    *,
    iteration: int = 1,
    max_iterations: int = 5,
) -> IterationState:
    execution = AgentExecution(
        execution_id="s1-s00-a00", session_id="s1", stage=0, agent="investigator",
        strategy=strategy, provider="default", step=iteration + 1, iteration=iteration,
        max_iterations=max_iterations,
    )  # fmt: skip
    config = ResolvedAgentConfig(
        agent="investigator", instructions="Investigate.", custom_instructions="",
        iteration_strategy=strategy, provider_name="default",
        provider=LLMProviderConfig(backend="google-native", model="m"),
        max_iterations=max_iterations, mcp_servers=["cluster"],
    )  # fmt: skip
    return IterationState(
        execution=execution, config=config, messages=messages, tools=ToolListing(tools=[PODS])
    )


# ─── the pure functions ───────────────────────────────────────────────────────


def test_names_are_lower_case_dashed_or_dotted_tokens_of_four_characters_or_more() -> None:
    names = answers.names_in(POD_YAML)
    assert {"checkout-api-5f7d9c", "checkout-config", "registry.example.com"} <= names
    assert "checkout-api" in names  # the image's name, before its tag


def test_common_words_versions_and_kubernetes_own_keys_are_no_names() -> None:
    text = "e.g. re-run kube-system v1.27.3 2.4.1 last-applied-configuration app.kubernetes.io"
    assert answers.names_in(text) == set()
    assert "kubectl.kubernetes.io" not in answers.names_in(POD_YAML)


def test_upper_case_and_underscored_tokens_are_no_names() -> None:
    assert answers.names_in("DATABASE_HOST Pod-A kubernetes.pods_list") == set()


def test_a_dotted_host_gives_its_dashed_service_name_too() -> None:
    assert "payments-db" in answers.names_in("dial payments-db.payments.svc.cluster.local:5432")


def test_the_evidence_is_the_tool_results_not_the_alert_nor_the_models_arguments() -> None:
    messages = [
        ConversationMessage(role="user", content="Alert: pod alert-only-pod crash loops"),
        ConversationMessage(role="tool", content="node worker-node-1 Ready"),
        ConversationMessage(
            role="user", content='Observation from cluster.pods_get {"name": "guessed-pod"}:\nok'
        ),
        ConversationMessage(role="user", content="Observation: pod queue-worker-0 OOMKilled"),
        ConversationMessage(
            role="user", content="Observation: Error in reasoning - use server.tool names"
        ),
    ]
    assert answers.evidence_names(messages) == {"worker-node-1", "queue-worker-0"}


def test_the_opening_messages_evidence_section_counts_and_its_alert_data_does_not() -> None:
    opening = (
        "<<<BEGIN ALERT DATA>>>\npod alert-only-pod\n<<<END ALERT DATA>>>\n\n"
        "<<<BEGIN FINDINGS>>>\nquota shop-quota exceeded\n<<<END FINDINGS>>>\n\n"
        "<<<BEGIN EVIDENCE>>>\npod shop-api-0 Pending\n<<<END EVIDENCE>>>"
    )
    messages = [ConversationMessage(role="user", content=opening)]
    assert answers.evidence_names(messages) == {"shop-quota", "shop-api-0"}


def test_an_answer_naming_evidence_in_other_case_is_accepted() -> None:
    assert answers.unnamed_evidence("CHECKOUT-CONFIG is wrong.", observed()) is None


def test_an_answer_naming_the_workload_of_a_pod_in_the_evidence_is_accepted() -> None:
    pods = observed("payments-api-7d9f8b6c5-x2k4q   0/1   CrashLoopBackOff")
    assert answers.unnamed_evidence("The payments-api pods crash.", pods) is None
    assert answers.unnamed_evidence("The payments pods crash.", pods) is not None
    assert answers.unnamed_evidence("The payments-api-7d9f8b6c5-x2k4q-z pod.", pods) is not None


def test_an_answer_naming_nothing_from_the_evidence_is_nudged() -> None:
    nudge = answers.unnamed_evidence(UNNAMED, observed())
    assert nudge is not None and answers.NUDGE_MARKER in nudge


def test_the_nudge_comes_once_per_conversation() -> None:
    messages = [*observed(), ConversationMessage(role="user", content=f"x {answers.NUDGE}")]
    assert answers.unnamed_evidence(UNNAMED, messages) is None


def test_without_evidence_there_is_nothing_to_name_and_no_nudge() -> None:
    assert answers.unnamed_evidence(UNNAMED, conversation()) is None


@pytest.mark.parametrize(
    "answer",
    [
        "<your final analysis in Markdown>",
        "[your analysis here]",
        "Final Answer: <your complete analysis>",
        "Thought: I have enough information to answer.\nFinal Answer: <your complete analysis>",
    ],
)
def test_a_placeholder_or_template_copied_back_is_no_answer(answer: str) -> None:
    assert answers.unwritten_answer(answer, ("Thought: I have enough information to answer.",))


@pytest.mark.parametrize(
    "answer",
    [
        "The probe calls <host>/healthz, which returns 503 since release 2.3.0.",
        "See [the runbook](https://runbooks.example.com/db) and restore the ConfigMap.",
        "Root cause: <checkout-config> names a host that does not exist.\nFix: restore it.",
    ],
)
def test_an_analysis_with_brackets_in_it_is_an_answer(answer: str) -> None:
    assert answers.unwritten_answer(answer) is None


def test_schema_actions_takes_its_guidance_copied_back_as_no_answer() -> None:
    copied = "The final analysis says what is broken, the root cause and its evidence, "
    assert unwritten_answer("<what the evidence shows>")
    assert unwritten_answer(copied) is None  # a part of a line is not the line


# ─── schema-actions ───────────────────────────────────────────────────────────


def final(answer: str) -> LLMResult:
    return LLMResult(text=json.dumps({"thought": "t", "action": "final_answer", "answer": answer}))


def schema_observed() -> list[ConversationMessage]:
    call = json.dumps({"thought": "t", "action": "call_tool", "tool": "cluster.pods_get",
                       "arguments": {"name": "x"}})  # fmt: skip
    return conversation(
        ConversationMessage(role="assistant", content=call),
        ConversationMessage(
            role="user", content=f'Observation from cluster.pods_get {{"name": "x"}}:\n{POD_YAML}'
        ),
    )


def test_schema_actions_nudges_an_answer_that_names_no_evidence_then_accepts_the_next() -> None:
    strategy = SchemaActionsStrategy()
    first = strategy.on_result(state("schema-actions", schema_observed()), final(UNNAMED), [])
    assert (first.next, first.final_analysis) == ("continue", None)
    assert expect(first.timeline[-1], LLMResponseEvent).nudge == "unnamed_evidence"
    assert answers.NUDGE_MARKER in first.messages[1].content
    again = state("schema-actions", [*schema_observed(), *first.messages], iteration=2)
    second = strategy.on_result(again, final(UNNAMED), [])
    assert (second.next, second.final_analysis) == ("complete", UNNAMED)


def test_schema_actions_accepts_at_once_an_answer_that_names_the_evidence() -> None:
    outcome = SchemaActionsStrategy().on_result(
        state("schema-actions", schema_observed()), final(NAMED), []
    )
    assert (outcome.next, outcome.final_analysis) == ("complete", NAMED)


def test_schema_actions_does_not_nudge_on_the_last_iteration() -> None:
    st = state("schema-actions", schema_observed(), iteration=4, max_iterations=5)
    outcome = SchemaActionsStrategy().on_result(st, final(UNNAMED), [])
    assert outcome.next == "complete"


# ─── react ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "text",
    [
        "Thought: I have enough information to answer.\nFinal Answer: <your complete analysis>",
        "Thought: done\nFinal Answer: [your complete analysis]",
    ],
)
def test_react_answers_its_template_copied_back_with_feedback(text: str) -> None:
    outcome = ReActStrategy().on_result(state("react", observed()), LLMResult(text=text), [])
    assert (outcome.next, outcome.final_analysis) == ("continue", None)
    feedback = outcome.messages[1].content
    assert feedback.startswith("Observation: Error in reasoning")
    assert "placeholder from the instructions" in feedback
    assert "placeholder" in (expect(outcome.timeline[-1], LLMResponseEvent).answer_error or "")


def test_react_conclusion_with_a_template_answer_keeps_the_models_own_thought() -> None:
    st = state("react", observed(), iteration=5, max_iterations=5)
    text = "Thought: checkout-config names a dead host.\nFinal Answer: <your complete analysis>"
    outcome = ReActStrategy().on_result(st, LLMResult(text=text), [])
    assert outcome.next == "complete"
    assert outcome.final_analysis is not None
    assert outcome.final_analysis.endswith("checkout-config names a dead host.")


def test_react_conclusion_with_only_the_template_fails_with_the_reason() -> None:
    st = state("react", observed(), iteration=5, max_iterations=5)
    text = "Thought: I have enough information to answer.\nFinal Answer: <your complete analysis>"
    outcome = ReActStrategy().on_result(st, LLMResult(text=text), [])
    assert outcome.next == "fail"


def test_react_nudges_an_answer_that_names_no_evidence_once() -> None:
    strategy = ReActStrategy()
    text = f"Thought: done.\nFinal Answer: {UNNAMED}"
    first = strategy.on_result(state("react", observed()), LLMResult(text=text), [])
    assert first.next == "continue"
    assert expect(first.timeline[-1], LLMResponseEvent).nudge == "unnamed_evidence"
    again = state("react", [*observed(), *first.messages], iteration=2)
    second = strategy.on_result(again, LLMResult(text=text), [])
    assert (second.next, second.final_analysis) == ("complete", UNNAMED)


def test_react_accepts_at_once_an_answer_that_names_the_evidence() -> None:
    text = f"Thought: done.\nFinal Answer: {NAMED}"
    outcome = ReActStrategy().on_result(state("react", observed()), LLMResult(text=text), [])
    assert (outcome.next, outcome.final_analysis) == ("complete", NAMED)


# ─── native tools ─────────────────────────────────────────────────────────────


def tool_observed() -> list[ConversationMessage]:
    return conversation(ConversationMessage(role="tool", content=POD_YAML, tool_call_id="c"))


def test_native_tools_nudges_an_answer_that_names_no_evidence_once() -> None:
    strategy = NativeToolsStrategy()
    first = strategy.on_result(state("native-tools", tool_observed()), LLMResult(text=UNNAMED), [])
    assert first.next == "continue"
    assert [m.role for m in first.messages] == ["assistant", "user"]
    again = state("native-tools", [*tool_observed(), *first.messages], iteration=2)
    second = strategy.on_result(again, LLMResult(text=UNNAMED), [])
    assert (second.next, second.final_analysis) == ("complete", UNNAMED)


@pytest.mark.parametrize("strategy", [NativeThinkingStrategy(), ChatStrategy()])
def test_native_thinking_and_chat_accept_any_answer_as_before(
    strategy: NativeThinkingStrategy,
) -> None:
    outcome = strategy.on_result(state(strategy.name, tool_observed()), LLMResult(text=UNNAMED), [])
    assert outcome.next == "complete"


# ─── a reply cut at the token limit ───────────────────────────────────────────


def test_the_retry_of_a_cut_reply_is_told_it_was_cut_and_must_be_shorter() -> None:
    error = ErrorInfo(message="cut", code="truncated", retryable=True)
    [note] = finish.retry_messages(error, 2048)
    assert note.role == "user"
    assert "cut off at the output-token limit (2,048 tokens)" in note.content
    assert "shorter" in note.content


def test_a_blocked_reply_adds_nothing_to_the_conversation() -> None:
    error = ErrorInfo(message="blocked", code="blocked", retryable=True)
    assert finish.retry_messages(error) == []

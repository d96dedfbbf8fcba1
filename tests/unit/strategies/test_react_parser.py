"""Tests of the ReAct parser (seed 000 Q2, points 1-8)."""

from __future__ import annotations

from typing import Any

import pytest

from tarsy.agent.strategies.react_parser import (
    FORMAT_REMINDER,
    ActionInputError,
    ReActResult,
    continuation_prompt,
    parse_action_input,
    parse_react,
)

TOOLS = frozenset(
    {
        "kubernetes-server.resources_get",
        "kubernetes-server.pods_log",
        "kubernetes-server.events_list",
        "prometheus.query",
    }
)


def parse(text: str) -> ReActResult:
    return parse_react(text, TOOLS)


# --------------------------------------------------------------------------- (1) sections


def test_standard_thought_action_input() -> None:
    result = parse(
        "Thought: I need to check the pod status\n"
        "Action: kubernetes-server.resources_get\n"
        'Action Input: {"resource_type": "pods", "namespace": "production"}'
    )
    assert result.kind == "action"
    assert result.thought == "I need to check the pod status"
    assert result.action == "kubernetes-server.resources_get"
    assert result.action_input == {"resource_type": "pods", "namespace": "production"}
    assert result.raw_action_input == '{"resource_type": "pods", "namespace": "production"}'
    assert result.sections_found == ["thought", "action", "action_input"]
    assert result.error is None
    assert result.stop_reason is None
    assert result.feedback() is None


def test_multiline_thought_and_multiline_json_input() -> None:
    result = parse(
        "Thought: The alert says the pod web-7f9 in namespace shop is crash-looping.\n"
        "I should first look at its recent logs to find the exit reason.\n"
        "\n"
        "Then I can check events.\n"
        "Action: kubernetes-server.pods_log\n"
        "Action Input: {\n"
        '  "name": "web-7f9",\n'
        '  "namespace": "shop",\n'
        '  "tail": 200\n'
        "}\n"
    )
    assert result.kind == "action"
    assert result.thought == (
        "The alert says the pod web-7f9 in namespace shop is crash-looping.\n"
        "I should first look at its recent logs to find the exit reason.\n"
        "\n"
        "Then I can check events."
    )
    assert result.action_input == {"name": "web-7f9", "namespace": "shop", "tail": 200}


def test_multiline_final_answer_keeps_structure() -> None:
    text = (
        "Thought: I have everything I need.\n"
        "Final Answer: ## Root cause\n"
        "The container is OOMKilled.\n"
        "\n"
        "## Remediation\n"
        "- raise the memory limit to 512Mi\n"
        "  - and watch the p99 latency\n"
    )
    result = parse(text)
    assert result.kind == "final_answer"
    assert result.thought == "I have everything I need."
    assert result.final_answer == (
        "## Root cause\nThe container is OOMKilled.\n\n## Remediation\n"
        "- raise the memory limit to 512Mi\n  - and watch the p99 latency"
    )
    assert result.sections_found == ["thought", "final_answer"]


def test_section_content_on_following_lines() -> None:
    result = parse(
        "Thought:\nLet me list events.\nAction:\nkubernetes-server.events_list\n"
        'Action Input:\n{"namespace": "shop"}'
    )
    assert result.kind == "action"
    assert result.thought == "Let me list events."
    assert result.action == "kubernetes-server.events_list"
    assert result.action_input == {"namespace": "shop"}


def test_bare_thought_header_without_colon() -> None:
    result = parse("Thought\nThe pod is fine.\nFinal Answer: Nothing to fix.")
    assert result.kind == "final_answer"
    assert result.thought == "The pod is fine."
    assert result.final_answer == "Nothing to fix."


def test_repeated_thoughts_are_joined() -> None:
    result = parse("Thought: first idea\nThought: second idea\nFinal Answer: done")
    assert result.thought == "first idea\n\nsecond idea"
    assert result.sections_found == ["thought", "final_answer"]


def test_missing_thought_is_allowed() -> None:
    result = parse('Action: prometheus.query\nAction Input: {"query": "up"}')
    assert result.kind == "action"
    assert result.thought is None
    assert result.sections_found == ["action", "action_input"]


def test_text_before_first_header_counts_as_thought() -> None:
    result = parse("Let me look at the metrics.\nAction: prometheus.query\nAction Input: query=up")
    assert result.kind == "action"
    assert result.thought == "Let me look at the metrics."
    assert "thought" not in result.sections_found


@pytest.mark.parametrize(
    "text",
    [
        "**Thought:** check\n**Action:** prometheus.query\n**Action Input:** {}",
        "**Thought**: check\n**Action**: prometheus.query\n**Action Input**: {}",
        "### Thought: check\n`Action:` `prometheus.query`\n`Action Input:` {}",
        "  Thought: check\n  Action: prometheus.query\n  Action Input: {}",
        "Thought: check\nAction: `prometheus.query`\nAction Input: `{}`",
        "Thought: check\nAction: prometheus.query.\nAction Input: {}",
        "Thought: check\nAction: prometheus.query()\nAction Input: {}",
        "Thought: check\r\nAction: prometheus.query\r\nAction Input: {}\r\n",
    ],
    ids=[
        "bold",
        "bold-label",
        "heading-and-code",
        "indented",
        "backticks",
        "period",
        "parens",
        "crlf",
    ],
)
def test_markdown_and_decorated_headers_are_tolerated(text: str) -> None:
    result = parse(text)
    assert result.kind == "action"
    assert result.thought == "check"
    assert result.action == "prometheus.query"
    assert result.action_input == {}


@pytest.mark.parametrize(
    "line",
    ["Actions: restart the pod", "Action items: none", "Thoughts: many", "Final answers: x"],
)
def test_lookalike_words_are_not_headers(line: str) -> None:
    result = parse(f"Thought: thinking\n{line}")
    assert result.kind == "thought_only"
    assert result.thought == f"thinking\n{line}"


# --------------------------------------------------------------------------- (2) 3-tier detection


@pytest.mark.parametrize(
    ("text", "thought", "answer"),
    [
        (
            "Thought: All checks passed. Final Answer: The service is healthy.",
            "All checks passed.",
            "The service is healthy.",
        ),
        (
            "Thought: I know the cause now!Final Answer: OOMKilled",
            "I know the cause now!",
            "OOMKilled",
        ),
        (
            "Thought: Is that all? **Final Answer:** yes, it is the quota.",
            "Is that all?",
            "yes, it is the quota.",
        ),
        (
            "Thought: checking\nthe logs show a panic. Final Answer: nil pointer in handler\n"
            "see trace",
            "checking\nthe logs show a panic.",
            "nil pointer in handler\nsee trace",
        ),
        (
            "The investigation is complete. Final Answer: disk full on node-3",
            "The investigation is complete.",
            "disk full on node-3",
        ),
    ],
    ids=["period", "bang-no-space", "question-bold", "second-line", "preamble"],
)
def test_tier2_midline_final_answer(text: str, thought: str, answer: str) -> None:
    result = parse(text)
    assert result.kind == "final_answer"
    assert result.thought == thought
    assert result.final_answer == answer
    assert "mid-line Final Answer" in result.fallbacks


def test_midline_final_answer_needs_sentence_boundary() -> None:
    result = parse("Thought: I will give the Final Answer: later")
    assert result.kind == "thought_only"
    assert result.final_answer is None


def test_tier3_midline_action_after_sentence_boundary() -> None:
    result = parse(
        "Thought: I will get the namespace.Action: kubernetes-server.resources_get\n"
        'Action Input: {"resource_type": "namespaces"}'
    )
    assert result.kind == "action"
    assert result.thought == "I will get the namespace."
    assert result.action == "kubernetes-server.resources_get"
    assert result.action_input == {"resource_type": "namespaces"}
    assert "mid-line Action" in result.fallbacks


def test_tier3_everything_on_one_line() -> None:
    result = parse(
        'Thought: Need metrics. Action: prometheus.query Action Input: {"query": "rate(x[5m])"}'
    )
    assert result.kind == "action"
    assert result.thought == "Need metrics."
    assert result.action == "prometheus.query"
    assert result.action_input == {"query": "rate(x[5m])"}


def test_tier3_action_input_glued_to_action_line() -> None:
    result = parse("Thought: go\nAction: prometheus.query Action Input: query: up, step: 30")
    assert result.kind == "action"
    assert result.action_input == {"query": "up", "step": 30}


def test_midline_action_needs_sentence_boundary() -> None:
    result = parse("Thought: the corrective Action: restart is not possible")
    assert result.kind == "thought_only"
    assert result.action is None


def test_midline_markers_inside_json_input_are_data() -> None:
    result = parse(
        "Action: prometheus.query\n"
        'Action Input: {"query": "up", "note": "ok. Final Answer: no. Action: x"}'
    )
    assert result.kind == "action"
    assert result.action_input == {"query": "up", "note": "ok. Final Answer: no. Action: x"}


# --------------------------------------------------------------------------- (3) backtracking


@pytest.mark.parametrize(
    ("text", "action", "thought"),
    [
        (
            "Thought: I will check the logs\nkubernetes-server.pods_log\n"
            'Action Input: {"name": "web-1"}',
            "kubernetes-server.pods_log",
            "I will check the logs",
        ),
        (
            "Thought: I will check the logsAction: kubernetes-server.pods_log\n"
            'Action Input: {"name": "web-1"}',
            "kubernetes-server.pods_log",
            "I will check the logs",
        ),
        (
            "Thought: I need the logs, calling Action: kubernetes-server.pods_log\n"
            'Action Input: {"name": "web-1"}',
            "kubernetes-server.pods_log",
            "I need the logs, calling",
        ),
        (
            "Thought: next I use kubernetes-server.pods_log for this pod\n"
            'Action Input: {"name": "web-1"}',
            "kubernetes-server.pods_log",
            "next I use kubernetes-server.pods_log for this pod",
        ),
        (
            'Thought: check logs\n`kubernetes-server.pods_log` Action Input: {"name": "web-1"}',
            "kubernetes-server.pods_log",
            "check logs",
        ),
    ],
    ids=["tool-line", "glued-action", "action-no-boundary", "known-tool-in-prose", "same-line"],
)
def test_missing_action_recovered_by_backtracking(text: str, action: str, thought: str) -> None:
    result = parse(text)
    assert result.kind == "action"
    assert result.action == action
    assert result.action_input == {"name": "web-1"}
    assert result.thought == thought
    assert "action" in result.sections_found
    assert "Action recovered from the text before Action Input" in result.fallbacks


def test_backtracking_unknown_token_is_not_guessed() -> None:
    result = parse('Thought: maybe use foo.bar for this\nAction Input: {"a": 1}')
    assert result.kind == "malformed"
    assert result.action is None
    assert result.error is not None
    assert "Action Input but no Action" in result.error
    assert "Sections found: Thought, Action Input; missing: Action." in result.error
    assert "Available tools: kubernetes-server.events_list" in result.error


# --------------------------------------------------------------------------- (4) tool names


@pytest.mark.parametrize(
    ("action", "expected_fragments"),
    [
        (
            "resources_get",
            [
                "'resources_get' is not a valid tool name",
                "'server.tool'",
                "Did you mean 'kubernetes-server.resources_get'?",
            ],
        ),
        ("check the pod logs", ["'check the pod logs' is not a valid tool name"]),
        ("kubernetes.server.pods_log", ["not a valid tool name"]),
        (
            "kubernetes-server.pod_logs",
            [
                "Unknown tool 'kubernetes-server.pod_logs'",
                "Did you mean 'kubernetes-server.pods_log'?",
            ],
        ),
        ("grafana.dashboards", ["Unknown tool 'grafana.dashboards'"]),
    ],
    ids=["no-dot", "prose", "two-dots", "typo", "unknown-server"],
)
def test_invalid_or_unknown_tool(action: str, expected_fragments: list[str]) -> None:
    result = parse(f"Thought: t\nAction: {action}\nAction Input: {{}}")
    assert result.kind == "malformed"
    assert result.action == action
    assert result.action_input is None
    assert result.error is not None
    for fragment in expected_fragments:
        assert fragment in result.error
    assert (
        "Available tools: kubernetes-server.events_list, kubernetes-server.pods_log, "
        "kubernetes-server.resources_get, prometheus.query." in result.error
    )


def test_tool_must_be_available_even_when_canonical() -> None:
    result = parse_react(
        "Action: prometheus.query\nAction Input: {}", ["kubernetes-server.pods_log"]
    )
    assert result.kind == "malformed"
    assert result.error is not None
    assert result.error.startswith("Unknown tool 'prometheus.query'.")


def test_no_tools_available() -> None:
    result = parse_react("Action: prometheus.query\nAction Input: {}", [])
    assert result.kind == "malformed"
    assert result.error is not None
    assert "No tools are available in this step: give a Final Answer instead." in result.error


def test_empty_action() -> None:
    result = parse("Thought: t\nAction:\nAction Input: {}")
    assert result.kind == "malformed"
    assert result.error is not None
    assert result.error.startswith("The Action is empty")


def test_action_without_action_input() -> None:
    result = parse("Thought: list namespaces\nAction: kubernetes-server.resources_get")
    assert result.kind == "malformed"
    assert result.action == "kubernetes-server.resources_get"
    assert result.error is not None
    assert "no Action Input" in result.error
    assert "Sections found: Thought, Action; missing: Action Input." in result.error


# --------------------------------------------------------------------------- (5) parameters


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"namespace": "prod", "limit": 5}', {"namespace": "prod", "limit": 5}),
        ('{"selector": {"app": "web"}, "all": true}', {"selector": {"app": "web"}, "all": True}),
        ('```json\n{"namespace": "prod"}\n```', {"namespace": "prod"}),
        ('```\n{"namespace": "prod"}\n```', {"namespace": "prod"}),
        ("```yaml\nnamespace: prod\nlimit: 3\n```", {"namespace": "prod", "limit": 3}),
        ('`{"namespace": "prod"}`', {"namespace": "prod"}),
        ('{"namespace": "prod"}\nThis will list the pods.', {"namespace": "prod"}),
        ("{namespace: prod, limit: 2}", {"namespace": "prod", "limit": 2}),
        ('{"namespace": "prod",}', {"namespace": "prod"}),
        (
            "namespace: prod\nlabels:\n  - app\n  - web",
            {"namespace": "prod", "labels": ["app", "web"]},
        ),
        ("since: 2024-01-01", {"since": "2024-01-01"}),
        (
            "apiVersion: v1, kind: Namespace, name: superman-dev",
            {"apiVersion": "v1", "kind": "Namespace", "name": "superman-dev"},
        ),
        (
            "url: http://svc:8080/health, retries: 3",
            {"url": "http://svc:8080/health", "retries": 3},
        ),
        ("names: a, b, c: x", {"names": "a, b", "c": "x"}),
        ("namespace=prod, limit=10", {"namespace": "prod", "limit": 10}),
        ("namespace=prod limit=10 all=true", {"namespace": "prod", "limit": 10, "all": True}),
        (
            'query="rate(http_requests_total[5m])", step=30s',
            {"query": "rate(http_requests_total[5m])", "step": "30s"},
        ),
        (
            "selector=app=web; enabled=False; ttl=null",
            {"selector": "app=web", "enabled": False, "ttl": None},
        ),
        ("", {}),
        ("{}", {}),
        ("None", {}),
        ("null", {}),
        ("```json\n{}\n```", {}),
    ],
    ids=[
        "json",
        "json-nested",
        "fence-json",
        "fence-plain",
        "fence-yaml",
        "inline-backticks",
        "json-trailing-prose",
        "yaml-flow",
        "json-trailing-comma",
        "yaml-block",
        "yaml-date-to-str",
        "colon-csv",
        "colon-csv-url",
        "colon-csv-continuation",
        "equals-csv",
        "equals-spaces",
        "equals-quoted",
        "equals-semicolons",
        "empty",
        "empty-object",
        "none",
        "null",
        "fenced-empty",
    ],
)
def test_parse_action_input_formats(raw: str, expected: dict[str, Any]) -> None:
    assert parse_action_input(raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("production", "Could not parse Action Input 'production'"),
        ('["a", "b"]', "must be a JSON object of named parameters, got a JSON list"),
        ("42", "got a JSON int"),
        ('{"namespace": "prod"', "JSON error:"),
        ("Check pods: now", "Could not parse Action Input"),
    ],
    ids=["bare-word", "json-list", "json-number", "broken-json", "prose-key"],
)
def test_parse_action_input_errors(raw: str, fragment: str) -> None:
    with pytest.raises(ActionInputError) as exc_info:
        parse_action_input(raw)
    assert fragment in str(exc_info.value)


def test_unparseable_input_gives_malformed_with_tool_named() -> None:
    result = parse("Thought: t\nAction: kubernetes-server.pods_log\nAction Input: the web pod")
    assert result.kind == "malformed"
    assert result.action == "kubernetes-server.pods_log"
    assert result.raw_action_input == "the web pod"
    assert result.error is not None
    assert "Could not parse Action Input 'the web pod'" in result.error
    assert "(tool 'kubernetes-server.pods_log')" in result.error


def test_indented_yaml_action_input_block() -> None:
    result = parse(
        "Thought: query\n"
        "Action: kubernetes-server.resources_get\n"
        "Action Input:\n"
        "    resource_type: pods\n"
        "    selector:\n"
        "      app: web\n"
    )
    assert result.kind == "action"
    assert result.action_input == {"resource_type": "pods", "selector": {"app": "web"}}


# --------------------------------------------------------------------------- (6) stop conditions


def test_hallucinated_observation_is_cut_off() -> None:
    result = parse(
        "Thought: I need the events\n"
        "Action: kubernetes-server.events_list\n"
        'Action Input: {"namespace": "shop"}\n'
        "Observation: 3 events: BackOff, Pulled, Created\n"
        "Thought: The pod is in BackOff.\n"
        "Final Answer: Image pull problem."
    )
    assert result.kind == "action"
    assert result.action == "kubernetes-server.events_list"
    assert result.action_input == {"namespace": "shop"}
    assert result.thought == "I need the events"
    assert result.final_answer is None
    assert result.stop_reason == "observation"


def test_bold_observation_also_stops() -> None:
    result = parse('Action: prometheus.query\nAction Input: {"query": "up"}\n**Observation:** 1')
    assert result.kind == "action"
    assert result.raw_action_input == '{"query": "up"}'
    assert result.stop_reason == "observation"


def test_based_on_marker_stops_parsing() -> None:
    result = parse(
        'Thought: go\nAction: prometheus.query\nAction Input: {"query": "up"}\n'
        "[Based on the query results, the target is down]\nFinal Answer: down"
    )
    assert result.kind == "action"
    assert result.stop_reason == "based_on"
    assert result.final_answer is None


def test_observation_inside_final_answer_truncates_it() -> None:
    result = parse("Final Answer: The node is healthy.\nObservation: made up")
    assert result.kind == "final_answer"
    assert result.final_answer == "The node is healthy."
    assert result.stop_reason == "observation"


def test_response_that_is_only_an_observation() -> None:
    result = parse("Observation: the pod restarted 5 times\nFinal Answer: restart loop")
    assert result.kind == "malformed"
    assert result.sections_found == []
    assert result.error is not None
    assert result.error.startswith("The response starts with an Observation you wrote yourself")


def test_midline_observation_word_does_not_stop() -> None:
    result = parse("Thought: My Observation: it is slow. Final Answer: add replicas")
    assert result.kind == "final_answer"
    assert result.thought == "My Observation: it is slow."
    assert result.stop_reason is None


# --------------------------------------------------------------------------- action vs answer


def test_action_before_final_answer_wins_and_rest_is_discarded() -> None:
    result = parse(
        "Thought: check first\n"
        "Action: prometheus.query\n"
        'Action Input: {"query": "up"}\n'
        "Final Answer: everything is up (speculative)"
    )
    assert result.kind == "action"
    assert result.final_answer is None
    assert result.stop_reason == "after_action"
    assert result.sections_found == ["thought", "action", "action_input"]


def test_second_action_block_is_discarded() -> None:
    result = parse(
        'Action: prometheus.query\nAction Input: {"query": "up"}\n'
        "Thought: and then\nAction: kubernetes-server.pods_log\nAction Input: {}"
    )
    assert result.kind == "action"
    assert result.action == "prometheus.query"
    assert result.stop_reason == "after_action"


def test_final_answer_is_terminal() -> None:
    result = parse(
        "Thought: done\n"
        "Final Answer: Restart the deployment.\n"
        "Action: kubectl rollout restart deploy/web\n"
        "Thought: this is part of the answer text"
    )
    assert result.kind == "final_answer"
    assert result.action is None
    assert result.final_answer == (
        "Restart the deployment.\nAction: kubectl rollout restart deploy/web\n"
        "Thought: this is part of the answer text"
    )
    assert result.sections_found == ["thought", "final_answer"]


# --------------------------------------------------------------------------- (7) feedback


@pytest.mark.parametrize(
    ("text", "kind", "fragments"),
    [
        (
            "Thought: I should look at the pods",
            "thought_only",
            [
                "Thought but neither an Action",
                "Sections found: Thought; missing: Action and Action Input (or Final Answer).",
            ],
        ),
        (
            "The pods look fine to me.",
            "malformed",
            [
                "not in ReAct format",
                "Sections found: none; missing: Action and Action Input (or Final Answer).",
            ],
        ),
        ("", "malformed", ["Sections found: none"]),
        (
            "Thought: done\nFinal Answer:",
            "malformed",
            ["The Final Answer is empty", "Sections found: Thought, Final Answer; missing: none."],
        ),
    ],
    ids=["thought-only", "prose", "empty", "empty-final-answer"],
)
def test_error_names_sections_found_and_missing(text: str, kind: str, fragments: list[str]) -> None:
    result = parse(text)
    assert result.kind == kind
    assert result.error is not None
    for fragment in fragments:
        assert fragment in result.error


def test_feedback_for_unknown_tool() -> None:
    result = parse("Thought: t\nAction: kubernetes-server.delete_pod\nAction Input: {}")
    feedback = result.feedback()
    assert feedback is not None
    assert feedback.startswith(
        "Observation: Error in reasoning - Unknown tool 'kubernetes-server.delete_pod'."
    )
    assert "Available tools: kubernetes-server.events_list" in feedback
    assert feedback.endswith(FORMAT_REMINDER)


def test_feedback_is_none_for_usable_results() -> None:
    assert parse("Final Answer: all good").feedback() is None
    assert parse("Action: prometheus.query\nAction Input: {}").feedback() is None


# --------------------------------------------------------------------------- (8) continuation


def test_continuation_prompt_for_thought_only() -> None:
    prompt = continuation_prompt(parse("Thought: hmm"))
    assert prompt.startswith("You wrote a Thought but no Action or Final Answer.")
    assert FORMAT_REMINDER in prompt


def test_continuation_prompt_for_malformed() -> None:
    prompt = continuation_prompt(parse("no format at all"))
    assert prompt.startswith("Your previous response could not be processed.")
    assert FORMAT_REMINDER in prompt


@pytest.mark.parametrize(
    "fragment",
    [
        "Thought: <your reasoning",
        "Action: <one tool name from the available tools, in server.tool form>",
        'Action Input: <the tool parameters as a JSON object, e.g. {"namespace": "default"}',
        "Final Answer: <your complete analysis>",
        "never write it yourself",
        "never both",
    ],
)
def test_format_reminder_spells_out_the_format(fragment: str) -> None:
    assert fragment in FORMAT_REMINDER


def test_feedback_round_trip_is_not_mistaken_for_sections() -> None:
    """The reminder itself, echoed back by a model, reads as format text only once."""
    feedback = parse("Thought: hmm").feedback()
    assert feedback is not None
    echoed = parse(feedback)
    assert echoed.kind == "malformed"
    assert echoed.stop_reason == "observation"


# --------------------------------------------------------------------------- realistic outputs


def test_realistic_gemini_style_output_with_fenced_input() -> None:
    text = """I'll start by looking at the failing pod.

**Thought:** The alert `KubePodCrashLooping` fired for `checkout-5d8f` in `shop`.
I want its logs from the previous container run.

**Action:** kubernetes-server.pods_log

**Action Input:**
```json
{
  "name": "checkout-5d8f",
  "namespace": "shop",
  "previous": true
}
```
"""
    result = parse(text)
    assert result.kind == "action"
    assert result.thought == (
        "The alert `KubePodCrashLooping` fired for `checkout-5d8f` in `shop`.\n"
        "I want its logs from the previous container run."
    )
    assert result.action == "kubernetes-server.pods_log"
    assert result.action_input == {"name": "checkout-5d8f", "namespace": "shop", "previous": True}


def test_realistic_final_answer_after_long_thought() -> None:
    text = (
        "Thought: The logs show `java.lang.OutOfMemoryError: Java heap space` and the\n"
        "events show OOMKilled with exit code 137. The limit is 256Mi while the heap\n"
        "is configured at -Xmx512m. That is the cause.\n"
        "\n"
        "Final Answer: **Root cause:** the JVM heap (-Xmx512m) exceeds the container memory\n"
        "limit (256Mi), so the kernel OOM-kills the container.\n"
        "\n"
        "**Fix:** set -Xmx to ~75% of the limit or raise the limit to 768Mi."
    )
    result = parse(text)
    assert result.kind == "final_answer"
    assert result.thought is not None
    assert result.thought.endswith("That is the cause.")
    assert result.final_answer is not None
    assert result.final_answer.startswith("**Root cause:** the JVM heap")
    assert result.final_answer.endswith("raise the limit to 768Mi.")


def test_result_is_immutable() -> None:
    result = parse("Final Answer: ok")
    with pytest.raises(ValueError, match="frozen"):
        result.kind = "malformed"  # type: ignore[misc]

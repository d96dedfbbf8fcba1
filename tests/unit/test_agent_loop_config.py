"""Configuration of the agent loop: tool_choice, loop detection, summarization defaults."""

from __future__ import annotations

import pytest

from tarsy.config import load_config
from tarsy.errors import ConfigError
from tarsy.settings import Settings

SETTINGS = Settings()

USER = """
defaults:
  loop_detection_threshold: 4
mcp_servers:
  prometheus:
    url: "http://127.0.0.1:9001/mcp"
    summarization: {size_threshold_tokens: 3000, summary_max_token_limit: 500}
agents:
  forced:
    iteration_strategy: native-thinking
    mcp_servers: [prometheus]
    tool_choice: prometheus.query
    loop_detection_threshold: 2
  eager:
    iteration_strategy: native-thinking
    mcp_servers: [prometheus]
    tool_choice: required
agent_chains:
  metrics:
    alert_types: [HighLatency]
    chat_agent: eager
    stages:
      - name: look
        parallel: true
        agents: [{name: forced}, {name: eager}]
"""


def test_tool_choice_and_loop_threshold_resolve_per_agent_with_defaults() -> None:
    config = load_config(SETTINGS, user_text=USER)
    forced, eager = (config.resolve("metrics", 0, n) for n in range(2))
    assert (forced.tool_choice, forced.loop_detection_threshold) == ("prometheus.query", 2)
    assert (eager.tool_choice, eager.loop_detection_threshold) == ("required", 4)
    chat = config.resolve_role("metrics", None, "chat")
    assert (chat.tool_choice, chat.loop_detection_threshold) == ("required", 4)
    builtin = config.resolve("kubernetes", 0, 0)
    assert (builtin.tool_choice, builtin.loop_detection_threshold) == ("auto", 4)
    server = config.mcp_servers["prometheus"]
    assert (server.max_result_tokens, server.summary_max_tokens) == (3000, 500)
    assert load_config(SETTINGS).defaults.loop_detection_threshold == 3


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ("sometimes", "tool_choice"),
        ("kubernetes.pods_get", "is not a tool of this agent's MCP servers"),
    ],
)
def test_a_bad_tool_choice_is_refused_at_load(choice: str, message: str) -> None:
    text = USER.replace("tool_choice: required", f"tool_choice: {choice}")
    with pytest.raises(ConfigError, match=message):
        load_config(SETTINGS, user_text=text)


def test_budgets_come_from_the_chain_else_the_defaults_and_never_bind_a_chat() -> None:
    text = USER.replace(
        "  loop_detection_threshold: 4\n",
        "  loop_detection_threshold: 4\n  max_tokens: 50000\n  max_cost_usd: 2.5\n",
    ).replace("    chat_agent: eager\n", "    chat_agent: eager\n    max_tokens: 8000\n")
    config = load_config(SETTINGS, user_text=text)
    metrics = config.resolve("metrics", 0, 0)
    assert (metrics.max_tokens, metrics.max_cost_usd) == (8000, 2.5)
    kubernetes = config.resolve("kubernetes", 0, 0)
    assert (kubernetes.max_tokens, kubernetes.max_cost_usd) == (50000, 2.5)
    chat = config.resolve_role("metrics", None, "chat")
    assert (chat.max_tokens, chat.max_cost_usd) == (None, None)
    unlimited = load_config(SETTINGS).resolve("kubernetes", 0, 0)
    assert (unlimited.max_tokens, unlimited.max_cost_usd) == (None, None)

"""Tool-call validation and result shrinking rules."""

from __future__ import annotations

import pytest
from mcp import types as mcp_types

from tarsy.llm.base import ToolDefinition
from tarsy.models import ToolCall
from tarsy.tools.base import (
    ToolListing,
    check_call,
    error_result,
    estimate_tokens,
    truncate_for_model,
)
from tarsy.tools.mcp_client import EMPTY_RESULT, result_text

LISTING = ToolListing(
    tools=[
        ToolDefinition(
            name="cluster.pods_log",
            parameters={
                "type": "object",
                "properties": {"name": {"type": "string"}, "tail": {"type": "integer"}},
                "required": ["name"],
            },
        )
    ],
    unavailable={"metrics": "ConnectError: connection refused"},
)


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


def test_valid_call_returns_tool_and_arguments() -> None:
    tool, arguments = check_call(call("cluster.pods_log", '{"name": "api-0", "tail": 50}'), LISTING)
    assert tool.name == "cluster.pods_log"
    assert arguments == {"name": "api-0", "tail": 50}


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "cluster.pods_delete",
            "{}",
            "unknown tool 'cluster.pods_delete'; available tools: cluster.pods_log",
        ),
        (
            "metrics.query",
            "{}",
            "server 'metrics' is unavailable (ConnectError: connection refused)",
        ),
        ("cluster.pods_log", "{not json", "arguments are not valid JSON"),
        ("cluster.pods_log", "[1]", "arguments must be a JSON object"),
        ("cluster.pods_log", "{}", "'name' is a required property"),
        (
            "cluster.pods_log",
            '{"name": "a", "tail": "ten"}',
            "tail: 'ten' is not of type 'integer'",
        ),
    ],
)
def test_bad_calls_are_explained(name: str, arguments: str, message: str) -> None:
    with pytest.raises(ValueError) as failure:
        check_call(call(name, arguments), LISTING)
    assert message in str(failure.value)


def test_error_result_is_an_observation() -> None:
    result = error_result(call("cluster.pods_log", '{"name": "a"}'), "timed out after 5s")
    assert result.is_error
    assert result.content == "Error calling cluster.pods_log: timed out after 5s"
    assert result.arguments == {"name": "a"}
    assert (result.server, result.tool) == ("cluster", "pods_log")


def test_truncation_keeps_the_head_and_says_so() -> None:
    text = "x" * 1000
    assert truncate_for_model(text, 1000) == text
    cut = truncate_for_model(text, 100)
    assert cut.startswith("x" * 400)
    assert "truncated: 600 more characters" in cut
    assert estimate_tokens("abcd" * 10) == 10


def test_an_empty_tool_result_is_said_to_be_empty_not_shown_as_nothing() -> None:
    empty = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="")])
    assert result_text(empty) == EMPTY_RESULT
    assert result_text(mcp_types.CallToolResult(content=[])) == EMPTY_RESULT
    listed = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="a\nb")])
    assert result_text(listed) == "a\nb"

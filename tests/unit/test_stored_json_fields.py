"""Large nested fields stored as JSON text: an LLM call's request, a server's tool list.

Firestore's client encodes and decodes a nested map value by value, which made
these two the largest CPU cost of a step; as one string each, they cost one
value. Records written before hold maps, and must read back the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tarsy.llm.base import ToolDefinition
from tarsy.models import LLMInteraction
from tarsy.persistence._firestore import llm_interaction_document, llm_interaction_of
from tarsy.persistence.chunking import INLINE_TEXT_BYTES, spill
from tarsy.persistence.tool_lists import tool_list_document, tool_list_of
from tarsy.tools.base import CachedToolList

REQUEST: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You investigate."},
        {"role": "user", "content": "pod api-0 crash loops — «ünïcode» kept as is"},
    ],
    "tools": [
        {
            "name": "kubernetes__pods_list",
            "parameters": {"type": "object", "properties": {"namespace": {"type": "string"}}},
        }
    ],
    "config": {"temperature": 0.2, "max_output_tokens": 4096, "stop": None},
}


def _interaction(request: dict[str, Any]) -> LLMInteraction:
    return LLMInteraction(step=2, model="gemini-2.5-pro", provider="google", request=request)


def test_an_interactions_request_is_stored_as_one_json_string() -> None:
    document = llm_interaction_document(_interaction(REQUEST))
    assert isinstance(document["request"], str)
    assert "«ünïcode»" in document["request"]  # not escaped: no longer than it must be
    assert document["step"] == 2 and document["model"] == "gemini-2.5-pro"


def test_an_interaction_reads_back_as_it_was_written() -> None:
    written = _interaction(REQUEST)
    assert llm_interaction_of(llm_interaction_document(written)) == written


def test_an_interaction_written_before_with_its_request_as_a_map_still_reads() -> None:
    earlier = _interaction(REQUEST).model_dump(mode="python")
    assert isinstance(earlier["request"], dict)
    assert llm_interaction_of(earlier).request == REQUEST


def test_a_request_past_the_inline_limit_is_spilled_into_chunks_like_any_long_text() -> None:
    huge = {**REQUEST, "messages": [{"role": "user", "content": "x" * INLINE_TEXT_BYTES}]}
    document, spilled = spill(llm_interaction_document(_interaction(huge)))
    assert set(spilled) == {"request"}  # as a map, it could only have failed the write
    assert len(document["request"]) < 2000


def _tool_list() -> CachedToolList:
    tool = ToolDefinition(
        name="kubernetes.pods_list",
        description="List pods.",
        parameters={"type": "object", "properties": {"namespace": {"type": "string"}}},
    )
    return CachedToolList(
        server="kubernetes", tools=[tool], fetched_at=datetime(2026, 11, 28, tzinfo=UTC)
    )


def test_a_tool_list_is_stored_with_its_tools_as_one_json_string_and_reads_back() -> None:
    cached = _tool_list()
    document = tool_list_document(cached)
    assert isinstance(document["tools"], str)
    assert document["server"] == "kubernetes"
    assert tool_list_of(document) == cached


def test_a_tool_list_written_before_with_its_tools_as_maps_still_reads() -> None:
    cached = _tool_list()
    assert tool_list_of(cached.model_dump(mode="python")) == cached

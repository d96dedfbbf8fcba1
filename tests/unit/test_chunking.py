from __future__ import annotations

import pytest

from tarsy.persistence.chunking import (
    CHUNK_BYTES,
    CHUNKED_FIELD,
    INLINE_TEXT_BYTES,
    cap_strings,
    chunk_id,
    restore,
    spill,
    split_utf8,
)


@pytest.mark.parametrize("text", ["", "abc", "é" * 10, "a€😀" * 7, "x" * 100])
@pytest.mark.parametrize("max_bytes", [4, 5, 7, 64])
def test_split_utf8_never_cuts_a_character_and_rejoins(text: str, max_bytes: int) -> None:
    pieces = split_utf8(text, max_bytes)
    assert "".join(pieces) == text
    assert all(len(p.encode()) <= max_bytes for p in pieces)


def test_split_utf8_rejects_a_size_below_one_character() -> None:
    with pytest.raises(ValueError):
        split_utf8("abc", 3)


def test_small_documents_are_written_as_they_are() -> None:
    data = {"content": "short", "n": 3}
    assert spill(data) == (data, {})


def test_long_strings_are_spilled_and_restored() -> None:
    long_text = "€" * (INLINE_TEXT_BYTES // 3 + 10)  # 3 bytes each: just over the inline limit
    huge = "z" * (CHUNK_BYTES * 2 + 5)
    data = {"content": long_text, "other": huge, "role": "user"}
    document, spilled = spill(data)

    assert document["role"] == "user"
    assert document[CHUNKED_FIELD] == {"content": 1, "other": 3}
    assert len(document["content"]) < 2000 and "chunks" in document["content"]
    chunks = {chunk_id(f, i): t for f, pieces in spilled.items() for i, t in enumerate(pieces)}
    assert restore(document, chunks) == data


def test_restore_refuses_missing_chunks() -> None:
    document, spilled = spill({"content": "a" * (INLINE_TEXT_BYTES + 1)})
    assert len(spilled["content"]) == 1
    with pytest.raises(ValueError, match="content"):
        restore(document, {})


def test_cap_strings_truncates_nested_strings_visibly() -> None:
    value = {"messages": [{"content": "x" * 50, "role": "user"}], "n": 1}
    capped = cap_strings(value, 10)
    assert capped["messages"][0]["content"] == "x" * 10 + "…[truncated 40 characters]"
    assert capped["messages"][0]["role"] == "user"
    assert capped["n"] == 1

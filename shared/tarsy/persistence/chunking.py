"""Keep documents under Firestore's 1 MiB limit by moving long text into chunk documents.

A 1 MiB alert is accepted, and the prompt that quotes it is as large, so any
document may hold a string too big for one document (invariant 6: large
payloads are stored in chunks, never rejected mid-session). Before a write,
:func:`spill` replaces each top-level string longer than
:data:`INLINE_TEXT_BYTES` with a short preview and returns the text in pieces;
the store writes the pieces to ``{document}/chunks/{field}-{n:04d}`` in the
same batch and records ``_chunked: {field: count}`` on the document. After a
read, :func:`restore` puts the text back. Both are pure.

For copies kept only for the record (the request inside an LLM interaction),
:func:`cap_strings` truncates instead, with a visible marker.
"""

from __future__ import annotations

from typing import Any

CHUNKED_FIELD = "_chunked"
CHUNKS = "chunks"
# Strings up to this many UTF-8 bytes stay in the document.
INLINE_TEXT_BYTES = 256 * 1024
# Bytes of text per chunk document (well under the 1 MiB document limit).
CHUNK_BYTES = 700 * 1024
PREVIEW_CHARS = 1000


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """Split ``text`` into pieces of at most ``max_bytes`` UTF-8 bytes, on character bounds."""
    if max_bytes < 4:
        raise ValueError("max_bytes must hold at least one character (4 bytes)")
    pieces: list[str] = []
    encoded = text.encode("utf-8")
    start = 0
    while start < len(encoded):
        end = min(start + max_bytes, len(encoded))
        # Step back off UTF-8 continuation bytes (0b10xxxxxx) so no character is cut.
        while end < len(encoded) and (encoded[end] & 0xC0) == 0x80:
            end -= 1
        pieces.append(encoded[start:end].decode("utf-8"))
        start = end
    return pieces or [""]


def chunk_id(field: str, index: int) -> str:
    """Document id of one chunk of one field."""
    return f"{field}-{index:04d}"


def spill(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Return the document to write and, per spilled field, its text pieces."""
    spilled: dict[str, list[str]] = {}
    document = dict(data)
    for field, value in data.items():
        if isinstance(value, str) and len(value.encode("utf-8")) > INLINE_TEXT_BYTES:
            spilled[field] = split_utf8(value, CHUNK_BYTES)
            document[field] = (
                value[:PREVIEW_CHARS] + f"\n…[{len(value)} characters in {len(spilled[field])} "
                f"chunks under {CHUNKS}/]"
            )
    if spilled:
        document[CHUNKED_FIELD] = {field: len(pieces) for field, pieces in spilled.items()}
    return document, spilled


def restore(document: dict[str, Any], chunks: dict[str, str]) -> dict[str, Any]:
    """Reassemble a document from its chunk documents (``{chunk_id: text}``)."""
    counts = document.get(CHUNKED_FIELD)
    if not counts:
        return document
    restored = {key: value for key, value in document.items() if key != CHUNKED_FIELD}
    for field, count in counts.items():
        ids = [chunk_id(field, index) for index in range(int(count))]
        missing = [i for i in ids if i not in chunks]
        if missing:
            raise ValueError(f"chunks missing for field {field!r}: {missing}")
        restored[field] = "".join(chunks[i] for i in ids)
    return restored


def cap_strings(value: Any, max_chars: int) -> Any:
    """Copy ``value`` with every string longer than ``max_chars`` truncated, marked."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        return value[:max_chars] + f"…[truncated {len(value) - max_chars} characters]"
    if isinstance(value, dict):
        return {key: cap_strings(item, max_chars) for key, item in value.items()}
    if isinstance(value, list):
        return [cap_strings(item, max_chars) for item in value]
    return value

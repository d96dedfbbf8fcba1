r"""Turn a raw HTTP body into a JSON value the product can hold, or refuse it with a 4xx.

Every route that takes a body reads it through :func:`parse_json_body`, so a
hostile body gets the same answer everywhere, and nothing reaches the store
that Firestore would refuse at write time (a 5xx after validation passed).
Every refusal is an :class:`~tarsy.errors.InputError`; no byte string makes
this module raise anything else.

Policy, in the order it is applied:

* **Size** (413): the body, and the body after decompression, may hold at most
  ``max_bytes`` bytes. Decompression stops one byte past the limit, so a gzip
  bomb costs no more than a body at the limit.
* **Content-Encoding** (415): absent or ``identity`` reads the body as is;
  ``gzip`` (or ``x-gzip``) is decompressed, every member of a multi-member
  stream included. Any other coding (``br``, ``deflate``, ``zstd``, ``gzip``
  twice...) is 415. A body labelled gzip that is not gzip, or is truncated or
  corrupt, is 400.
* **UTF-8** (400): the only accepted encoding of JSON (RFC 8259 §8.1); a
  leading byte-order mark is ignored. The refusal names the byte offset.
* **Depth** (400): at most :data:`MAX_DEPTH` nested arrays and objects. The
  text is scanned iteratively before ``json.loads`` runs, so the recursive
  parser never sees a document deeper than the limit.
* **Numbers** (400): integers must fit a signed 64-bit integer (what Firestore
  stores), which also bounds them to :data:`MAX_INT_DIGITS` digits; floats must
  be finite (``1e999999`` overflows to infinity and is refused); ``NaN``,
  ``Infinity`` and ``-Infinity`` are not JSON and are refused.
* **Lone surrogates** (400): a ``\uD800``-``\uDFFF`` escape that is not
  half of a valid pair decodes to a string that is not Unicode text, which
  Firestore cannot store. It is **rejected, never replaced**, in keys and in
  values alike, and the refusal names where it is (``data.pod``, ``the key
  "\ud800" in metadata``) and at which character. Replacing with U+FFFD would
  alter the caller's alert silently and could merge two distinct keys into one.

All of these are 400 rather than 422: they are properties of the body as
JSON, checked before any schema and the same on every route; 422 stays what
it is across the product, a schema error with field-level details.

:func:`firestore_map_problems` adds what Firestore refuses inside a map field
stored as sent (an alert's ``metadata``): depth, arrays directly in arrays,
reserved, empty or too long field names, too many fields, too many bytes. Those
are field-level problems, reported as 422 details by the caller.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

from tarsy.errors import InputError

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"

# Nested arrays and objects a body may hold. json.loads recurses once per level
# and fails near 1,000; real alerts stay well under 20.
MAX_DEPTH = 64
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Digits of the longest int64 (9223372036854775807), sign excluded.
MAX_INT_DIGITS = 19

_IDENTITY = frozenset({"", "identity"})
_GZIP = frozenset({"gzip", "x-gzip"})
_BOM = "\ufeff"
_JSON_WHITESPACE = " \t\r\n"

# A JSON string (ended by the first unescaped quote), or a quote that no later one
# closes together with the rest of the text (json.loads stops there). Linear:
# an unclosed quote consumes the rest instead of being retried at every quote.
_STRING_OR_TAIL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|".*', re.DOTALL)
# Characters the depth scan counts per step; a step whose openers cannot reach
# the limit is counted with str.count, in C.
_SCAN_STEP = 64
# A \u escape of a surrogate: without one, no decoded string can hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(ValueError):
    """Raised by the json.loads hooks; turned into an InputError by the caller."""


def _status(message: str, status: int) -> InputError:
    return InputError(message, status=status)


# ─── bytes: Content-Encoding, size, UTF-8 ────────────────────────────────────


def content_codings(headers: Mapping[str, str]) -> list[str]:
    """Return the codings named by ``Content-Encoding``, lower-case, identity left out."""
    value = headers.get("content-encoding", "")
    codings = [part.strip().lower() for part in value.split(",")]
    return [c for c in codings if c not in _IDENTITY]


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    """Decompress every gzip member of ``body``, refusing output beyond ``max_bytes``."""
    out = bytearray()
    data = body
    while True:
        stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            # max_length is at least 1 here (out never exceeds max_bytes); 0 would mean "no cap".
            out += stream.decompress(data, max_bytes + 1 - len(out))
        except zlib.error as e:
            raise _status(f"body is labelled gzip but is not valid gzip: {e}", 400) from e
        if len(out) > max_bytes:
            raise _status(f"body exceeds {max_bytes} bytes once decompressed", 413)
        if not stream.eof:
            raise _status("body is labelled gzip but the gzip stream is truncated", 400)
        data = stream.unused_data
        if not data:
            return bytes(out)


def decode_body(body: bytes, headers: Mapping[str, str], max_bytes: int) -> str:
    """Undo the Content-Encoding and decode UTF-8; raise InputError (400, 413, 415)."""
    if len(body) > max_bytes:
        raise _status(f"body exceeds {max_bytes} bytes", 413)
    codings = content_codings(headers)
    if codings:
        if len(codings) > 1 or codings[0] not in _GZIP:
            raise _status(
                f"unsupported Content-Encoding {headers.get('content-encoding', '')!r}: "
                "send the body as is (identity) or gzip",
                415,
            )
        body = _gunzip(body, max_bytes)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _status(
            f"malformed JSON: body is not UTF-8 (byte 0x{body[e.start]:02x} at offset {e.start})",
            400,
        ) from e
    return text.removeprefix(_BOM)


# ─── text: depth, numbers, surrogates ────────────────────────────────────────


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise InputError (400) if ``text`` nests arrays and objects deeper than ``max_depth``.

    Iterative and linear in the text, valid JSON or not. Strings are removed
    first, as json.loads delimits them, so the brackets left are the ones
    json.loads would recurse into.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return
    structure = _STRING_OR_TAIL.sub("", text)
    count = structure.count
    depth = 0
    for start in range(0, len(structure), _SCAN_STEP):
        end = start + _SCAN_STEP
        opens = count("[", start, end) + count("{", start, end)
        if depth + opens <= max_depth:
            depth += opens - count("]", start, end) - count("}", start, end)
            continue
        for char in structure[start:end]:
            if char in "[{":
                depth += 1
                if depth > max_depth:
                    raise _status(
                        f"JSON nested deeper than {max_depth} levels of arrays and objects",
                        400,
                    )
            elif char in "]}":
                depth -= 1


def _parse_int(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(
            f"integer of {digits} digits is outside the signed 64-bit range "
            f"[{INT64_MIN}, {INT64_MAX}]; send it as a string"
        )
    value = int(literal)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _Refused(
            f"integer {literal} is outside the signed 64-bit range "
            f"[{INT64_MIN}, {INT64_MAX}]; send it as a string"
        )
    return value


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        shown = literal if len(literal) <= 40 else literal[:37] + "..."
        raise _Refused(f"number {shown} is too large for a 64-bit float; send it as a string")
    return value


def _parse_constant(literal: str) -> float:
    raise _Refused(f"{literal} is not a JSON number; send null or a string")


def show_key(key: str) -> str:
    """A key as it may appear in a message or a log line: short, printable, else JSON-quoted."""
    shown = key if len(key) <= 60 else key[:57] + "..."
    return shown if shown.isprintable() else json.dumps(shown)


def _describe(path: str) -> str:
    return path or "the body"


def _strings(value: JsonValue) -> Iterator[tuple[str, str, bool]]:
    """Yield ``(path, string, is_key)`` for every key and string, in document order.

    Iterative: children are pushed in reverse so that they pop in order.
    """
    # (path, item, whether item is a key of the object at path)
    stack: list[tuple[str, JsonValue, bool]] = [("", value, False)]
    while stack:
        path, item, is_key = stack.pop()
        if isinstance(item, str):
            yield path, item, is_key
        elif isinstance(item, dict):
            children: list[tuple[str, JsonValue, bool]] = []
            for key, child in item.items():
                child_path = f"{path}.{show_key(key)}" if path else show_key(key)
                children += [(path, key, True), (child_path, child, False)]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", item[i], False) for i in range(len(item) - 1, -1, -1))


def check_surrogates(value: JsonValue) -> None:
    """Raise InputError (400) naming the first key or string that holds a lone surrogate."""
    for path, string, is_key in _strings(value):
        found = _SURROGATE.search(string)
        if found is None:
            continue
        code = f"\\u{ord(found.group()):04x}"
        where = f"the key {show_key(string)} in {_describe(path)}" if is_key else _describe(path)
        raise _status(
            f"lone surrogate {code} at character {found.start()} of {where}: "
            "strings must be Unicode text (pair the surrogate or drop it)",
            400,
        )


def parse_json_text(text: str) -> JsonValue:
    """Parse JSON text under the limits in the module docstring; raise InputError (400)."""
    check_depth(text)
    try:
        value: JsonValue = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _Refused as e:
        raise _status(str(e), 400) from e
    except json.JSONDecodeError as e:
        raise _status(f"malformed JSON: {e}", 400) from e
    except (ValueError, RecursionError) as e:  # pragma: no cover - the checks above prevent them
        raise _status(f"malformed JSON: {type(e).__name__}: {e}", 400) from e
    if _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text):
        check_surrogates(value)
    return value


def parse_json_body(
    body: bytes,
    headers: Mapping[str, str],
    max_bytes: int,
    *,
    empty: dict[str, JsonValue] | None = None,
) -> JsonValue:
    """Decode, check and parse a request body; raise InputError (400, 413 or 415).

    ``headers`` are the request's, with lower-case names (only
    ``content-encoding`` is read); ``max_bytes`` bounds the body before and
    after decompression. A body that is empty or only whitespace once decoded
    is malformed JSON, unless ``empty`` is given: then a copy of it is returned.
    """
    text = decode_body(body, headers, max_bytes)
    if empty is not None and not text.strip(_JSON_WHITESPACE):
        return dict(empty)
    return parse_json_text(text)


# ─── what Firestore accepts in a map stored as sent ──────────────────────────
# Checked against the Firestore emulator through Store.create_session: metadata
# holding 20 levels of maps is stored and 21 are refused ("invalid nested
# entity"); [[1]] and [[]] are refused; "__x__" is reserved; an empty key fails
# in the client; a 1,500-byte key under metadata.m is refused (the limit is on
# the whole path) and a 1,400-byte one stored; a 1.1 MB map exceeds the
# document. Index entries are not enforced by the emulator.

# Levels of maps and arrays in a field, the field itself counted (Firestore: 20).
FIRESTORE_MAX_DEPTH = 20
# A field path ("metadata.labels.team", quoted segments included) (Firestore: 1,500 bytes).
FIRESTORE_MAX_PATH_BYTES = 1500
# Keys and array elements in one stored map. Firestore indexes every map
# field twice and allows 40,000 index entries per document; the emulator does
# not enforce that limit, so this one is kept well below it.
MAX_STORED_ENTRIES = 10_000
# JSON size of one stored map, so that the session document (whose long
# strings move to chunk documents above 256 KiB) stays under 1 MiB.
MAX_STORED_BYTES = 256 * 1024
# Field names Firestore reserves.
_RESERVED = re.compile(r"__.*__", re.DOTALL)
_SIMPLE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Problems reported at most, so that a body of 10,000 bad keys gets a short answer.
MAX_PROBLEMS = 20


def _segment_bytes(key: str) -> int:
    """UTF-8 bytes of ``key`` as a field path segment (quoted with backticks unless simple)."""
    size = len(key.encode("utf-8", "surrogatepass"))
    if _SIMPLE_SEGMENT.fullmatch(key):
        return size
    return size + 2 + key.count("`") + key.count("\\")


def _key_problem(key: str, path_bytes: int) -> str | None:
    if not key:
        return "field names must not be empty"
    if _RESERVED.fullmatch(key):
        return "field names of the form __name__ are reserved by Firestore"
    if path_bytes > FIRESTORE_MAX_PATH_BYTES:
        return f"field path longer than {FIRESTORE_MAX_PATH_BYTES} bytes"
    return None


def firestore_map_problems(value: Mapping[str, Any], field: str) -> list[dict[str, str]]:
    """Return ``{field, message, type}`` for what Firestore would refuse in ``value``.

    ``value`` is a map stored as one field named ``field`` (its numbers and
    strings already checked by :func:`parse_json_text`). At most
    :data:`MAX_PROBLEMS` are returned; empty means it can be stored.
    """
    problems: list[dict[str, str]] = []

    def problem(where: str, message: str, kind: str) -> None:
        problems.append({"field": where, "message": message, "type": kind})

    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):  # pragma: no cover - not from parsed JSON
        size = MAX_STORED_BYTES + 1
    if size > MAX_STORED_BYTES:
        problem(field, f"more than {MAX_STORED_BYTES} bytes once encoded", "firestore_size")
    entries = 0
    # (path shown to the caller, value, depth counting the field itself, path bytes, in array)
    stack: list[tuple[str, Any, int, int, bool]] = [(field, value, 1, _segment_bytes(field), False)]
    while stack and len(problems) < MAX_PROBLEMS:
        where, item, depth, path_bytes, in_array = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > FIRESTORE_MAX_DEPTH:
            problem(
                where,
                f"nested deeper than {FIRESTORE_MAX_DEPTH} levels of maps and arrays",
                "firestore_depth",
            )
            continue
        if isinstance(item, list) and in_array:
            problem(where, "an array cannot directly hold an array", "firestore_nested_array")
            continue
        entries += len(item)
        if entries > MAX_STORED_ENTRIES:
            problem(
                field,
                f"more than {MAX_STORED_ENTRIES} keys and array elements in all",
                "firestore_entries",
            )
            break
        if isinstance(item, list):
            stack.extend(
                (f"{where}[{i}]", child, depth + 1, path_bytes, True)
                for i, child in enumerate(item)
            )
            continue
        for key, child in item.items():
            child_bytes = path_bytes + 1 + _segment_bytes(key)
            message = _key_problem(key, child_bytes)
            if message is None:
                stack.append((f"{where}.{show_key(key)}", child, depth + 1, child_bytes, False))
            else:
                problem(f"{where}.{show_key(key)}", message, "firestore_key")
    return problems[:MAX_PROBLEMS]

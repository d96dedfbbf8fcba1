"""The JSON body reader: encodings, size, UTF-8, depth, numbers, surrogates; Firestore map rules."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest

from tarsy.errors import InputError
from tarsy.http.json_body import (
    FIRESTORE_MAX_DEPTH,
    FIRESTORE_MAX_PATH_BYTES,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_PROBLEMS,
    MAX_STORED_BYTES,
    MAX_STORED_ENTRIES,
    JsonValue,
    check_depth,
    content_codings,
    decode_body,
    firestore_map_problems,
    parse_json_body,
    parse_json_text,
    show_key,
)

LIMIT = 10_000
GZIP = {"content-encoding": "gzip"}


def parse(body: bytes, headers: dict[str, str] | None = None, limit: int = LIMIT) -> JsonValue:
    return parse_json_body(body, headers or {}, limit)


def refused(body: bytes, headers: dict[str, str] | None = None, limit: int = LIMIT) -> InputError:
    with pytest.raises(InputError) as failure:
        parse(body, headers, limit)
    return failure.value


def nested(depth: int, opener: str = "[", closer: str = "]", leaf: str = "1") -> str:
    return opener * depth + leaf + closer * depth


# ─── Content-Encoding ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("value", "codings"),
    [
        (None, []),
        ("", []),
        ("identity", []),
        (" Identity ", []),
        ("gzip", ["gzip"]),
        ("GZip", ["gzip"]),
        ("gzip, identity", ["gzip"]),
        ("x-gzip", ["x-gzip"]),
        ("gzip, gzip", ["gzip", "gzip"]),
        ("br", ["br"]),
        ("deflate,gzip", ["deflate", "gzip"]),
    ],
)
def test_content_codings(value: str | None, codings: list[str]) -> None:
    headers = {} if value is None else {"content-encoding": value}
    assert content_codings(headers) == codings


@pytest.mark.parametrize("label", ["gzip", "x-gzip", "GZIP", " gzip ", "identity, gzip"])
def test_gzip_is_decompressed(label: str) -> None:
    body = gzip.compress(b'{"a": [1, 2]}')
    assert parse(body, {"content-encoding": label}) == {"a": [1, 2]}


def test_multi_member_gzip_is_read_whole() -> None:
    body = gzip.compress(b'{"a": ') + gzip.compress(b"[1, 2]}")
    assert parse(body, GZIP) == {"a": [1, 2]}


@pytest.mark.parametrize("label", ["identity", "", "Identity"])
def test_identity_reads_the_body_as_is(label: str) -> None:
    assert parse(b'{"a": 1}', {"content-encoding": label}) == {"a": 1}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b'{"a": 1}', "not valid gzip", id="plain-body"),
        pytest.param(b"", "truncated", id="empty-body"),
        pytest.param(gzip.compress(b'{"a": 1}')[:-4], "truncated", id="truncated"),
        pytest.param(gzip.compress(b'{"a": 1}')[:12], "truncated", id="header-only"),
        pytest.param(gzip.compress(b'{"a": 1}') + b"trailing", "not valid gzip", id="trailing"),
        pytest.param(zlib.compress(b'{"a": 1}'), "not valid gzip", id="zlib-not-gzip"),
    ],
)
def test_bad_gzip_is_400(body: bytes, message: str) -> None:
    error = refused(body, GZIP)
    assert error.status == 400
    assert message in str(error)


def test_corrupt_gzip_payload_is_400() -> None:
    body = bytearray(gzip.compress(b'{"a": "' + b"x" * 200 + b'"}'))
    body[-8] ^= 0xFF  # the CRC
    error = refused(bytes(body), GZIP)
    assert error.status == 400
    assert "gzip" in str(error)


def test_gzip_bomb_is_413_and_stops_at_the_limit() -> None:
    bomb = gzip.compress(b" " * 5_000_000, compresslevel=9)
    assert len(bomb) < LIMIT
    error = refused(bomb, GZIP)
    assert error.status == 413
    assert f"{LIMIT} bytes once decompressed" in str(error)


def test_multi_member_bomb_is_413() -> None:
    member = gzip.compress(b" " * (LIMIT // 2 + 1))
    error = refused(member * 3, GZIP)
    assert error.status == 413


def test_decompressed_size_at_the_limit_is_accepted() -> None:
    text = b'{"a": "' + b"x" * (LIMIT - 9) + b'"}'
    assert len(text) == LIMIT
    assert parse(gzip.compress(text), GZIP) == {"a": "x" * (LIMIT - 9)}
    assert refused(gzip.compress(text + b" "), GZIP).status == 413


def test_raw_body_over_the_limit_is_413() -> None:
    assert refused(b" " * (LIMIT + 1)).status == 413
    assert parse(b"1" + b" " * (LIMIT - 1)) == 1


@pytest.mark.parametrize(
    "label", ["br", "deflate", "compress", "zstd", "gzip, gzip", "gzip, br", "x-unknown", "*"]
)
def test_other_encodings_are_415(label: str) -> None:
    error = refused(gzip.compress(b"{}"), {"content-encoding": label})
    assert error.status == 415
    assert "Content-Encoding" in str(error)


def test_encoding_is_checked_before_utf8() -> None:
    assert refused(b"\xff", {"content-encoding": "br"}).status == 415


# ─── UTF-8 ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("body", "offset"),
    [
        (b"\xff{}", 0),
        (b'{"a": "\xc3\x28"}', 7),
        (b'{"a": "\xed\xa0\x80"}', 7),  # a surrogate encoded as UTF-8 bytes
        (b'{"a": "\xf8\x88\x80\x80\x80"}', 7),
        ('{"a": "é"}'.encode("latin-1"), 7),
        ('{"a": 1}'.encode("utf-16"), 0),
    ],
)
def test_invalid_utf8_is_400_with_the_offset(body: bytes, offset: int) -> None:
    error = refused(body)
    assert error.status == 400
    assert "not UTF-8" in str(error)
    assert f"offset {offset})" in str(error)


def test_utf8_bom_is_ignored() -> None:
    assert parse(b'\xef\xbb\xbf{"a": "\xc3\xa9"}') == {"a": "é"}


def test_decode_body_returns_text() -> None:
    assert decode_body(gzip.compress("ü".encode()), GZIP, LIMIT) == "ü"


# ─── empty bodies ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize("body", [b"", b"  \n\t"])
def test_empty_body_is_malformed_unless_a_default_is_given(body: bytes) -> None:
    assert refused(body).status == 400
    default: dict[str, JsonValue] = {}
    value = parse_json_body(body, {}, LIMIT, empty=default)
    assert value == {}
    assert value is not default


def test_empty_default_applies_after_decompression() -> None:
    assert parse_json_body(gzip.compress(b" "), GZIP, LIMIT, empty={"x": 1}) == {"x": 1}


def test_nonempty_body_ignores_the_default() -> None:
    assert parse_json_body(b"[1]", {}, LIMIT, empty={}) == [1]


# ─── depth ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("opener", "closer", "leaf"), [("[", "]", "1"), ('{"a":', "}", "1")])
def test_depth_at_the_limit_is_accepted_one_more_is_400(
    opener: str, closer: str, leaf: str
) -> None:
    assert parse(nested(MAX_DEPTH, opener, closer, leaf).encode()) is not None
    error = refused(nested(MAX_DEPTH + 1, opener, closer, leaf).encode())
    assert error.status == 400
    assert str(error) == f"JSON nested deeper than {MAX_DEPTH} levels of arrays and objects"


@pytest.mark.parametrize("depth", [1_000, 10_000, 100_000])
def test_very_deep_nesting_is_400_not_recursion(depth: int) -> None:
    assert refused(nested(depth).encode(), limit=10**6).status == 400
    assert refused(nested(depth, '{"k":', "}").encode(), limit=10**6).status == 400


def test_unclosed_deep_nesting_is_400() -> None:
    assert refused(b"[" * 50_000, limit=10**6).status == 400


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[" * 5_000, "b": '\\"[[[[', "c": ["{" * 100]})
    assert parse_json_text(text) == json.loads(text)


def test_escaped_quotes_do_not_end_strings() -> None:
    # The string holds an escaped quote followed by brackets: all inside the string.
    text = '["\\"' + "[" * 200 + '"]'
    assert parse_json_text(text) == ['"' + "[" * 200]


def test_wide_but_shallow_is_accepted() -> None:
    text = "[" + ",".join(["[[1], {}]"] * 5_000) + "]"
    assert len(parse_json_text(text)) == 5_000  # type: ignore[arg-type]


def test_deep_after_a_long_shallow_run_is_caught() -> None:
    text = "[" * (MAX_DEPTH - 2) + "[]," * 3_000 + nested(3) + "]" * (MAX_DEPTH - 2)
    with pytest.raises(InputError):
        check_depth(text)
    check_depth(text.replace(nested(3), nested(2)))


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 20_000,  # one unterminated string full of escaped quotes
        '"' * 20_001,
        "[" * 100 + '"',
        '["' + "[" * 100,
        "]" * 200 + "[" * 10,
        "\\" * 1_000 + "[" * 70,
    ],
)
def test_depth_scan_is_safe_on_garbage(text: str) -> None:
    try:
        parse_json_text(text)
    except InputError as e:
        assert e.status == 400
    else:  # pragma: no cover - every text above is malformed
        pytest.fail("garbage accepted")


# ─── numbers ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "literal", [str(INT64_MAX), str(INT64_MIN), "0", "-0", "1" * 18, "-" + "9" * 18]
)
def test_int64_range_is_accepted(literal: str) -> None:
    assert parse_json_text(f"[{literal}]") == [int(literal)]


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        (str(INT64_MAX + 1), f"integer {INT64_MAX + 1} is outside"),
        (str(INT64_MIN - 1), f"integer {INT64_MIN - 1} is outside"),
        ("9" * 19, "outside the signed 64-bit range"),
        ("1" * 20, "integer of 20 digits"),
        ("1" * 5_000, "integer of 5000 digits"),
        ("-" + "1" * 100_000, "integer of 100000 digits"),
    ],
)
def test_integers_outside_int64_are_400(literal: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as failure:
        parse_json_text(f'{{"a": {literal}}}')
    assert failure.value.status == 400
    assert "send it as a string" in str(failure.value)


@pytest.mark.parametrize(
    "literal", ["1.5", "-0.0", "1e308", "1e-999999", "1" * 300 + ".0", "0." + "1" * 5_000]
)
def test_finite_floats_are_accepted(literal: str) -> None:
    assert parse_json_text(literal) == float(literal)


@pytest.mark.parametrize("literal", ["1e999999", "-1e999999", "1e309", "1" * 400 + "e0"])
def test_floats_that_overflow_are_400(literal: str) -> None:
    with pytest.raises(InputError, match="too large for a 64-bit float") as failure:
        parse_json_text(f"[{literal}]")
    assert failure.value.status == 400
    assert len(str(failure.value)) < 200


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_400(literal: str) -> None:
    with pytest.raises(InputError) as failure:
        parse_json_text(f'{{"a": {literal}}}')
    assert failure.value.status == 400
    assert str(failure.value) == f"{literal} is not a JSON number; send null or a string"


# ─── lone surrogates ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": "\\ud800"}', "at character 0 of a:"),
        ('{"a": {"b": ["ok", "x\\udfff"]}}', "at character 1 of a.b[1]:"),
        ('{"\\ud800": 1}', 'of the key "\\ud800" in the body:'),
        ('{"m": {"k\\udc00": 1}}', 'of the key "k\\udc00" in m:'),
        ('"\\uDBFF"', "of the body:"),
        ('["\\ude00\\ud83d"]', "at character 0 of [0]:"),  # a pair in the wrong order
        ('["\\ud83d"]', "of [0]:"),
        ('["\\ud83d\\u0041"]', "of [0]:"),
    ],
)
def test_lone_surrogates_are_400_naming_where(text: str, where: str) -> None:
    with pytest.raises(InputError) as failure:
        parse_json_text(text)
    assert failure.value.status == 400
    assert str(failure.value).startswith("lone surrogate \\u")
    assert where in str(failure.value)


def test_the_first_surrogate_in_document_order_is_named() -> None:
    text = '{"a": ["ok", {"b": "\\ud800"}], "c": "\\udfff", "\\udbff": 1}'
    with pytest.raises(InputError, match=r"\\ud800 at character 0 of a\[1\]\.b:"):
        parse_json_text(text)


def test_surrogate_pairs_are_text() -> None:
    assert parse_json_text('{"\\ud83d\\ude00": "\\uD83D\\uDE00"}') == {"😀": "😀"}


def test_escaped_backslash_before_u_is_not_a_surrogate() -> None:
    assert parse_json_text('["\\\\ud800"]') == ["\\ud800"]


def test_raw_surrogates_in_text_are_caught() -> None:
    with pytest.raises(InputError, match="lone surrogate"):
        parse_json_text('["\ud800"]')


def test_surrogate_message_is_printable() -> None:
    with pytest.raises(InputError) as failure:
        parse_json_text('{"a\\nb": {"\\ud800\\n": 1}}')
    message = str(failure.value)
    assert message.isprintable()
    message.encode("utf-8")


@pytest.mark.parametrize(
    ("key", "shown"),
    [("team", "team"), ("a b", "a b"), ("a\nb", '"a\\nb"'), ("k" * 100, "k" * 57 + "...")],
)
def test_show_key(key: str, shown: str) -> None:
    assert show_key(key) == shown


# ─── malformed JSON ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("text", ["{", "{'a': 1}", '{"a": 1} x', "[1,]", '{"a" 1}', "tru"])
def test_malformed_json_is_400(text: str) -> None:
    with pytest.raises(InputError, match=r"^malformed JSON") as failure:
        parse_json_text(text)
    assert failure.value.status == 400


# ─── what Firestore stores in a map ───────────────────────────────────────────


def nest_maps(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def kinds(value: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["field"], p["type"]) for p in firestore_map_problems(value, "metadata")]


def test_ordinary_metadata_has_no_problems() -> None:
    value = {"team": "sre", "labels": {"a.b": "c", "k": [1, {"x": [2]}]}, "n": None, "f": 1.5}
    assert firestore_map_problems(value, "metadata") == []


def test_depth_limit_counts_the_field_itself() -> None:
    assert kinds(nest_maps(FIRESTORE_MAX_DEPTH)) == []
    too_deep = nest_maps(FIRESTORE_MAX_DEPTH + 1)
    [(field, kind)] = kinds(too_deep)
    assert kind == "firestore_depth"
    assert field == "metadata" + ".a" * FIRESTORE_MAX_DEPTH


def test_arrays_count_toward_depth() -> None:
    value: Any = 1
    for level in range(FIRESTORE_MAX_DEPTH):
        value = [value] if level % 2 == 0 else {"a": value}
    [(field, kind)] = kinds({"x": value})
    assert kind == "firestore_depth"
    assert field == "metadata.x" + ".a[0]" * 9 + ".a"
    assert kinds({"x": value["a"]}) == []


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": [[1]]}, "metadata.a[0]"),
        ({"a": [1, []]}, "metadata.a[1]"),
        ({"a": [{"b": [[]]}]}, "metadata.a[0].b[0]"),
    ],
)
def test_arrays_in_arrays_are_refused(value: dict[str, Any], field: str) -> None:
    assert kinds(value) == [(field, "firestore_nested_array")]


def test_arrays_of_maps_of_arrays_are_fine() -> None:
    assert kinds({"a": [{"b": [1]}]}) == []


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "must not be empty"),
        ("__name__", "reserved"),
        ("____", "reserved"),
        ("k" * FIRESTORE_MAX_PATH_BYTES, "field path longer"),
    ],
)
def test_bad_field_names(key: str, message: str) -> None:
    [problem] = firestore_map_problems({"labels": {key: 1}}, "metadata")
    assert problem["type"] == "firestore_key"
    assert message in problem["message"]
    assert problem["field"].startswith("metadata.labels.")


@pytest.mark.parametrize("key", ["__a", "a__", "___", "_x_", "a.b", "`b`", "a b", "é"])
def test_acceptable_field_names(key: str) -> None:
    assert kinds({key: 1}) == []


def test_field_path_counts_every_segment_in_utf8() -> None:
    # metadata + "." + `é...é` (quoted): 8 + 1 + 2 + 2 * n bytes
    fits = (FIRESTORE_MAX_PATH_BYTES - 11) // 2
    assert kinds({"é" * fits: 1}) == []
    assert kinds({"é" * (fits + 1): 1}) == [("metadata." + "é" * 57 + "...", "firestore_key")]


def test_too_many_entries() -> None:
    value = {f"k{i}": i for i in range(MAX_STORED_ENTRIES + 1)}
    assert kinds(value) == [("metadata", "firestore_entries")]
    assert kinds({"a": list(range(MAX_STORED_ENTRIES - 1))}) == []
    assert kinds({"a": list(range(MAX_STORED_ENTRIES))}) == [("metadata", "firestore_entries")]
    spread = {"a": [{"b": list(range(MAX_STORED_ENTRIES // 2))} for _ in range(2)]}
    assert kinds(spread) == [("metadata", "firestore_entries")]


def test_too_many_bytes() -> None:
    assert kinds({"a": "x" * MAX_STORED_BYTES}) == [("metadata", "firestore_size")]
    assert kinds({"a": "x" * (MAX_STORED_BYTES - 20)}) == []


def test_problems_are_capped() -> None:
    value = {f"__{i}__": 1 for i in range(100)}
    assert len(firestore_map_problems(value, "metadata")) == MAX_PROBLEMS

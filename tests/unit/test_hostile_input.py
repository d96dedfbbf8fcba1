"""Hostile ingest bodies: each known case is a named test, then a bounded fuzz of the rest.

The property: ``parse_submission`` returns an AlertSubmission that Firestore
can store, or raises InputError with a 4xx status. Never anything else, for
any bytes and any Content-Encoding; and the handler writes and publishes
nothing on a rejection.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tarsy.config import load_config
from tarsy.errors import InputError
from tarsy.http.json_body import FIRESTORE_MAX_DEPTH, INT64_MAX, INT64_MIN, MAX_DEPTH
from tarsy.http.request import HttpRequest
from tarsy.intake.ingest import handle
from tarsy.intake.sources.api import parse_submission
from tarsy.models import AlertSubmission, Session, StepMessage
from tarsy.persistence.store import Store
from tarsy.settings import Settings

SETTINGS = Settings(TARSY_AUTH_DISABLED=True)
LIMIT = SETTINGS.max_alert_bytes


def request(body: bytes, encoding: str | None = None) -> HttpRequest:
    headers = {"content-type": "application/json"}
    if encoding is not None:
        headers["content-encoding"] = encoding
    return HttpRequest(method="POST", path="/alerts", headers=headers, body=body)


def alert(data: str = '{"pod": "api-0"}', metadata: str = "{}") -> bytes:
    """An alert whose ``data`` and ``metadata`` are given as raw JSON text."""
    return f'{{"alert_type": "Pod", "data": {data}, "metadata": {metadata}}}'.encode()


def deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@dataclass(frozen=True)
class Case:
    body: bytes
    status: int
    message: str
    encoding: str | None = None


BOMB = gzip.compress(b" " * (LIMIT * 4), compresslevel=9)

CASES = {
    "nesting-10000-deep-arrays-is-400": Case(
        alert(data=f'{{"x": {deep(10_000)}}}'), 400, f"deeper than {MAX_DEPTH} levels"
    ),
    "nesting-10000-deep-objects-is-400": Case(
        alert(data=deep_object(10_000)), 400, f"deeper than {MAX_DEPTH} levels"
    ),
    "nesting-10000-deep-in-metadata-is-400": Case(
        alert(metadata=deep_object(10_000)), 400, "deeper than"
    ),
    "integer-of-5000-digits-is-400": Case(
        alert(data='{"n": ' + "7" * 5_000 + "}"), 400, "integer of 5000 digits"
    ),
    "integer-2-pow-63-is-400": Case(
        alert(metadata=f'{{"n": {2**63}}}'), 400, f"integer {2**63} is outside"
    ),
    "integer-minus-2-pow-63-minus-1-is-400": Case(
        alert(metadata=f'{{"n": {-(2**63) - 1}}}'), 400, f"integer {-(2**63) - 1} is outside"
    ),
    "nan-is-400": Case(alert(metadata='{"x": NaN}'), 400, "NaN is not a JSON number"),
    "infinity-is-400": Case(
        alert(data='{"x": Infinity}'), 400, "Infinity is not a JSON number"
    ),
    "minus-infinity-is-400": Case(
        alert(metadata='{"x": [-Infinity]}'), 400, "-Infinity is not a JSON number"
    ),
    "1e999999-is-400": Case(alert(data='{"x": 1e999999}'), 400, "1e999999 is too large"),
    "surrogate-value-in-data-is-400": Case(
        alert(data='{"pod": "api-\\ud800"}'), 400,
        "lone surrogate \\ud800 at character 4 of data.pod",
    ),
    "surrogate-key-in-data-is-400": Case(
        alert(data='{"\\ud800": 1}'), 400,
        'lone surrogate \\ud800 at character 0 of the key "\\ud800" in data',
    ),
    "surrogate-value-in-metadata-is-400": Case(
        alert(metadata='{"team": ["\\udfff"]}'), 400, "of metadata.team[0]"
    ),
    "surrogate-key-in-metadata-is-400": Case(
        alert(metadata='{"t\\udc00": 1}'), 400, 'the key "t\\udc00" in metadata'
    ),
    "surrogate-as-data-text-is-400": Case(
        b'{"alert_type": "Pod", "data": "\\ud83d"}', 400, "of data:"
    ),
    "plain-body-labelled-gzip-is-400": Case(alert(), 400, "not valid gzip", encoding="gzip"),
    "gzip-bomb-is-413": Case(BOMB, 413, f"exceeds {LIMIT} bytes once decompressed", "gzip"),
    "brotli-is-415": Case(alert(), 415, "unsupported Content-Encoding 'br'", encoding="br"),
    "deflate-is-415": Case(alert(), 415, "unsupported Content-Encoding", encoding="deflate"),
    "invalid-utf8-is-400": Case(
        b'{"alert_type": "Pod", "data": "\xc3\x28"}', 400, "not UTF-8 (byte 0xc3 at offset 31)"
    ),
    "utf16-is-400": Case(alert().decode().encode("utf-16"), 400, "not UTF-8"),
    "metadata-deeper-than-firestore-is-422": Case(
        alert(metadata=deep_object(FIRESTORE_MAX_DEPTH + 1)), 422, "metadata cannot be stored"
    ),
    "metadata-array-in-array-is-422": Case(
        alert(metadata='{"a": [[1]]}'), 422, "metadata cannot be stored"
    ),
    "metadata-reserved-key-is-422": Case(
        alert(metadata='{"__name__": 1}'), 422, "metadata cannot be stored"
    ),
    "metadata-empty-key-is-422": Case(
        alert(metadata='{"a": {"": 1}}'), 422, "metadata cannot be stored"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_hostile_body_is_refused(case: Case) -> None:
    with pytest.raises(InputError) as failure:
        parse_submission(request(case.body, case.encoding), SETTINGS)
    assert failure.value.status == case.status
    assert case.message in str(failure.value)


def test_metadata_problems_are_field_level() -> None:
    body = alert(metadata='{"a": [[1]], "__x__": 2, "ok": {"": 3}}')
    with pytest.raises(InputError) as failure:
        parse_submission(request(body), SETTINGS)
    details = cast(list[dict[str, str]], failure.value.details)
    assert sorted(d["field"] for d in details) == [
        "metadata.__x__",
        "metadata.a[0]",
        "metadata.ok.",
    ]
    assert all(d["message"] and d["type"].startswith("firestore_") for d in details)


def test_gzip_body_is_accepted() -> None:
    body = gzip.compress(alert(metadata='{"team": "sre"}'))
    submission = parse_submission(request(body, "gzip"), SETTINGS)
    assert submission == AlertSubmission(
        alert_type="Pod", data={"pod": "api-0"}, metadata={"team": "sre"}
    )


def test_identity_encoding_is_accepted() -> None:
    assert parse_submission(request(alert(), "identity"), SETTINGS).alert_type == "Pod"


@pytest.mark.parametrize("value", [INT64_MAX, INT64_MIN])
def test_int64_bounds_are_accepted(value: int) -> None:
    body = alert(metadata=f'{{"n": {value}}}')
    assert parse_submission(request(body), SETTINGS).metadata == {"n": value}


def test_nesting_at_the_limit_is_accepted() -> None:
    # The alert object and data's own object take two of the levels.
    body = alert(data=f'{{"x": {deep(MAX_DEPTH - 2)}}}')
    assert parse_submission(request(body), SETTINGS).alert_type == "Pod"


def test_surrogate_pairs_are_accepted() -> None:
    body = alert(data='{"msg": "\\ud83d\\udd25 on fire"}', metadata='{"\\ud83d\\ude00": 1}')
    submission = parse_submission(request(body), SETTINGS)
    assert submission.data == {"msg": "🔥 on fire"}
    assert submission.metadata == {"😀": 1}


def test_the_size_limit_applies_to_the_decompressed_body() -> None:
    small = Settings(TARSY_AUTH_DISABLED=True, TARSY_MAX_ALERT_BYTES=200)
    body = json.dumps({"alert_type": "x", "data": "a" * 300}).encode()
    compressed = gzip.compress(body)
    assert len(compressed) < 200
    with pytest.raises(InputError) as failure:
        parse_submission(request(compressed, "gzip"), small)
    assert failure.value.status == 413


# ─── the handler writes nothing on any of them ────────────────────────────────


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}

    async def create_session(self, session: Session) -> None:
        self.sessions[session.session_id] = session

    async def delete_session(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)


class MemoryBus:
    def __init__(self) -> None:
        self.messages: list[StepMessage] = []

    async def publish(self, message: StepMessage) -> str:
        self.messages.append(message)
        return str(len(self.messages))


CONFIG = load_config(Settings())


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_handler_answers_4xx_and_writes_nothing(case: Case) -> None:
    store, bus = MemoryStore(), MemoryBus()
    response = await handle(
        request(case.body, case.encoding), SETTINGS, CONFIG, cast(Store, store), bus
    )
    assert response.status == case.status
    assert response.body["error"]["status"] == case.status
    assert store.sessions == {} and bus.messages == []
    json.dumps(response.body).encode("utf-8")  # the error body itself is printable


# ─── fuzz ─────────────────────────────────────────────────────────────────────


def check_outcome(req: HttpRequest) -> None:
    """The property: a storable submission, or an InputError with a 4xx status."""
    try:
        submission = parse_submission(req, SETTINGS)
    except InputError as e:
        assert 400 <= e.status < 500, (e.status, str(e))
        str(e).encode("utf-8")
        json.dumps({"message": str(e), "details": e.details})
        return
    assert_storable(submission)


def values(value: Any) -> Iterator[tuple[int, Any]]:
    """Yield ``(container depth, item)`` for every value and key inside ``value``."""
    stack: list[tuple[int, Any]] = [(0, value)]
    while stack:
        depth, item = stack.pop()
        yield depth, item
        if isinstance(item, dict):
            for key, child in item.items():
                yield depth + 1, key
                stack.append((depth + 1, child))
        elif isinstance(item, list):
            stack.extend((depth + 1, child) for child in item)


def assert_storable(submission: AlertSubmission) -> None:
    """What Firestore needs, checked independently of the code under test."""
    for _, item in values(submission.model_dump(mode="python")):
        if isinstance(item, str):
            item.encode("utf-8")  # no lone surrogate
        elif isinstance(item, bool):
            pass
        elif isinstance(item, int):
            assert INT64_MIN <= item <= INT64_MAX
        elif isinstance(item, float):
            assert math.isfinite(item)
    for depth, item in values(submission.metadata):
        assert depth < FIRESTORE_MAX_DEPTH
        if isinstance(item, list):
            assert not any(isinstance(child, list) for child in item)
        if isinstance(item, dict):
            assert all(key and not (key.startswith("__") and key.endswith("__")) for key in item)
    submission.data_as_text().encode("utf-8")


FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ENCODINGS = st.sampled_from(
    [None, "identity", "gzip", "GZIP", "x-gzip", "gzip, identity", "br", "deflate", "gzip, gzip",
     "zstd", ""]
)  # fmt: skip


@FUZZ
@given(body=st.binary(max_size=4096), encoding=ENCODINGS)
def test_fuzz_arbitrary_bytes(body: bytes, encoding: str | None) -> None:
    check_outcome(request(body, encoding))


# Raw JSON fragments a hostile client sends where a value goes.
HOSTILE_VALUES = st.one_of(
    st.sampled_from([
        "NaN", "Infinity", "-Infinity", "1e999999", "-1e999999", "1e-999999", "-0", "0.0",
        str(INT64_MAX), str(INT64_MIN), str(INT64_MAX + 1), str(INT64_MIN - 1), "9" * 19,
        "1" * 5_000, "-" + "1" * 4_301, "1" * 400 + ".5", "1" * 400 + "e0",
        '"\\ud800"', '"\\udfff"', '"a\\udc00b"', '"\\ud83d\\ude00"', '"\\ude00\\ud83d"',
        '"\\\\ud800"', '"\\u0000"', '""', "[[]]", "[[1], 2]", '{"": 1}', '{"__name__": 1}',
    ]),
    st.integers(min_value=1, max_value=3_000).flatmap(
        lambda n: st.sampled_from([deep(n), deep_object(n), "[" * n])
    ),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
)  # fmt: skip
HOSTILE_KEYS = st.sampled_from(
    ['"\\ud800"', '"k\\udbff"', '"\\ud83d\\ude00"', '""', '"__x__"', '"a.b"', '"\\u0000"']
)
PLAIN_KEYS = st.text(max_size=8).map(json.dumps)
LEAVES = st.one_of(
    st.none().map(json.dumps),
    st.booleans().map(json.dumps),
    st.integers(min_value=-(2**64), max_value=2**64).map(json.dumps),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.text(max_size=20).map(json.dumps),
    HOSTILE_VALUES,
)


def _array(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


# JSON text built from raw fragments, so that it can hold what json.dumps never writes.
JSON_TEXT = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(_array),
        st.lists(st.tuples(st.one_of(PLAIN_KEYS, HOSTILE_KEYS), children), max_size=4).map(_object),
    ),
    max_leaves=12,
)
KEYS = st.one_of(PLAIN_KEYS, PLAIN_KEYS, HOSTILE_KEYS)
# Objects, as data and metadata must be: most bodies then get past the schema.
OBJECT_TEXT = st.lists(st.tuples(KEYS, JSON_TEXT), min_size=1, max_size=4).map(_object)
# Mostly valid alert types, so that most bodies reach the values they carry.
ALERT_TYPES = st.one_of(
    st.from_regex(r"[A-Za-z0-9_.:/ -]{1,20}", fullmatch=True), st.just("Pod"), st.text()
)


@st.composite
def alert_texts(draw: st.DrawFn) -> str:
    pairs = [
        ('"alert_type"', json.dumps(draw(ALERT_TYPES))),  # st.text() has no surrogates
        ('"data"', draw(st.one_of(OBJECT_TEXT, JSON_TEXT, st.text(min_size=1).map(json.dumps)))),
    ]
    if draw(st.booleans()):
        pairs.append(('"metadata"', draw(st.one_of(OBJECT_TEXT, OBJECT_TEXT, JSON_TEXT))))
    if draw(st.booleans()):
        pairs.append(('"runbook"', draw(st.one_of(st.text().map(json.dumps), HOSTILE_VALUES))))
    return _object(pairs)


@st.composite
def encoded(draw: st.DrawFn, text: str) -> tuple[bytes, str | None]:
    """The text as bytes, some of them broken, with a Content-Encoding header (right or not)."""
    body = text.encode("utf-8", "surrogatepass")
    how = draw(st.sampled_from(["plain", "utf16", "latin1", "cut", "flip", "bom"]))
    if how == "utf16":
        body = text.encode("utf-16", "surrogatepass")
    elif how == "latin1":
        body = text.encode("latin-1", "replace")
    elif how == "cut" and body:
        body = body[: draw(st.integers(min_value=0, max_value=len(body) - 1))]
    elif how == "flip" and body:
        at = draw(st.integers(min_value=0, max_value=len(body) - 1))
        body = body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
    elif how == "bom":
        body = b"\xef\xbb\xbf" + body
    encoding = draw(ENCODINGS)
    compress = draw(st.sampled_from(["right", "none", "twice", "truncated"]))
    labelled_gzip = encoding is not None and "gzip" in encoding.lower()
    if (compress == "right" and labelled_gzip) or compress == "twice":
        body = gzip.compress(body, mtime=0)
    if compress == "twice":
        body = gzip.compress(body, mtime=0)
    if compress == "truncated":
        body = gzip.compress(body, mtime=0)[:-5]
    return body, encoding


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_alerts(data: st.DataObject) -> None:
    text = data.draw(alert_texts())
    body, encoding = data.draw(encoded(text))
    check_outcome(request(body, encoding))


@FUZZ
@given(text=alert_texts())
def test_fuzz_well_formed_alerts_with_hostile_values(text: str) -> None:
    check_outcome(request(text.encode("utf-8", "surrogatepass")))

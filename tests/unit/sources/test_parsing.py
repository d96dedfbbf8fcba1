"""Bytes to models: 400 for what is not JSON, 422 naming fields for the wrong shape."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tarsy.intake.sources.errors import MalformedBodyError, PayloadShapeError, problem
from tarsy.intake.sources.parsing import parse_json, require_object, validate_payload


class Inner(BaseModel):
    count: int


class Outer(BaseModel):
    name: str
    inner: Inner


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError inside json
        b'{"n": ' + b"9" * 5000 + b"}",  # int over the digit limit
        b"\xc3\x28",
        b"{'single': 'quotes'}",
        b"",
    ],
)
def test_hostile_or_broken_json_is_400(body: bytes) -> None:
    with pytest.raises(MalformedBodyError) as raised:
        parse_json(body)
    assert raised.value.status == 400


def test_nested_errors_become_dotted_fields() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        validate_payload(Outer, {"inner": {"count": "many"}}, "thing", prefix="Message")

    assert raised.value.status == 422
    assert sorted(raised.value.fields) == ["Message.inner.count", "Message.name"]
    assert str(raised.value) == "thing does not match its documented shape"
    assert raised.value.details == raised.value.problems


def test_require_object_names_where() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        require_object([1], "thing", field="event.data")
    assert raised.value.problems == [problem("event.data", "expected an object", "dict_type")]


@pytest.mark.parametrize("body", [b'{"v": NaN}', b'{"v": Infinity}', b"[-Infinity]"])
def test_non_json_constants_are_400(body: bytes) -> None:
    with pytest.raises(MalformedBodyError):
        parse_json(body)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"labels": {"a": "\\ud800"}}', "labels.a"),
        (b'{"labels": {"\\udfff": "x"}}', "labels.\udfff"),
        (b'{"alerts": [{"n": 1}, {"n": 9223372036854775808}]}', "alerts.1.n"),
        (b'{"n": -9223372036854775809}', "n"),
        (b'"\\ud83d"', "(body)"),
    ],
)
def test_unstorable_values_are_422_with_their_path(body: bytes, field: str) -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_json(body)
    assert raised.value.fields == [field]
    assert raised.value.problems[0]["type"] == "unstorable"


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": 9223372036854775807, "m": -9223372036854775808, "b": true}',
        b'{"emoji": "\\ud83d\\ude00", "text": "\\u00fcber"}',
        b"[" * 900 + b"]" * 900,
    ],
)
def test_storable_values_pass(body: bytes) -> None:
    parse_json(body)


def test_unstorable_inside_an_sns_message_names_the_message_field() -> None:
    with pytest.raises(PayloadShapeError) as raised:
        parse_json('{"AlarmName": "\\udc00"}', prefix="Message")
    assert raised.value.fields == ["Message.AlarmName"]

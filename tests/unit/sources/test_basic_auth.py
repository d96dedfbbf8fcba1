"""The API key as Bearer, X-API-Key or basic-auth password (any user name)."""

from __future__ import annotations

import base64

import pytest
from pydantic import SecretStr

from tarsy.errors import AuthError
from tarsy.intake.sources.basic_auth import check_key, parse_basic_auth, presented_key
from tarsy.intake.sources.errors import BASIC_CHALLENGE, BasicAuthRequired, CredentialsError

KEY = "s3cret-key"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("header", "user", "password"),
    [
        (basic("alertmanager", KEY), "alertmanager", KEY),
        (basic("", KEY), "", KEY),
        (basic("sns", "pa:ss:word"), "sns", "pa:ss:word"),
        (basic("grafana", "pässwörd"), "grafana", "pässwörd"),
        ("basic " + base64.b64encode(b"u:p").decode(), "u", "p"),
        ("  Basic   " + base64.b64encode(b"u:p").decode() + "  ", "u", "p"),
    ],
)
def test_parse_basic_auth(header: str, user: str, password: str) -> None:
    credentials = parse_basic_auth(header)
    assert credentials is not None
    assert credentials.username == user
    assert credentials.password.get_secret_value() == password
    assert f"'{password}'" not in repr(credentials)


@pytest.mark.parametrize("header", [None, "", "Bearer abc", "Digest username=x"])
def test_other_schemes_are_not_basic(header: str | None) -> None:
    assert parse_basic_auth(header) is None


@pytest.mark.parametrize(
    "header",
    [
        "Basic !!!",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:\xff").decode(),
        "Basic dXNlcjpwYXNz=extra",
    ],
)
def test_malformed_basic_auth_is_401(header: str) -> None:
    with pytest.raises(CredentialsError) as raised:
        parse_basic_auth(header)
    assert raised.value.status == 401
    assert isinstance(raised.value, AuthError)


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({}, None),
        ({"authorization": f"Bearer {KEY}"}, KEY),
        ({"authorization": basic("anyone", KEY)}, KEY),
        ({"authorization": basic("anyone", "")}, None),
        ({"authorization": basic("anyone", ""), "x-api-key": KEY}, KEY),
        ({"x-api-key": f"  {KEY} "}, KEY),
        ({"authorization": basic("u", "from-basic"), "x-api-key": "from-header"}, "from-basic"),
        ({"authorization": "Bearer  ", "x-api-key": KEY}, KEY),
    ],
)
def test_presented_key(headers: dict[str, str], key: str | None) -> None:
    assert presented_key(headers) == key


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": basic("alertmanager", KEY)},
        {"authorization": basic("", KEY)},
        {"authorization": f"Bearer {KEY}"},
        {"x-api-key": KEY},
    ],
)
@pytest.mark.parametrize("expected", [KEY, SecretStr(KEY)])
def test_check_key_accepts(headers: dict[str, str], expected: str | SecretStr) -> None:
    check_key(headers, expected)


def test_missing_key_asks_for_basic_auth() -> None:
    with pytest.raises(BasicAuthRequired) as raised:
        check_key({}, KEY)
    assert raised.value.status == 401
    assert raised.value.challenge == BASIC_CHALLENGE
    assert BASIC_CHALLENGE.startswith("Basic ")


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": basic("alertmanager", "wrong")},
        {"authorization": basic("alertmanager", KEY + "x")},
        {"authorization": basic(KEY, "wrong")},  # the key as user name is not the password
        {"x-api-key": "wrong"},
    ],
)
def test_wrong_key_is_401(headers: dict[str, str]) -> None:
    with pytest.raises(CredentialsError) as raised:
        check_key(headers, KEY)
    assert not isinstance(raised.value, BasicAuthRequired)
    assert raised.value.status == 401

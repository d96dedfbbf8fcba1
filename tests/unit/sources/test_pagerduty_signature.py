"""X-PagerDuty-Signature: HMAC-SHA256 over the raw body, any secret, any signature."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from tarsy.errors import InputError
from tarsy.intake.sources.errors import SignatureError
from tarsy.intake.sources.pagerduty_signature import (
    parse_signature_header,
    signature_for,
    verify_pagerduty_signature,
)
from tests.unit.sources.samples import fixture_bytes

BODY = fixture_bytes("pagerduty_incident_triggered.json")
OLD = "pd-old-secret-6f1c"
NEW = "pd-new-secret-94ab"


def reference_hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 by its definition (RFC 2104), with hashlib only: a second, independent path."""
    block = 64
    if len(key) > block:
        key = hashlib.sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return hashlib.sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest()


def accepted(body: bytes, header: str | None, secrets: Sequence[str | bytes]) -> bool:
    try:
        verify_pagerduty_signature(body, header, secrets)
    except SignatureError:
        return False
    return True


def test_known_answer_rfc_4231_case_2() -> None:
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert signature_for("Jefe", b"what do ya want for nothing?") == expected
    assert accepted(b"what do ya want for nothing?", f"v1={expected}", ["Jefe"])


def test_known_answer_derived_once() -> None:
    body = b'{"event":{"id":"01TEST","event_type":"pagey.ping"}}'
    expected = "102cc85ebef8e8da1ff6490d2ff640f1f350b55d6e0774d97239ddffb423ceb2"

    assert signature_for("whsec_tarsy_test", body) == expected
    assert accepted(body, f"v1={expected}", ["whsec_tarsy_test"])


def test_fixture_body_matches_an_independent_hmac() -> None:
    expected = reference_hmac_sha256(NEW.encode(), BODY)

    assert signature_for(NEW, BODY) == expected
    assert accepted(BODY, f"v1={expected}", [NEW])


def test_long_secret_is_hashed_first_like_hmac() -> None:
    secret = "s" * 100
    assert signature_for(secret, BODY) == reference_hmac_sha256(secret.encode(), BODY)


ROTATION_HEADER = (
    f"v1={reference_hmac_sha256(OLD.encode(), BODY)},v1={reference_hmac_sha256(NEW.encode(), BODY)}"
)


@pytest.mark.parametrize(
    ("secrets", "ok"),
    [
        ([OLD], True),
        ([NEW], True),
        ([OLD, NEW], True),
        (["unrelated", NEW], True),
        (["unrelated"], False),
    ],
)
def test_rotation_any_secret_any_signature(secrets: list[str], ok: bool) -> None:
    assert accepted(BODY, ROTATION_HEADER, secrets) is ok


def test_header_as_pagerduty_formats_it_with_spaces_and_uppercase_hex() -> None:
    digest = reference_hmac_sha256(NEW.encode(), BODY)
    assert accepted(BODY, f" v1={digest.upper()} , v1={'0' * 64}", [NEW])


@pytest.mark.parametrize(
    "body",
    [
        BODY.replace(b"Checkout API error rate above 5%", b"Checkout API error rate above 6%"),
        BODY + b"\n",
        BODY.replace(b"  ", b" "),  # re-indented: same JSON, other bytes
        BODY[:-2],
        b"",
    ],
)
def test_tampered_body_is_refused(body: bytes) -> None:
    header = f"v1={reference_hmac_sha256(NEW.encode(), BODY)}"
    assert body != BODY
    with pytest.raises(SignatureError) as raised:
        verify_pagerduty_signature(body, header, [NEW])
    assert raised.value.status == 401


@pytest.mark.parametrize(
    "header",
    [None, "", "   ", "v0=abc", f"v2={'a' * 64}", "v1=", "v1=nothex" + "0" * 57, "v1" + "0" * 64],
)
def test_missing_or_unusable_header_is_401(header: str | None) -> None:
    with pytest.raises(SignatureError) as raised:
        verify_pagerduty_signature(BODY, header, [NEW])
    assert raised.value.status == 401


def test_no_configured_secret_is_a_503_not_an_open_door() -> None:
    with pytest.raises(InputError) as raised:
        verify_pagerduty_signature(BODY, f"v1={signature_for(NEW, BODY)}", [])
    assert raised.value.status == 503
    assert not isinstance(raised.value, SignatureError)


def test_bytes_secret_and_parse_limits() -> None:
    digest = signature_for(b"raw-bytes-secret", BODY)
    assert accepted(BODY, f"v1={digest}", [b"raw-bytes-secret"])
    many = ",".join(f"v1={i:064x}" for i in range(40))
    assert len(parse_signature_header(many)) == 16
    assert parse_signature_header("v1=" + "A" * 64) == ["a" * 64]


def test_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    verify_pagerduty_signature(BODY, ROTATION_HEADER, ["unrelated", NEW])

    assert len(calls) == 4  # every signature against every secret, no short-circuit

"""SNS signature verification against a locally generated key, certificate served from loopback."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from tarsy.intake.sources.config import SnsSourceConfig
from tarsy.intake.sources.errors import (
    CertificateUnavailableError,
    ForbiddenSourceError,
    SignatureError,
)
from tarsy.intake.sources.sns import parse_sns
from tarsy.intake.sources.sns_certificates import (
    CertificateCache,
    HttpxCertificateFetcher,
    load_signing_key,
)
from tarsy.intake.sources.sns_signature import SnsVerifier, string_to_sign
from tarsy.intake.sources.sns_urls import UntrustedUrlError
from tests.unit.sources.loopback import Loopback, LoopbackTransport, loopback_server
from tests.unit.sources.samples import as_body, fixture_json

TOPIC = "arn:aws:sns:eu-west-1:111122223333:tarsy-cloudwatch-alarms"
OTHER_TOPIC = "arn:aws:sns:eu-west-1:111122223333:other-alarms"
CERT_PATH = "/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"
CERT_URL = "https://sns.eu-west-1.amazonaws.com" + CERT_PATH
FIXTURES = [
    "sns_notification_alarm.json",
    "sns_notification_ok.json",
    "sns_subscription_confirmation.json",
    "sns_unsubscribe_confirmation.json",
]


@dataclass(frozen=True)
class Signer:
    key: rsa.RSAPrivateKey
    pem: bytes
    not_after: datetime


def make_signer(common_name: str = "sns.amazonaws.com") -> Signer:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return Signer(
        key, certificate.public_bytes(serialization.Encoding.PEM), now + timedelta(days=30)
    )


@pytest.fixture(scope="module")
def signer() -> Signer:
    return make_signer()


@pytest.fixture(scope="module")
def impostor() -> Signer:
    return make_signer()


def aws_string_to_sign(message: dict[str, Any]) -> bytes:
    """The string to sign as AWS documents it, written independently of the code under test."""
    if message["Type"] == "Notification":
        names = ["Message", "MessageId"]
        if message.get("Subject") is not None:
            names.append("Subject")
        names += ["Timestamp", "TopicArn", "Type"]
    else:
        names = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    return "".join(f"{name}\n{message[name]}\n" for name in names).encode()


def signed(name: str, signer: Signer, version: str = "2", **changes: Any) -> dict[str, Any]:
    """A fixture message, changed, then signed like SNS signs it."""
    message = fixture_json(name)
    message.update(changes, SignatureVersion=version, SigningCertURL=CERT_URL)
    message = {k: v for k, v in message.items() if v is not None}
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()
    signature = signer.key.sign(aws_string_to_sign(message), padding.PKCS1v15(), digest)
    message["Signature"] = base64.b64encode(signature).decode()
    return message


@pytest.fixture(scope="module")
def running_server() -> Iterator[Loopback]:
    with loopback_server() as state:
        yield state


@pytest.fixture
def server(running_server: Loopback, signer: Signer) -> Loopback:
    running_server.routes.clear()
    running_server.hits.clear()
    running_server.routes[CERT_PATH] = (200, signer.pem)
    return running_server


@pytest.fixture
def verifier(server: Loopback) -> SnsVerifier:
    return SnsVerifier(
        allowed_topic_arns=[TOPIC, OTHER_TOPIC],
        fetcher=HttpxCertificateFetcher(transport=LoopbackTransport(server.port)),
        cache=CertificateCache(),
    )


async def verify(verifier: SnsVerifier, message: dict[str, Any]) -> None:
    await verifier.verify(parse_sns(as_body(message)))


def test_string_to_sign_known_answer() -> None:
    message = parse_sns(as_body(fixture_json("sns_subscription_confirmation.json")))
    token = fixture_json("sns_subscription_confirmation.json")["Token"]
    subscribe = (
        "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription"
        f"&TopicArn={TOPIC}&Token={token}"
    )

    assert (
        string_to_sign(message)
        == (
            "Message\n"
            f"You have chosen to subscribe to the topic {TOPIC}.\n"
            "To confirm the subscription, visit the SubscribeURL included in this message.\n"
            "MessageId\n165545c9-2a5c-472c-8df2-7ff2be2b3b1b\n"
            f"SubscribeURL\n{subscribe}\n"
            "Timestamp\n2026-11-22T01:47:06.115Z\n"
            f"Token\n{token}\n"
            f"TopicArn\n{TOPIC}\n"
            "Type\nSubscriptionConfirmation\n"
        ).encode()
    )


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("subject", ["keep", "drop"])
def test_string_to_sign_matches_the_documented_rule(name: str, subject: str) -> None:
    message = fixture_json(name)
    if subject == "drop":
        message.pop("Subject", None)
    assert string_to_sign(parse_sns(as_body(message))) == aws_string_to_sign(message)


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("name", FIXTURES)
async def test_signed_messages_verify(
    verifier: SnsVerifier, server: Loopback, signer: Signer, name: str, version: str
) -> None:
    await verify(verifier, signed(name, signer, version))

    assert server.hits == [CERT_PATH]


async def test_notification_without_subject_verifies(verifier: SnsVerifier, signer: Signer) -> None:
    await verify(verifier, signed("sns_notification_alarm.json", signer, Subject=None))


async def test_unsigned_fields_may_change(verifier: SnsVerifier, signer: Signer) -> None:
    message = signed("sns_notification_alarm.json", signer)
    message["UnsubscribeURL"] = "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&x=1"
    message["MessageAttributes"] = {"added": {"Type": "String", "Value": "later"}}

    await verify(verifier, message)


def _tamper_message(m: dict[str, Any]) -> None:
    alarm = json.loads(m["Message"])
    alarm["NewStateValue"] = "OK"
    m["Message"] = json.dumps(alarm, separators=(",", ":"))


TAMPERINGS: list[tuple[str, Any]] = [
    ("Message", _tamper_message),
    ("Message whitespace", lambda m: m.update(Message=m["Message"] + " ")),
    ("Subject", lambda m: m.update(Subject='OK: "checkout-db-cpu-high" in EU (Ireland)')),
    ("Subject removed", lambda m: m.pop("Subject")),
    ("Subject added", lambda m: m.update(Subject="")),
    ("MessageId", lambda m: m.update(MessageId="00000000-1d4a-5e9f-a7b8-0c1d2e3f4a5b")),
    ("Timestamp", lambda m: m.update(Timestamp="2026-11-22T05:15:43.935Z")),
    ("TopicArn (allowed too)", lambda m: m.update(TopicArn=OTHER_TOPIC)),
    ("SignatureVersion", lambda m: m.update(SignatureVersion="1")),
    ("Signature truncated", lambda m: m.update(Signature=m["Signature"][:-8])),
    ("Signature not base64", lambda m: m.update(Signature="%%%not base64%%%")),
]


@pytest.mark.parametrize(("what", "tamper"), TAMPERINGS, ids=[t[0] for t in TAMPERINGS])
async def test_tampered_messages_are_rejected(
    verifier: SnsVerifier, signer: Signer, what: str, tamper: Any
) -> None:
    message = signed("sns_notification_alarm.json", signer)
    tamper(message)

    with pytest.raises(SignatureError) as raised:
        await verify(verifier, message)
    assert raised.value.status == 401


@pytest.mark.parametrize(
    ("name", "changes"),
    [
        ("sns_subscription_confirmation.json", {"Token": "0" * 128}),
        ("sns_subscription_confirmation.json", {"SubscribeURL": CERT_URL.replace(".pem", "")}),
        ("sns_unsubscribe_confirmation.json", {"Message": "You have chosen nothing."}),
    ],
)
async def test_tampered_confirmations_are_rejected(
    verifier: SnsVerifier, signer: Signer, name: str, changes: dict[str, Any]
) -> None:
    message = signed(name, signer)
    message.update(changes)

    with pytest.raises(SignatureError):
        await verify(verifier, message)


async def test_signature_by_another_key_is_rejected(
    verifier: SnsVerifier, impostor: Signer
) -> None:
    with pytest.raises(SignatureError):
        await verify(verifier, signed("sns_notification_alarm.json", impostor))


@pytest.mark.parametrize(
    "url",
    [
        "http://sns.eu-west-1.amazonaws.com" + CERT_PATH,
        "https://sns.eu-west-1.amazonaws.com.attacker.example" + CERT_PATH,
        "https://attacker.example" + CERT_PATH,
        "https://s3.amazonaws.com/attacker-bucket/cert.pem",
        "https://sns-eu-west-1.amazonaws.com" + CERT_PATH,
        "https://user:pw@sns.eu-west-1.amazonaws.com" + CERT_PATH,
        "https://sns.eu-west-1.amazonaws.com:8443" + CERT_PATH,
        "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService.txt",
        "https://127.0.0.1" + CERT_PATH,
        "file:///etc/passwd.pem",
    ],
)
async def test_disallowed_certificate_url_is_rejected_without_a_fetch(
    verifier: SnsVerifier, server: Loopback, signer: Signer, url: str
) -> None:
    message = signed("sns_notification_alarm.json", signer)
    message["SigningCertURL"] = url

    with pytest.raises(UntrustedUrlError) as raised:
        await verify(verifier, message)

    assert raised.value.status == 401
    assert server.hits == []


async def test_topic_outside_the_allow_list_is_403_without_a_fetch(
    server: Loopback, signer: Signer
) -> None:
    verifier = SnsVerifier(
        allowed_topic_arns=[OTHER_TOPIC],
        fetcher=HttpxCertificateFetcher(transport=LoopbackTransport(server.port)),
        cache=CertificateCache(),
    )

    with pytest.raises(ForbiddenSourceError) as raised:
        await verify(verifier, signed("sns_notification_alarm.json", signer))

    assert raised.value.status == 403
    assert server.hits == []


async def test_empty_allow_list_accepts_no_topic(server: Loopback, signer: Signer) -> None:
    verifier = SnsVerifier.from_config(SnsSourceConfig(), cache=CertificateCache())

    with pytest.raises(ForbiddenSourceError):
        await verify(verifier, signed("sns_subscription_confirmation.json", signer))
    assert server.hits == []


async def test_confirmation_with_a_foreign_subscribe_url_is_rejected_without_a_fetch(
    verifier: SnsVerifier, server: Loopback, signer: Signer
) -> None:
    message = signed(
        "sns_subscription_confirmation.json",
        signer,
        SubscribeURL="https://attacker.example/?Action=ConfirmSubscription",
    )

    with pytest.raises(UntrustedUrlError):
        await verify(verifier, message)
    assert server.hits == []


async def test_certificate_is_fetched_once_per_url(
    verifier: SnsVerifier, server: Loopback, signer: Signer
) -> None:
    other_path = CERT_PATH.replace("9c6465fa", "00000000")
    server.routes[other_path] = (200, signer.pem)

    for name in FIXTURES:
        await verify(verifier, signed(name, signer))
    assert server.hits == [CERT_PATH]

    message = signed("sns_notification_ok.json", signer)
    message["SigningCertURL"] = "https://sns.eu-west-1.amazonaws.com" + other_path
    await verify(verifier, message)
    await verify(verifier, message)

    assert server.hits == [CERT_PATH, other_path]
    assert len(verifier.cache) == 2


async def test_a_fresh_cache_fetches_again(server: Loopback, signer: Signer) -> None:
    config = SnsSourceConfig(allowed_topic_arns=[TOPIC])
    fetcher = HttpxCertificateFetcher(transport=LoopbackTransport(server.port))
    message = signed("sns_notification_alarm.json", signer)

    for _ in range(2):
        verifier = SnsVerifier.from_config(config, fetcher=fetcher, cache=CertificateCache())
        await verify(verifier, message)

    assert server.hits == [CERT_PATH, CERT_PATH]


def test_cache_is_bounded(signer: Signer) -> None:
    cache = CertificateCache(max_entries=2)
    key = load_signing_key(signer.pem)
    for url in ("a", "b", "c"):
        cache.put(url, key)

    assert (cache.get("a"), cache.get("b") is key, cache.get("c") is key) == (None, True, True)


async def test_expired_certificate_is_rejected(server: Loopback, signer: Signer) -> None:
    verifier = SnsVerifier(
        allowed_topic_arns=[TOPIC],
        fetcher=HttpxCertificateFetcher(transport=LoopbackTransport(server.port)),
        cache=CertificateCache(),
        clock=lambda: signer.not_after + timedelta(seconds=1),
    )

    with pytest.raises(SignatureError, match="expired"):
        await verify(verifier, signed("sns_notification_alarm.json", signer))


async def test_unreachable_certificate_is_503_and_not_cached(
    verifier: SnsVerifier, server: Loopback, signer: Signer
) -> None:
    server.routes[CERT_PATH] = (404, b"gone")
    message = signed("sns_notification_alarm.json", signer)

    for _ in range(2):
        with pytest.raises(CertificateUnavailableError) as raised:
            await verify(verifier, message)
        assert raised.value.status == 503

    assert server.hits == [CERT_PATH, CERT_PATH]
    assert len(verifier.cache) == 0


async def test_connection_refused_is_503(signer: Signer) -> None:
    with loopback_server() as closed:
        port = closed.port
    verifier = SnsVerifier(
        allowed_topic_arns=[TOPIC],
        fetcher=HttpxCertificateFetcher(transport=LoopbackTransport(port)),
        cache=CertificateCache(),
    )

    with pytest.raises(CertificateUnavailableError):
        await verify(verifier, signed("sns_notification_alarm.json", signer))


async def test_oversized_certificate_is_503(server: Loopback, signer: Signer) -> None:
    server.routes[CERT_PATH] = (200, signer.pem + b"\n" * 70_000)
    verifier = SnsVerifier(
        allowed_topic_arns=[TOPIC],
        fetcher=HttpxCertificateFetcher(transport=LoopbackTransport(server.port)),
        cache=CertificateCache(),
    )

    with pytest.raises(CertificateUnavailableError, match="larger than"):
        await verify(verifier, signed("sns_notification_alarm.json", signer))


@pytest.mark.parametrize("body", [b"not a certificate", b""])
async def test_garbage_certificate_is_401(
    verifier: SnsVerifier, server: Loopback, signer: Signer, body: bytes
) -> None:
    server.routes[CERT_PATH] = (200, body)

    with pytest.raises(SignatureError, match="PEM"):
        await verify(verifier, signed("sns_notification_alarm.json", signer))


async def test_non_rsa_certificate_is_401(
    verifier: SnsVerifier, server: Loopback, signer: Signer
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    server.routes[CERT_PATH] = (200, certificate.public_bytes(serialization.Encoding.PEM))

    with pytest.raises(SignatureError, match="RSA"):
        await verify(verifier, signed("sns_notification_alarm.json", signer))


async def test_default_fetcher_refuses_plain_http(server: Loopback) -> None:
    fetcher = HttpxCertificateFetcher()

    with pytest.raises(ValueError, match="non-https"):
        await fetcher(f"http://127.0.0.1:{server.port}{CERT_PATH}")
    assert server.hits == []

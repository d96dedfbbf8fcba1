r"""Verifying an SNS message: topic allow-list, certificate URL, RSA signature.

AWS signs every message it delivers to an HTTP(S) endpoint. The signed bytes
are not the body but a *string to sign* built from some of the message's
fields, in byte order of their names, each as ``Name\nvalue\n``:

* ``Notification``: ``Message``, ``MessageId``, ``Subject`` (only if the
  message has one), ``Timestamp``, ``TopicArn``, ``Type``;
* ``SubscriptionConfirmation`` and ``UnsubscribeConfirmation``: ``Message``,
  ``MessageId``, ``SubscribeURL``, ``Timestamp``, ``Token``, ``TopicArn``,
  ``Type``.

The values are the decoded JSON strings (a ``\n`` escape in the body is a
newline in the string to sign). ``Signature`` is the base64 RSA PKCS#1 v1.5
signature of those bytes, with SHA1 for ``SignatureVersion`` "1" and SHA256
for "2", by the key of the certificate at ``SigningCertURL``.

:class:`SnsVerifier` checks, cheapest first, so that nothing is fetched for a
message that fails a local check:

1. ``TopicArn`` is in the allow-list (else 403: authentic or not, that topic
   is not accepted here);
2. ``SigningCertURL`` (and a confirmation's ``SubscribeURL``) may be contacted
   (:mod:`tarsy.intake.sources.sns_urls`; else 401);
3. ``Signature`` is base64;
4. the certificate (cached by URL, else fetched) is valid now, and the
   signature verifies with its key (else 401).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Collection
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from tarsy.intake.sources.clock import utcnow
from tarsy.intake.sources.config import DEFAULT_CERT_HOST_PATTERN, SnsSourceConfig
from tarsy.intake.sources.errors import ForbiddenSourceError, SignatureError
from tarsy.intake.sources.sns import SnsMessage, SnsNotification
from tarsy.intake.sources.sns_certificates import (
    DEFAULT_CACHE,
    CertificateCache,
    CertificateFetcher,
    HttpxCertificateFetcher,
    SigningKey,
    load_signing_key,
)
from tarsy.intake.sources.sns_urls import check_sns_url, host_pattern

NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = (
    "Message",
    "MessageId",
    "SubscribeURL",
    "Timestamp",
    "Token",
    "TopicArn",
    "Type",
)


def signed_fields(message: SnsMessage) -> list[tuple[str, str]]:
    """Return the (name, value) pairs AWS signs for this message, in order.

    Args:
        message: The message.

    Returns:
        The pairs; ``Subject`` only when the notification has one.
    """
    names = NOTIFICATION_FIELDS if isinstance(message, SnsNotification) else CONFIRMATION_FIELDS
    pairs = []
    for name in names:
        value = getattr(message, name)
        if value is None:  # only Subject may be absent
            continue
        pairs.append((name, str(value)))
    return pairs


def string_to_sign(message: SnsMessage) -> bytes:
    r"""Return the bytes AWS signed for this message.

    Args:
        message: The message.

    Returns:
        ``Name\nvalue\n`` for each signed field, UTF-8.
    """
    return "".join(f"{name}\n{value}\n" for name, value in signed_fields(message)).encode()


def signature_hash(version: str) -> hashes.HashAlgorithm:
    """Return the digest of a ``SignatureVersion``.

    Args:
        version: "1" or "2".

    Returns:
        SHA1 for "1", SHA256 for "2".

    Raises:
        SignatureError: Any other version (401).
    """
    if version == "1":
        return hashes.SHA1()  # SNS SignatureVersion 1 is defined as SHA1withRSA
    if version == "2":
        return hashes.SHA256()
    raise SignatureError(f"unsupported SNS SignatureVersion {version!r}")


def verify_with_key(message: SnsMessage, key: SigningKey) -> None:
    """Check the message's signature with a certificate's key (pure).

    Args:
        message: The message.
        key: The signing certificate's key.

    Raises:
        SignatureError: ``Signature`` is not base64 or does not verify (401).
    """
    try:
        signature = base64.b64decode(message.Signature, validate=True)
    except (binascii.Error, ValueError) as e:
        raise SignatureError("SNS Signature is not base64") from e
    try:
        key.public_key.verify(
            signature,
            string_to_sign(message),
            padding.PKCS1v15(),
            signature_hash(message.SignatureVersion),
        )
    except InvalidSignature as e:
        raise SignatureError("SNS message signature does not verify") from e


class SnsVerifier:
    """Verifies SNS messages for one configuration; cheap to build per request."""

    def __init__(
        self,
        *,
        allowed_topic_arns: Collection[str],
        cert_host_pattern: str | re.Pattern[str] = DEFAULT_CERT_HOST_PATTERN,
        fetcher: CertificateFetcher | None = None,
        cache: CertificateCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """Configure the verifier.

        Args:
            allowed_topic_arns: Topics whose messages are accepted (empty: none).
            cert_host_pattern: Regular expression the whole host of a certificate
                or subscribe URL must match.
            fetcher: Fetches a certificate's PEM (default: https with httpx).
            cache: Where keys are kept by URL (default: the process-wide cache).
            clock: Current time, for the certificate's validity window.
        """
        self.allowed_topic_arns = frozenset(allowed_topic_arns)
        self.cert_host_pattern = host_pattern(cert_host_pattern)
        self.fetcher: CertificateFetcher = fetcher or HttpxCertificateFetcher()
        self.cache = DEFAULT_CACHE if cache is None else cache
        self.clock = clock

    @classmethod
    def from_config(
        cls,
        config: SnsSourceConfig,
        *,
        fetcher: CertificateFetcher | None = None,
        cache: CertificateCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> SnsVerifier:
        """Build a verifier from ``alert_sources.sns``.

        Args:
            config: The SNS settings.
            fetcher: As for the constructor.
            cache: As for the constructor.
            clock: As for the constructor.

        Returns:
            The verifier.
        """
        return cls(
            allowed_topic_arns=config.allowed_topic_arns,
            cert_host_pattern=config.cert_host_pattern,
            fetcher=fetcher,
            cache=cache,
            clock=clock,
        )

    def check_topic(self, topic_arn: str) -> None:
        """Accept only allow-listed topics.

        Args:
            topic_arn: The message's ``TopicArn``.

        Raises:
            ForbiddenSourceError: The topic is not allowed (403).
        """
        if topic_arn not in self.allowed_topic_arns:
            raise ForbiddenSourceError(
                f"SNS topic {topic_arn!r} is not in alert_sources.sns.allowed_topic_arns"
            )

    async def signing_key(self, url: str) -> SigningKey:
        """Return the key of the certificate at an allowed URL, from cache or fetched.

        Args:
            url: The ``SigningCertURL``, already checked.

        Returns:
            The key, valid now.

        Raises:
            CertificateUnavailableError: The fetch failed (503).
            SignatureError: Not a usable certificate, or not valid now (401).
        """
        key = self.cache.get(url)
        if key is None:
            key = load_signing_key(await self.fetcher(url))
            self.cache.put(url, key)
        key.check_valid_at(self.clock())
        return key

    async def verify(self, message: SnsMessage) -> None:
        """Accept the message only if it is authentic and from an allowed topic.

        Args:
            message: The parsed message.

        Raises:
            ForbiddenSourceError: Topic not allowed (403), before any fetch.
            SignatureError: An untrusted URL, before any fetch, or a bad signature (401).
            CertificateUnavailableError: The certificate could not be fetched (503).
        """
        self.check_topic(message.TopicArn)
        cert_url = check_sns_url(
            message.SigningCertURL,
            self.cert_host_pattern,
            field="SigningCertURL",
            require_pem=True,
        )
        if not isinstance(message, SnsNotification):
            check_sns_url(message.SubscribeURL, self.cert_host_pattern, field="SubscribeURL")
        signature_hash(message.SignatureVersion)
        key = await self.signing_key(str(cert_url))
        verify_with_key(message, key)

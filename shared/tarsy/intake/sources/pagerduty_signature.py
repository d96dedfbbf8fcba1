"""PagerDuty V3 webhook signatures: ``X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...]``.

PagerDuty signs the raw body of every delivery with HMAC-SHA256, once per
signing secret of the subscription, and sends the hex digests comma-separated
in one header (more than one while a secret is being rotated). A delivery is
authentic if *any* ``v1`` signature matches the HMAC under *any* secret this
deployment holds — which is what makes rotation free of downtime on both
sides: configure the new secret next to the old one, rotate in PagerDuty,
then drop the old one.

The HMAC is over the bytes as received: parse the JSON only after this check,
and never re-serialize before it. Digests are compared with
:func:`hmac.compare_digest` (constant time), and every candidate is compared
against every secret so the time taken does not tell which one matched.

With a signature checked, PagerDuty needs no API key: the signing secret is
the credential.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from tarsy.errors import InputError
from tarsy.intake.sources.errors import SignatureError

SIGNATURE_HEADER = "x-pagerduty-signature"
"""The header's name, lower-case as the ingest route stores header names."""

SIGNATURE_VERSION = "v1"
MAX_SIGNATURES = 16
"""Signatures considered per header; PagerDuty sends one per secret of a subscription."""

_HEX = frozenset("0123456789abcdef")


def signature_for(secret: str | bytes, body: bytes) -> str:
    """Return the ``v1`` signature (lower-case hex HMAC-SHA256) of a body.

    Args:
        secret: A signing secret (text is encoded as UTF-8).
        body: The raw body.

    Returns:
        64 hex digits, without the ``v1=`` prefix.
    """
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def parse_signature_header(value: str) -> list[str]:
    """Return the ``v1`` digests of an ``X-PagerDuty-Signature`` value.

    Other versions and entries that are not 64 hex digits are skipped; at
    most :data:`MAX_SIGNATURES` are returned.

    Args:
        value: The header value, e.g. ``"v1=ab12...,v1=cd34..."``.

    Returns:
        The digests, lower-case, in header order.
    """
    digests = []
    for entry in value.split(","):
        version, sep, digest = entry.strip().partition("=")
        digest = digest.strip().lower()
        if not sep or version.strip() != SIGNATURE_VERSION:
            continue
        if len(digest) != 64 or not set(digest) <= _HEX:
            continue
        digests.append(digest)
        if len(digests) == MAX_SIGNATURES:
            break
    return digests


def verify_pagerduty_signature(
    body: bytes, header: str | None, secrets: Sequence[str | bytes]
) -> None:
    """Check that a delivery is signed with one of the configured secrets.

    Args:
        body: The raw request body, exactly as received.
        header: The ``X-PagerDuty-Signature`` value, or ``None`` if absent.
        secrets: The signing secrets' values (several during a rotation).

    Raises:
        InputError: No secret is configured (503: the deployment, not the
            sender, must change).
        SignatureError: The header is missing, has no ``v1`` signature, or no
            signature matches any secret (401).
    """
    if not secrets:
        raise InputError(
            "PagerDuty signature checking is not configured: "
            "set alert_sources.pagerduty.signing_secrets",
            status=503,
        )
    if not header or not header.strip():
        raise SignatureError("missing X-PagerDuty-Signature header")
    presented = parse_signature_header(header)
    if not presented:
        raise SignatureError("X-PagerDuty-Signature carries no v1 signature")
    matched = False
    for secret in secrets:
        expected = signature_for(secret, body).encode()
        for candidate in presented:
            # No short-circuit: every pair is compared, whichever matches.
            matched |= hmac.compare_digest(expected, candidate.encode())
    if not matched:
        raise SignatureError("X-PagerDuty-Signature does not match the body")

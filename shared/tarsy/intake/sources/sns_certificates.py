"""SNS signing certificates: fetched over https, read with ``cryptography``, cached per URL.

This is the I/O shell around the pure signature check. A certificate is
fetched only for a URL :func:`~tarsy.intake.sources.sns_urls.check_sns_url` allowed,
by a *fetcher*: any ``async (url) -> bytes``. The default,
:class:`HttpxCertificateFetcher`, refuses anything but https, follows no
redirects (a redirect could leave the allowed host), reads at most 64 KiB and
fails with :class:`~tarsy.intake.sources.errors.CertificateUnavailableError` (503,
so SNS retries) when the host cannot be reached. Tests inject their own
transport or fetcher; nothing else needs the network.

SNS rotates its signing certificate rarely and names each one by URL, so the
public key is cached in-process by URL (:class:`CertificateCache`; a warm
function instance then verifies without any request). The certificate's
validity window is checked on every use, cached or not.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from threading import Lock

import httpx
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from tarsy.intake.sources.errors import CertificateUnavailableError, SignatureError

CertificateFetcher = Callable[[str], Awaitable[bytes]]
"""Fetches the PEM bytes at an (already allowed) URL."""

MAX_CERTIFICATE_BYTES = 64 * 1024


class HttpxCertificateFetcher:
    """Fetch a certificate with httpx: https only, no redirects, bounded size and time."""

    def __init__(
        self,
        *,
        timeout: float = 5.0,
        max_bytes: int = MAX_CERTIFICATE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """Configure the fetcher.

        Args:
            timeout: Seconds for connecting and for each read.
            max_bytes: Largest certificate accepted.
            transport: An httpx transport to use instead of the network (tests).
        """
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.transport = transport

    async def __call__(self, url: str) -> bytes:
        """Return the body at ``url``.

        Args:
            url: An https URL.

        Returns:
            The response body.

        Raises:
            ValueError: The URL is not https (a caller bug: URLs are checked first).
            CertificateUnavailableError: Unreachable, not 200, or too large (503).
        """
        if httpx.URL(url).scheme != "https":
            raise ValueError(f"refusing to fetch a signing certificate over non-https: {url}")
        try:
            async with (
                httpx.AsyncClient(
                    timeout=self.timeout, follow_redirects=False, transport=self.transport
                ) as client,
                client.stream("GET", url) as response,
            ):
                if response.status_code != 200:
                    raise CertificateUnavailableError(
                        f"signing certificate {url} answered HTTP {response.status_code}"
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise CertificateUnavailableError(
                            f"signing certificate {url} is larger than {self.max_bytes} bytes"
                        )
                return bytes(body)
        except httpx.HTTPError as e:
            raise CertificateUnavailableError(
                f"signing certificate {url} could not be fetched: {e}"
            ) from e


@dataclass(frozen=True)
class SigningKey:
    """The public key of a signing certificate and the window it is valid in."""

    public_key: RSAPublicKey
    not_before: datetime
    not_after: datetime

    def check_valid_at(self, now: datetime) -> None:
        """Refuse an expired or not yet valid certificate.

        Args:
            now: The current time (timezone-aware).

        Raises:
            SignatureError: ``now`` is outside the validity window (401).
        """
        if not self.not_before <= now <= self.not_after:
            raise SignatureError("the SNS signing certificate is expired or not yet valid")


def load_signing_key(pem: bytes) -> SigningKey:
    """Read the RSA public key and validity window of a PEM certificate.

    Args:
        pem: The certificate, PEM-encoded.

    Returns:
        The key and its validity window.

    Raises:
        SignatureError: Not a PEM X.509 certificate, or its key is not RSA (401).
    """
    try:
        certificate = x509.load_pem_x509_certificate(pem)
    except ValueError as e:
        raise SignatureError("the SNS signing certificate is not a PEM X.509 certificate") from e
    key = certificate.public_key()
    if not isinstance(key, RSAPublicKey):
        raise SignatureError("the SNS signing certificate does not hold an RSA key")
    return SigningKey(
        public_key=key,
        not_before=certificate.not_valid_before_utc,
        not_after=certificate.not_valid_after_utc,
    )


class CertificateCache:
    """Signing keys by certificate URL, in-process, bounded (least recently used out)."""

    def __init__(self, max_entries: int = 32) -> None:
        """Create an empty cache.

        Args:
            max_entries: How many certificates to keep.
        """
        self.max_entries = max_entries
        self._entries: OrderedDict[str, SigningKey] = OrderedDict()
        self._lock = Lock()

    def get(self, url: str) -> SigningKey | None:
        """Return the cached key for ``url``, if any."""
        with self._lock:
            key = self._entries.get(url)
            if key is not None:
                self._entries.move_to_end(url)
            return key

    def put(self, url: str, key: SigningKey) -> None:
        """Cache the key for ``url``."""
        with self._lock:
            self._entries[url] = key
            self._entries.move_to_end(url)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every certificate."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


DEFAULT_CACHE = CertificateCache()
"""The process-wide cache the verifier uses unless given another."""

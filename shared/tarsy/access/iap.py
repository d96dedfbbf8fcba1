"""Identity-Aware Proxy's signed header, verified with google-auth on every api request.

Design constraint: the assertion is the only proof of who is asking, so every
check is made on every request and none is ours to reimplement: google-auth's
``jwt.decode`` checks the ES256 signature against the proxy's published keys,
the expiry and issue time, and the audience (``/projects/NUMBER/global/
backendServices/ID`` behind a load balancer); this module adds only what
decode leaves to its caller (the algorithm must be ES256, the issuer the
proxy's, an e-mail present). The keys come from ``TARSY_IAP_CERTS_URL``, in
the format google-auth reads (``{key id: PEM}``, Google's
``https://www.gstatic.com/iap/verify/public_key``); the local stack serves its
own key there on loopback, so tests run this same code. Keys are cached per
process and fetched again after an hour, or when an assertion names a key id
the cache does not hold (the proxy rotates its keys).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

from google.auth import exceptions as google_auth_exceptions
from google.auth import jwt as google_jwt

# google-auth's requests transport fetches the keys: the Firestore client has loaded it
# already, where httpx would add its own stack (and its CLI's rich and pygments) to the api.
from google.auth.transport import requests as google_requests
from pydantic import ConfigDict, TypeAdapter

from tarsy._pydantic import DeferredModel
from tarsy.access import groups
from tarsy.access.roles import Grants, Principal, parse_grants
from tarsy.errors import AuthError, InputError
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

ASSERTION_HEADER = "x-goog-iap-jwt-assertion"
IAP_ISSUER = "https://cloud.google.com/iap"
ALGORITHM = "ES256"
KEYS_MAX_AGE_S = 3600.0
# The proxy's clock and the function's may differ by a few seconds; an assertion is
# refused when issued more than this in the future or expired more than this ago.
CLOCK_SKEW_S = 30
# An unknown key id fetches the keys again, at most this often (a forged kid cannot
# make every request a fetch).
REFETCH_MIN_INTERVAL_S = 30.0
_FETCH_TIMEOUT_S = 5.0

_CERTS = TypeAdapter(dict[str, str], config=ConfigDict(defer_build=True))  # built on first use


class IapIdentity(DeferredModel):
    """A verified assertion: who the proxy says is asking."""

    model_config = ConfigDict(frozen=True)

    email: str
    subject: str
    expires_at: datetime


def verify_assertion(assertion: str, certs: Mapping[str, str], audience: str) -> IapIdentity:
    """Verify one assertion against the proxy's keys (pure but for the clock).

    Args:
        assertion: The ``x-goog-iap-jwt-assertion`` header's value.
        certs: The proxy's public keys, ``{key id: PEM}``.
        audience: The audience this deployment expects.

    Returns:
        The identity it asserts.

    Raises:
        AuthError: Anything wrong: malformed, another algorithm, a key not the
            proxy's, a bad signature, expired or not yet valid, another
            audience or issuer, no e-mail.
    """
    try:
        header = google_jwt.decode_header(assertion)  # type: ignore[no-untyped-call]
        if not isinstance(header, dict) or header.get("alg") != ALGORITHM:
            raise AuthError(f"the sign-in assertion is not signed with {ALGORITHM}")
        claims = google_jwt.decode(  # type: ignore[no-untyped-call]
            assertion, certs=dict(certs), audience=audience, clock_skew_in_seconds=CLOCK_SKEW_S
        )
    except (ValueError, TypeError, google_auth_exceptions.GoogleAuthError) as e:
        raise AuthError(f"invalid sign-in assertion: {e}") from e
    if claims.get("iss") != IAP_ISSUER:
        raise AuthError(f"the sign-in assertion was not issued by {IAP_ISSUER}")
    email, subject = claims.get("email"), claims.get("sub")
    if not isinstance(email, str) or not email or not isinstance(subject, str):
        raise AuthError("the sign-in assertion names no e-mail")
    return IapIdentity(
        email=email.lower(),
        subject=subject,
        expires_at=datetime.fromtimestamp(float(claims["exp"]), UTC),
    )


def key_id(assertion: str) -> str | None:
    """The key id an assertion names, unverified (None when it names none or is malformed)."""
    try:
        header = google_jwt.decode_header(assertion)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, google_auth_exceptions.GoogleAuthError):
        return None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None


class KeyCache:
    """The proxy's public keys, fetched from one URL and kept for a while (the I/O shell)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._certs: dict[str, str] = {}
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()
        self._http = google_requests.Request()  # one requests session, its connections reused

    async def certs_for(self, kid: str | None) -> dict[str, str]:
        """The keys, fetched again when stale or when ``kid`` is unknown (rate-limited)."""
        async with self._lock:
            age = time.monotonic() - self._fetched_at
            unknown = kid is not None and kid not in self._certs
            if age > KEYS_MAX_AGE_S or (unknown and age > REFETCH_MIN_INTERVAL_S):
                self._certs = await self._fetch()
                self._fetched_at = time.monotonic()
            return self._certs

    async def _fetch(self) -> dict[str, str]:
        try:
            # Synchronous (requests), so in a worker thread: the event loop goes on meanwhile.
            response = await asyncio.to_thread(
                self._http, self.url, method="GET", timeout=_FETCH_TIMEOUT_S
            )
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            return _CERTS.validate_json(response.data)
        except (google_auth_exceptions.TransportError, ValueError) as e:  # ValidationError too
            logger.warning("cannot read the sign-in keys at %s: %s", self.url, e)
            # Refused, not let through: a request waits for keys that verify it.
            raise InputError(f"cannot read the sign-in keys: {e}", status=503) from e


_caches: dict[str, KeyCache] = {}


def _cache(url: str) -> KeyCache:
    if url not in _caches:
        _caches[url] = KeyCache(url)
    return _caches[url]


async def identify(headers: Mapping[str, str], settings: Settings) -> IapIdentity:
    """The verified identity of a request, from the proxy's header.

    Raises:
        AuthError: 401 without the header, or with one that does not verify;
            503 when sign-in is not configured or the keys cannot be read.
    """
    assertion = headers.get(ASSERTION_HEADER, "").strip()
    if not assertion:
        raise AuthError(
            f"not signed in: no {ASSERTION_HEADER} header (open the api through "
            "Identity-Aware Proxy; locally, through the stack's sign-in proxy or the tarsy CLI)"
        )
    if not settings.iap_audience:
        raise InputError("sign-in is not configured: set TARSY_IAP_AUDIENCE", status=503)
    certs = await _cache(settings.iap_certs_url).certs_for(key_id(assertion))
    return verify_assertion(assertion, certs, settings.iap_audience)


@lru_cache(maxsize=4)
def _grants(raw: str) -> Grants:
    return parse_grants(raw)


async def authenticate(headers: Mapping[str, str], settings: Settings) -> Principal:
    """Who is asking (verified from the proxy's header) and the role configuration grants them.

    Raises:
        AuthError: 401, no verified identity (see :func:`identify`).
        ConfigError: ``TARSY_ACCESS_GRANTS`` is invalid.
    """
    identity = await identify(headers, settings)
    return await principal_of(identity.email, settings)


async def principal_of(email: str, settings: Settings) -> Principal:
    """``email`` with the role the grants give it, by name, domain or group membership."""
    grants = _grants(settings.access_grants)
    role = await groups.role_of(grants, email, groups.directory_for(grants, settings))
    return Principal(email=email, role=role)

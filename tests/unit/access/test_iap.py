"""The proxy's signed header, verified with google-auth against keys served on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tarsy.access.iap import ASSERTION_HEADER, authenticate, verify_assertion
from tarsy.access.roles import Role
from tarsy.errors import AuthError, InputError
from tarsy.settings import Settings
from tarsy_dev.localstack.signin import LOCAL_AUDIENCE, assertion, key_id, new_key, public_keys
from tests.unit.signin import ADMIN, NOBODY, VIEWER, SignIn, signin_server
from tests.unit.sources.loopback import loopback_server

KEY = new_key()
CERTS = public_keys(KEY)


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


def test_an_assertion_signed_by_the_proxys_key_names_who_is_asking() -> None:
    identity = verify_assertion(assertion(KEY, "Ada@Example.com"), CERTS, LOCAL_AUDIENCE)
    assert identity.email == "ada@example.com"
    assert identity.expires_at.timestamp() > time.time()


def test_an_assertion_signed_by_another_key_is_refused_even_under_the_proxys_key_id() -> None:
    forged_key = new_key()
    forged = assertion(forged_key, ADMIN)
    with pytest.raises(AuthError, match="not found"):
        verify_assertion(forged, CERTS, LOCAL_AUDIENCE)
    # The forger names the proxy's key id: the signature still does not verify.
    with pytest.raises(AuthError, match="signature"):
        verify_assertion(forged, {key_id(forged_key): CERTS[key_id(KEY)]}, LOCAL_AUDIENCE)


def test_an_assertion_for_another_audience_is_refused() -> None:
    other = assertion(KEY, ADMIN, audience="/projects/1/global/backendServices/2")
    with pytest.raises(AuthError, match="audience"):
        verify_assertion(other, CERTS, LOCAL_AUDIENCE)


def test_an_expired_assertion_is_refused() -> None:
    expired = assertion(KEY, ADMIN, issued_at=time.time() - 3600)
    with pytest.raises(AuthError, match="expired"):
        verify_assertion(expired, CERTS, LOCAL_AUDIENCE)


def test_an_assertion_issued_in_the_future_is_refused() -> None:
    early = assertion(KEY, ADMIN, issued_at=time.time() + 3600)
    with pytest.raises(AuthError):
        verify_assertion(early, CERTS, LOCAL_AUDIENCE)


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "e30.e30."])
def test_malformed_assertions_are_refused(token: str) -> None:
    with pytest.raises(AuthError):
        verify_assertion(token, CERTS, LOCAL_AUDIENCE)


def _unsigned(alg: str) -> str:
    import base64

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"iss": "https://cloud.google.com/iap", "aud": LOCAL_AUDIENCE, "email": ADMIN,
              "sub": "x", "iat": int(time.time()), "exp": int(time.time()) + 60}  # fmt: skip
    return f"{part({'alg': alg, 'kid': key_id(KEY)})}.{part(claims)}.{part('sig')}"


@pytest.mark.parametrize("alg", ["none", "HS256", "RS256"])
def test_an_assertion_with_another_algorithm_is_refused(alg: str) -> None:
    with pytest.raises(AuthError, match="ES256"):
        verify_assertion(_unsigned(alg), CERTS, LOCAL_AUDIENCE)


async def test_a_request_is_authenticated_with_the_keys_fetched_from_the_url(
    signin: SignIn,
) -> None:
    principal = await authenticate(signin.headers(VIEWER), signin.settings())
    assert (principal.email, principal.role) == (VIEWER, Role.VIEWER)
    nobody = await authenticate(signin.headers(NOBODY), signin.settings())
    assert nobody.role is None


async def test_a_request_without_the_header_is_refused_whatever_else_it_carries(
    signin: SignIn,
) -> None:
    settings = signin.settings(TARSY_API_KEY="k")
    for headers in ({}, {"authorization": "Bearer k"}, {"x-api-key": "k"}):
        with pytest.raises(AuthError) as refused:
            await authenticate(headers, settings)
        assert refused.value.status == 401


async def test_without_an_audience_nobody_is_signed_in(signin: SignIn) -> None:
    settings = Settings(TARSY_IAP_CERTS_URL=signin.certs_url)
    with pytest.raises(InputError) as refused:
        await authenticate(signin.headers(ADMIN), settings)
    assert refused.value.status == 503


async def test_keys_that_cannot_be_read_refuse_the_request() -> None:
    with loopback_server() as server:
        server.routes["/keys"] = (500, b"down")
        settings = Settings(
            TARSY_IAP_AUDIENCE=LOCAL_AUDIENCE,
            TARSY_IAP_CERTS_URL=f"http://127.0.0.1:{server.port}/keys",
        )
        with pytest.raises(InputError) as refused:
            await authenticate({ASSERTION_HEADER: assertion(KEY, ADMIN)}, settings)
    assert refused.value.status == 503


async def test_the_keys_are_fetched_once_and_again_for_a_key_id_they_lack() -> None:
    rotated = new_key()
    with loopback_server() as server:
        server.routes["/keys"] = (200, json.dumps(CERTS).encode())
        settings = Settings(
            TARSY_IAP_AUDIENCE=LOCAL_AUDIENCE,
            TARSY_IAP_CERTS_URL=f"http://127.0.0.1:{server.port}/keys",
        )
        for _ in range(3):
            await authenticate({ASSERTION_HEADER: assertion(KEY, ADMIN)}, settings)
        assert server.hits_for("/keys") == 1
        # A key id the cache lacks is looked up again (rate-limited: not within 30 s).
        server.routes["/keys"] = (200, json.dumps({**CERTS, **public_keys(rotated)}).encode())
        with pytest.raises(AuthError):
            await authenticate({ASSERTION_HEADER: assertion(rotated, ADMIN)}, settings)
        assert server.hits_for("/keys") == 1

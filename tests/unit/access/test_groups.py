"""Roles granted to Google groups: membership asked of Cloud Identity, cached, failing closed.

Cloud Identity is the loopback fake speaking the Groups API; the credentials
are a service-account key whose token endpoint is the loopback Google OAuth
fake, so google-auth's real flow fetches the token each lookup carries. The
sign-in is the api's whole verification (a signed assertion, its keys served
on loopback).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tarsy.access.groups import GroupDirectory, role_of
from tarsy.access.iap import authenticate
from tarsy.access.roles import Role, parse_grants
from tarsy_dev.fakes.fake_google_oauth import FakeGoogleOAuth, write_service_account
from tests.fake_cloud_identity import FakeCloudIdentity, fake_cloud_identity
from tests.unit.signin import SignIn, signin_server

SRE = "sre@example.com"
ONCALL = "oncall@example.com"  # nested in SRE
LEADS = "leads@example.com"
GRANTS = {
    "viewer": ["domain:example.com"],
    "responder": [f"group:{SRE}"],
    "admin": [f"group:{LEADS}", "user:ada@example.com"],
}


@pytest.fixture
def oauth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGoogleOAuth]:
    with FakeGoogleOAuth() as fake:
        key = write_service_account(fake, tmp_path / "sa.json", "tarsy-test")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        yield fake


@pytest.fixture
def directory(oauth: FakeGoogleOAuth) -> Iterator[FakeCloudIdentity]:
    with fake_cloud_identity(lambda token: token in oauth.tokens) as fake:
        fake.groups = {SRE: {"sam@example.com", ONCALL}, ONCALL: {"olga@example.com"}, LEADS: set()}
        yield fake


@pytest.fixture
def signin() -> Iterator[SignIn]:
    with signin_server() as server:
        yield server


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_member_of_a_granted_group_holds_its_role_even_through_a_nested_group(
    directory: FakeCloudIdentity,
) -> None:
    grants = parse_grants(json.dumps(GRANTS))
    lookups = GroupDirectory(directory.base_url)

    assert await role_of(grants, "sam@example.com", lookups) is Role.RESPONDER
    assert await role_of(grants, "olga@example.com", lookups) is Role.RESPONDER  # via oncall
    assert await role_of(grants, "nina@example.com", lookups) is Role.VIEWER  # the domain only
    assert await role_of(grants, "x@elsewhere.example", lookups) is None


async def test_an_admin_by_name_costs_no_lookup(directory: FakeCloudIdentity) -> None:
    grants = parse_grants(json.dumps(GRANTS))

    assert (
        await role_of(grants, "ada@example.com", GroupDirectory(directory.base_url)) is Role.ADMIN
    )
    assert directory.requests == []


async def test_answers_are_kept_for_minutes_then_asked_again(directory: FakeCloudIdentity) -> None:
    grants = parse_grants(json.dumps(GRANTS))
    clock = Clock()
    lookups = GroupDirectory(directory.base_url, clock=clock, ttl=300)
    assert await role_of(grants, "sam@example.com", lookups) is Role.RESPONDER
    asked = len(directory.requests)

    assert await role_of(grants, "sam@example.com", lookups) is Role.RESPONDER
    assert len(directory.requests) == asked  # from the cache

    directory.groups[SRE].discard("sam@example.com")  # removed in the directory
    clock.now += 301
    assert await role_of(grants, "sam@example.com", lookups) is Role.VIEWER
    assert len(directory.requests) > asked


async def test_a_directory_that_cannot_answer_grants_nothing_and_is_asked_again(
    directory: FakeCloudIdentity,
) -> None:
    grants = parse_grants(json.dumps(GRANTS))
    lookups = GroupDirectory(directory.base_url)
    directory.failing = 503

    assert await role_of(grants, "sam@example.com", lookups) is Role.VIEWER

    directory.failing = None
    assert await role_of(grants, "sam@example.com", lookups) is Role.RESPONDER


async def test_a_signed_in_member_of_a_group_gets_its_role_in_the_api(
    directory: FakeCloudIdentity, signin: SignIn
) -> None:
    settings = signin.settings().model_copy(
        update={
            "access_grants": json.dumps(GRANTS),
            "cloud_identity_url": directory.base_url,
        }
    )

    olga = await authenticate(signin.headers("olga@example.com"), settings)
    nobody = await authenticate(signin.headers("x@elsewhere.example"), settings)

    assert (olga.email, olga.role) == ("olga@example.com", Role.RESPONDER)
    assert nobody.role is None
    olga.require("chat")


def test_a_group_is_named_by_its_email() -> None:
    grants = parse_grants(json.dumps({"responder": ["group:SRE@Example.com"]}))
    assert grants.groups(Role.RESPONDER) == ("sre@example.com",)
    assert grants.has_groups and "group:sre@example.com" in grants.members()
    assert not parse_grants(json.dumps({"viewer": ["domain:example.com"]})).has_groups

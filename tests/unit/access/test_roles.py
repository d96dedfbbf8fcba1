"""Roles from configuration: who holds which, and what each action needs."""

from __future__ import annotations

import json

import pytest

from tarsy.access.roles import REQUIRED_ROLE, Grants, Principal, Role, parse_grants
from tarsy.errors import ConfigError, ForbiddenError

GRANTS = parse_grants(
    json.dumps(
        {
            "viewer": ["domain:example.com", "user:Vic@Other.example"],
            "responder": ["user:rita@example.com"],
            "admin": ["serviceAccount:ci@project.iam.gserviceaccount.com"],
        }
    )
)


@pytest.mark.parametrize(
    ("email", "role"),
    [
        ("rita@example.com", Role.RESPONDER),  # her own grant beats her domain's
        ("RITA@example.com", Role.RESPONDER),  # e-mails compare without case
        ("someone@example.com", Role.VIEWER),  # by domain
        ("vic@other.example", Role.VIEWER),
        ("ci@project.iam.gserviceaccount.com", Role.ADMIN),
        ("someone@example.com.evil.test", None),  # a domain is matched whole
        ("mallory@elsewhere.example", None),
    ],
)
def test_a_person_holds_the_highest_role_any_member_grants(email: str, role: Role | None) -> None:
    assert GRANTS.role_of(email) is role


def test_roles_are_ordered_each_holding_the_ones_below() -> None:
    assert Role.ADMIN.allows(Role.RESPONDER) and Role.RESPONDER.allows(Role.VIEWER)
    assert not Role.VIEWER.allows(Role.RESPONDER)
    assert not Role.RESPONDER.allows(Role.ADMIN)


def test_reading_is_a_viewers_the_audit_and_erasure_an_admins_and_the_rest_a_responders() -> None:
    assert REQUIRED_ROLE["read"] is Role.VIEWER
    assert REQUIRED_ROLE["audit"] is REQUIRED_ROLE["erase"] is Role.ADMIN
    acting = {a: role for a, role in REQUIRED_ROLE.items() if a not in ("read", "audit", "erase")}
    assert set(acting.values()) == {Role.RESPONDER}


@pytest.mark.parametrize(
    ("role", "action"), [(Role.VIEWER, "cancel"), (Role.VIEWER, "chat"), (None, "read")]
)
def test_a_refusal_names_the_role_the_action_needs(role: Role | None, action: str) -> None:
    with pytest.raises(ForbiddenError) as refused:
        Principal(email="v@example.com", role=role).require(action)  # type: ignore[arg-type]
    assert refused.value.status == 403
    assert refused.value.required_role == REQUIRED_ROLE[action].value  # type: ignore[index]
    assert refused.value.details == {"required_role": refused.value.required_role}


def test_a_responder_may_act_and_read_but_not_read_the_audit_or_erase() -> None:
    rita = Principal(email="rita@example.com", role=Role.RESPONDER)
    for action in REQUIRED_ROLE:
        if action in ("audit", "erase"):
            with pytest.raises(ForbiddenError) as refused:
                rita.require(action)
            assert refused.value.status == 403
        else:
            rita.require(action)
    ada = Principal(email="ada@example.com", role=Role.ADMIN)
    for action in REQUIRED_ROLE:
        ada.require(action)


@pytest.mark.parametrize(
    ("raw", "location"),
    [
        ('{"viewer": ["group:sre"]}', "viewer"),
        ('{"viewer": ["sre@example.com"]}', "viewer"),
        ('{"owner": ["user:a@example.com"]}', "owner"),
        ('{"admin": ["user:"]}', "admin"),
    ],
)
def test_grants_that_would_not_work_are_refused_at_load(raw: str, location: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_grants(raw)
    assert [loc.split(".")[0] for loc, _ in refused.value.errors] == [location]


def test_grants_that_are_not_json_are_refused() -> None:
    with pytest.raises(ConfigError, match="not JSON"):
        parse_grants("viewer=a@example.com")


def test_no_grants_grant_nothing() -> None:
    assert parse_grants("") == Grants()
    assert Grants().role_of("anyone@example.com") is None


def test_the_members_are_every_grantee_once() -> None:
    assert GRANTS.members() == sorted(
        [
            "domain:example.com",
            "user:vic@other.example",
            "user:rita@example.com",
            "serviceAccount:ci@project.iam.gserviceaccount.com",
        ]
    )

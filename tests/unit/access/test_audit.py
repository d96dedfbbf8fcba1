"""How an action is recorded, and how the session list finds it again."""

from __future__ import annotations

from tarsy.access.audit import DETAIL_CHARS, audit_event, audit_keys
from tarsy.access.roles import Principal, Role
from tarsy.commands.session_list import parse_query
from tarsy.persistence.audit_log import AuditQuery

RITA = Principal(email="rita@example.com", role=Role.RESPONDER)


def test_an_action_is_recorded_with_who_their_role_and_what() -> None:
    event = audit_event(RITA, "cancel_agent", target="s-1-0-agent")
    assert (event.action, event.actor, event.role, event.target) == (
        "cancel_agent",
        "rita@example.com",
        "responder",
        "s-1-0-agent",
    )


def test_a_long_question_is_shortened_in_the_record() -> None:
    event = audit_event(RITA, "chat", detail="why? " * 200)
    assert len(event.detail) == DETAIL_CHARS and event.detail.endswith("…")


def test_the_list_finds_a_session_by_action_by_actor_and_by_both() -> None:
    keys = audit_keys(audit_event(RITA, "cancel"))
    for query in (
        "action=cancel",
        "actor=rita@example.com",
        "actor=Rita@Example.com&action=cancel",
    ):
        assert parse_query(query).audit_key in keys, query
    assert parse_query("action=chat").audit_key not in keys
    assert parse_query("actor=vic@example.com&action=cancel").audit_key not in keys
    assert parse_query("status=completed").audit_key is None


def test_the_actor_is_stored_lower_cased_as_the_audit_filter_reads_it() -> None:
    """A Slack profile's address arrives as typed; GET /audit?actor= lower-cases its input."""
    typed = Principal(email=" Rita.Ops@Example.COM", role=Role.RESPONDER)
    event = audit_event(typed, "chat")
    assert event.actor == "rita.ops@example.com"
    assert AuditQuery(actor="RITA.ops@example.com").actor == event.actor
    assert parse_query("actor=Rita.Ops@Example.com").audit_key in audit_keys(event)

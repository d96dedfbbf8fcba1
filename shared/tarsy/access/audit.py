"""How an action is recorded on its session: an audit event, and keys the list filters on.

Design constraint: pure. An action is recorded in the same commit as its
own writes (:mod:`tarsy.api.recorded`; a refused one writes nothing), as one
``sessions/{sid}/audit`` document plus keys added to the session's
``audit_keys``, so that the session list finds "sessions alice cancelled" with
one array-contains filter (Firestore allows one per query): the action alone,
the actor alone, and the pair. An erasure's record is ``audit/{id}``, the one
record of its session kept.
"""

from __future__ import annotations

from tarsy.access.roles import Principal, RecordedAction
from tarsy.models import AuditEvent

DETAIL_CHARS = 200


def audit_key(*, action: str | None, actor: str | None) -> str | None:
    """The key that finds sessions by action, actor or both (None: no such filter)."""
    if action and actor:
        return f"{action}:by:{actor.lower()}"
    if action:
        return action
    if actor:
        return f"by:{actor.lower()}"
    return None


def audit_keys(event: AuditEvent) -> list[str]:
    """Every key under which the session list finds the session this event happened to."""
    keys = [
        audit_key(action=event.action, actor=None),
        audit_key(action=None, actor=event.actor),
        audit_key(action=event.action, actor=event.actor),
    ]
    return [k for k in keys if k is not None]


def audit_event(
    principal: Principal, action: RecordedAction, *, target: str | None = None, detail: str = ""
) -> AuditEvent:
    """The record of ``principal`` doing ``action`` now, its actor lower-cased.

    Design constraint: the audit's actor filter (``GET /audit?actor=``, an
    equality in Firestore) lower-cases what it is given, so the stored actor
    must be lower-case too, whoever verified the e-mail: IAP's assertion is
    lower-cased on reading, but a Slack profile's address arrives as typed.
    E-mail addresses are treated as case-insensitive, as the grants are.
    """
    shortened = detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 1] + "…"
    return AuditEvent(
        action=action,
        actor=principal.email.strip().lower(),
        role=principal.role.value if principal.role else "",
        target=target,
        detail=shortened,
    )

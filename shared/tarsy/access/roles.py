"""Roles granted to people by configuration, and the role each api action needs.

Design constraint: pure. The grants are read once from ``TARSY_ACCESS_GRANTS``
(a JSON object ``{"viewer": [...], "responder": [...], "admin": [...]}`` of
IAM-style members: ``user:EMAIL``, ``serviceAccount:EMAIL``, ``domain:DOMAIN``
or ``group:EMAIL``), the same value Terraform turns into the proxy's access
list, so who may pass the proxy and what they may do there come from one
place. A person holds the highest role any member grants them; roles are
ordered, each one containing the ones below it. :meth:`Grants.role_of` is the
pure part (names and domains); the proxy's assertion carries no group
memberships, so ``group:`` members are looked up in Cloud Identity by
:func:`tarsy.access.groups.role_of`.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Literal, get_args

from pydantic import ConfigDict, Field, ValidationError, field_validator

from tarsy._pydantic import DeferredModel
from tarsy.errors import ConfigError, ForbiddenError

_MEMBER_KINDS = ("user", "serviceAccount", "domain", "group")


class Role(StrEnum):
    """What a person may do: read (viewer), act on sessions (responder), everything (admin)."""

    VIEWER = "viewer"
    RESPONDER = "responder"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        """The role's place in the order viewer < responder < admin."""
        return _RANKS[self]

    def allows(self, needed: Role) -> bool:
        """Whether this role holds ``needed`` (itself or a role below it)."""
        return self.rank >= needed.rank


_RANKS = {Role.VIEWER: 0, Role.RESPONDER: 1, Role.ADMIN: 2}

# What each api action needs. Reading is a viewer's; anything that changes a session,
# or spends money on a model (chat, re-score), is a responder's; reading the audit
# across sessions and erasing a session are an admin's alone.
RecordedAction = Literal[
    "cancel", "cancel_agent", "resume", "chat", "score", "investigate", "feedback", "erase"
]
Action = Literal[
    "read", "cancel", "cancel_agent", "resume", "chat", "score", "investigate", "feedback",
    "audit", "erase",
]  # fmt: skip
RECORDED_ACTIONS: tuple[RecordedAction, ...] = get_args(RecordedAction)
REQUIRED_ROLE: dict[Action, Role] = {
    "read": Role.VIEWER,
    "cancel": Role.RESPONDER,
    "cancel_agent": Role.RESPONDER,
    "resume": Role.RESPONDER,
    "chat": Role.RESPONDER,
    "score": Role.RESPONDER,
    "investigate": Role.RESPONDER,
    "feedback": Role.RESPONDER,
    "audit": Role.ADMIN,
    "erase": Role.ADMIN,
}


class Grants(DeferredModel):
    """Members granted each role (``TARSY_ACCESS_GRANTS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    viewer: tuple[str, ...] = ()
    responder: tuple[str, ...] = ()
    admin: tuple[str, ...] = ()

    @field_validator("viewer", "responder", "admin")
    @classmethod
    def _members(cls, members: tuple[str, ...]) -> tuple[str, ...]:
        normalized: list[str] = []
        for member in members:
            kind, sep, name = member.partition(":")
            if not sep or kind not in _MEMBER_KINDS or not name.strip():
                raise ValueError(
                    f"{member!r}: a member is user:EMAIL, serviceAccount:EMAIL, "
                    "domain:DOMAIN or group:EMAIL"
                )
            if kind == "group" and "@" not in name:
                raise ValueError(f"{member!r}: a group is named by its e-mail, group:EMAIL")
            normalized.append(f"{kind}:{name.strip().lower()}")
        return tuple(normalized)

    def role_of(self, email: str) -> Role | None:
        """The highest role granted to ``email`` by name or domain (None: none; groups aside)."""
        address = email.strip().lower()
        domain = address.rpartition("@")[2]
        held = {f"user:{address}", f"serviceAccount:{address}", f"domain:{domain}"}
        for role in (Role.ADMIN, Role.RESPONDER, Role.VIEWER):
            if held & set(getattr(self, role.value)):
                return role
        return None

    def groups(self, role: Role) -> tuple[str, ...]:
        """The e-mails of the groups granted exactly ``role``."""
        prefix = "group:"
        return tuple(m[len(prefix) :] for m in getattr(self, role.value) if m.startswith(prefix))

    @property
    def has_groups(self) -> bool:
        """Whether any role is granted to a group (membership is then looked up)."""
        return any(self.groups(role) for role in Role)

    def members(self) -> list[str]:
        """Every member granted any role, once each, sorted (the proxy's access list)."""
        return sorted({*self.viewer, *self.responder, *self.admin})


def parse_grants(raw: str) -> Grants:
    """Read ``TARSY_ACCESS_GRANTS``; '' grants nothing.

    Raises:
        ConfigError: Not a JSON object of role -> members, or a member not understood.
    """
    if not raw.strip():
        return Grants()
    try:
        return Grants.model_validate(json.loads(raw))
    except json.JSONDecodeError as e:
        raise ConfigError(f"TARSY_ACCESS_GRANTS is not JSON: {e}") from e
    except ValidationError as e:
        raise ConfigError(
            "TARSY_ACCESS_GRANTS is invalid",
            [(".".join(str(p) for p in err["loc"]), err["msg"]) for err in e.errors()],
        ) from e


class Principal(DeferredModel):
    """Who made a request, as verified, and the role they hold."""

    model_config = ConfigDict(frozen=True)

    email: str = Field(description="the verified e-mail of the person or service account")
    role: Role | None = Field(description="the highest role granted; None: none at all")

    def require(self, action: Action) -> None:
        """Raise ForbiddenError unless this principal may do ``action``."""
        needed = REQUIRED_ROLE[action]
        if self.role is None or not self.role.allows(needed):
            held = f"holds {self.role.value}" if self.role else "holds no role"
            raise ForbiddenError(
                f"{action.replace('_', ' ')} needs the {needed.value} role; {self.email} {held}",
                required_role=needed.value,
            )

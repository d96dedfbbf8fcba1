"""Google groups in the grants: membership looked up in Cloud Identity, cached for minutes.

Design constraint: Identity-Aware Proxy's assertion names the person, never
their groups, so a ``group:EMAIL`` member of ``TARSY_ACCESS_GRANTS`` is
resolved by asking the Cloud Identity Groups API, with the function's own
credentials (google-auth's Application Default Credentials, scope
``cloud-identity.groups.readonly``): ``groups:lookup`` turns the group's
e-mail into its resource name, then
``groups/{id}/memberships:checkTransitiveMembership`` answers whether the
person is in it, directly or through nested groups. Each answer (and each
group's name) is kept per process for :data:`CACHE_SECONDS`, so a signed-in
page load costs no lookup; a membership removed in the directory is honoured
within that time. A lookup that fails grants nothing (fail closed) and is not
kept: the next request asks again.

The service account needs to read group memberships: the Groups Reader admin
role assigned to it in the Google Admin console (docs/deploy.md). Checking
transitive membership is a Cloud Identity Premium / Workspace Enterprise
feature.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tarsy.access.roles import Grants, Role
from tarsy.settings import Settings

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

SCOPE = "https://www.googleapis.com/auth/cloud-identity.groups.readonly"
CACHE_SECONDS = 300.0
TIMEOUT_SECONDS = 5.0


class GroupLookupError(Exception):
    """Cloud Identity could not say whether someone is in a group (nothing is granted)."""


class _LookupResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str


class _MembershipResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    has_membership: bool = Field(default=False, alias="hasMembership")


def _default_token() -> str:
    """An access token of the process's own credentials (blocking: run it in a thread)."""
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default(scopes=[SCOPE])
    credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
    return str(credentials.token)


class GroupDirectory:
    """Who is in which group, asked of Cloud Identity at ``base_url`` and kept for a while."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Callable[[], str] = _default_token,
        clock: Callable[[], float] = time.monotonic,
        ttl: float = CACHE_SECONDS,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._token_source = token
        self._clock = clock
        self._ttl = ttl
        self._lock = threading.Lock()
        self._members: dict[tuple[str, str], tuple[float, bool]] = {}
        self._names: dict[str, tuple[float, str | None]] = {}
        self._token: tuple[float, str] | None = None
        self.lookups = 0  # requests made to Cloud Identity (the cache is measured by it)

    def _cached(self, cache: dict[Any, tuple[float, Any]], key: object) -> tuple[bool, Any]:
        with self._lock:
            hit = cache.get(key)
        if hit is not None and self._clock() - hit[0] < self._ttl:
            return True, hit[1]
        return False, None

    async def _bearer(self) -> str:
        now = self._clock()
        if self._token is not None and now - self._token[0] < min(self._ttl, 1800.0):
            return self._token[1]
        token = await asyncio.to_thread(self._token_source)
        self._token = (now, token)
        return token

    async def _get(self, client: httpx.AsyncClient, path: str, params: dict[str, str]) -> Any:
        self.lookups += 1
        headers = {"Authorization": f"Bearer {await self._bearer()}"}
        response = await client.get(f"{self._base_url}{path}", params=params, headers=headers)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise GroupLookupError(f"Cloud Identity answered {response.status_code} for {path}")
        return response.json()

    async def _group_name(self, client: httpx.AsyncClient, group: str) -> str | None:
        hit, name = self._cached(self._names, group)
        if hit:
            return str(name) if name is not None else None
        body = await self._get(client, "/v1/groups:lookup", {"groupKey.id": group})
        name = _LookupResponse.model_validate(body).name if body is not None else None
        with self._lock:
            self._names[group] = (self._clock(), name)
        return name

    async def is_member(self, group: str, email: str) -> bool:
        """Whether ``email`` is in ``group`` (directly or through nested groups).

        Raises:
            GroupLookupError: Cloud Identity could not be asked or did not answer.
        """
        group, email = group.strip().lower(), email.strip().lower()
        if "'" in email or "\\" in email:
            return False  # not an address the query could carry; no one's
        hit, member = self._cached(self._members, (group, email))
        if hit:
            return bool(member)
        # Imported here: only grants that name a group ask Cloud Identity.
        import httpx

        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
                name = await self._group_name(client, group)
                if name is None:
                    logger.warning("group %r named in the grants does not exist", group)
                    member = False
                else:
                    body = await self._get(
                        client,
                        f"/v1/{name}/memberships:checkTransitiveMembership",
                        {"query": f"member_key_id == '{email}'"},
                    )
                    member = body is not None and (
                        _MembershipResponse.model_validate(body).has_membership
                    )
        except (httpx.HTTPError, ValidationError, ValueError) as e:
            raise GroupLookupError(f"Cloud Identity lookup of {group!r} failed: {e}") from e
        except Exception as e:  # google-auth's refresh errors, among others
            raise GroupLookupError(f"Cloud Identity lookup of {group!r} failed: {e}") from e
        with self._lock:
            self._members[(group, email)] = (self._clock(), member)
        return member


async def role_of(grants: Grants, email: str, directory: GroupDirectory | None) -> Role | None:
    """The highest role granted to ``email``: directly, or through a group it is in.

    Groups are asked only for roles above the one granted directly, highest
    first, so an admin by name costs no lookup. A group that cannot be looked
    up grants nothing (logged).
    """
    direct = grants.role_of(email)
    if directory is None:
        return direct
    for role in (Role.ADMIN, Role.RESPONDER, Role.VIEWER):
        if direct is not None and role.rank <= direct.rank:
            break
        for group in grants.groups(role):
            try:
                if await directory.is_member(group, email):
                    return role
            except GroupLookupError as e:
                logger.warning("%s; %s is not given %s through it", e, email, role.value)
    return direct


_directories: dict[str, GroupDirectory] = {}
_directories_lock = threading.Lock()


def directory_for(grants: Grants, settings: Settings) -> GroupDirectory | None:
    """The process-wide directory, when the grants name a group at all (else None)."""
    if not grants.has_groups:
        return None
    with _directories_lock:
        directory = _directories.get(settings.cloud_identity_url)
        if directory is None:
            directory = GroupDirectory(settings.cloud_identity_url)
            _directories[settings.cloud_identity_url] = directory
        return directory

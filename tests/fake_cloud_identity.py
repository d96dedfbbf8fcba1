"""A loopback fake of the Cloud Identity Groups API calls tarsy makes to resolve ``group:`` grants.

``GET /v1/groups:lookup?groupKey.id=EMAIL`` answers the group's resource name
(``{"name": "groups/ID"}``, 404 for an unknown group) and ``GET
/v1/groups/ID/memberships:checkTransitiveMembership?query=member_key_id ==
'EMAIL'`` answers ``{"hasMembership": ...}``, following nested groups as the
API does. Every request must carry ``Authorization: Bearer`` with a token the
given check accepts (the fake Google OAuth endpoint's, so the real google-auth
service-account flow runs), else 401. :attr:`FakeCloudIdentity.failing` makes
every call answer that status.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.json_handler import JsonHandler, serving

CHECK_PATH = re.compile(r"^/v1/groups/(?P<id>[^/]+)/memberships:checkTransitiveMembership$")
QUERY = re.compile(r"^member_key_id\s*==\s*'(?P<email>[^'\\]+)'$")


@dataclass
class FakeCloudIdentity:
    """The directory: each group's direct members (people, or other groups' e-mails)."""

    token_ok: Callable[[str], bool]
    port: int = 0
    groups: dict[str, set[str]] = field(default_factory=dict)
    failing: int | None = None
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """``TARSY_CLOUD_IDENTITY_URL`` for this fake."""
        return f"http://127.0.0.1:{self.port}"

    def transitive(self, group: str, email: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``email`` is in ``group`` or in a group nested in it."""
        members = self.groups.get(group, set())
        if email in members:
            return True
        return any(
            self.transitive(inner, email, seen | {group})
            for inner in members
            if inner in self.groups and inner not in seen
        )


def _group_id(email: str) -> str:
    return email.replace("@", "-at-").replace(".", "-")


class _Handler(JsonHandler):
    state: FakeCloudIdentity

    def _error(self, status: int, reason: str) -> None:
        self._answer(status, {"error": {"code": status, "message": reason, "status": reason}})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        with self.state.lock:
            self.state.requests.append(url.path)
        authorization = self.headers.get("Authorization", "")
        if not authorization.startswith("Bearer ") or not self.state.token_ok(authorization[7:]):
            self._error(401, "UNAUTHENTICATED")
            return
        if self.state.failing is not None:
            self._error(self.state.failing, "UNAVAILABLE")
            return
        if url.path == "/v1/groups:lookup":
            group = query.get("groupKey.id", "")
            if group not in self.state.groups:
                self._error(404, "NOT_FOUND")
                return
            self._answer(200, {"name": f"groups/{_group_id(group)}"})
            return
        check = CHECK_PATH.match(url.path)
        wanted = QUERY.match(query.get("query", "").strip())
        if check is None or wanted is None:
            self._error(400, "INVALID_ARGUMENT")
            return
        named = [g for g in self.state.groups if _group_id(g) == check["id"]]
        if not named:
            self._error(404, "NOT_FOUND")
            return
        self._answer(200, {"hasMembership": self.state.transitive(named[0], wanted["email"])})


@contextmanager
def fake_cloud_identity(token_ok: Callable[[str], bool]) -> Iterator[FakeCloudIdentity]:
    """Serve a :class:`FakeCloudIdentity` on 127.0.0.1 in a thread for the duration of the block."""
    state = FakeCloudIdentity(token_ok=token_ok)
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Handler,), {"state": state}))
    with serving(server) as port:
        state.port = port
        yield state

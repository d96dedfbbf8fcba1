"""The api function's route table: every route, who may call it, and what it needs.

Design constraint: one table, read by both doors the api function serves (the
JSON api, :mod:`tarsy.api.handlers`, and the pages' data, :mod:`tarsy.web.pages`,
neither importing the other) and by the tests, so
that a route added here is at once under the sign-in check, the role check and
(for a state-changing route) the same-origin and JSON checks of
:mod:`tarsy.http.same_origin`, and no test's list of routes can leave it out.
Pure: no I/O, no framework.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from tarsy.access.roles import REQUIRED_ROLE, Action

Method = Literal["GET", "POST", "DELETE"]
# Who calls a route: anyone (health), Cloud Scheduler (its OIDC token, not a
# browser's cookie), or a person signed in through the proxy.
Caller = Literal["anyone", "scheduler", "person"]

_PARAMETER = re.compile(r"\{(?P<name>\w+)\}")


def _pattern(template: str) -> re.Pattern[str]:
    """``/sessions/{session_id}`` as a regular expression naming its parameters."""
    parts: list[str] = []
    last = 0
    for found in _PARAMETER.finditer(template):
        parts.append(re.escape(template[last : found.start()]))
        parts.append(rf"(?P<{found['name']}>[\w\-]+)")
        last = found.end()
    parts.append(re.escape(template[last:]))
    return re.compile("^" + "".join(parts) + "$")


@dataclass(frozen=True)
class Route:
    """One route: its method, its path template, who calls it and the action it is."""

    method: Method
    template: str
    caller: Caller
    # The role check's action for a person's route (None for the others).
    action: Action | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", _pattern(self.template))
        if (self.caller == "person") != (self.action is not None):
            raise ValueError(f"{self.template}: a person's route, and only one, names an action")

    @property
    def changes_state(self) -> bool:
        """Whether the route writes (anything but GET): it takes JSON from its own site only."""
        return self.method != "GET"

    @property
    def role(self) -> str | None:
        """The role the route needs (None: not a person's route)."""
        return None if self.action is None else REQUIRED_ROLE[self.action].value

    def path(self, **parameters: str) -> str:
        """The template with its parameters filled in."""
        return _PARAMETER.sub(lambda m: parameters[m["name"]], self.template)


# The JSON api, served by tarsy.api.handlers.
API_ROUTES: tuple[Route, ...] = (
    Route("GET", "/healthz", "anyone"),
    Route("POST", "/sweep", "scheduler"),
    Route("POST", "/retention", "scheduler"),
    Route("GET", "/sessions", "person", "read"),
    Route("GET", "/sessions/{session_id}", "person", "read"),
    Route("DELETE", "/sessions/{session_id}", "person", "erase"),
    Route("GET", "/audit", "person", "audit"),
    Route("POST", "/sessions/{session_id}/cancel", "person", "cancel"),
    Route("POST", "/sessions/{session_id}/resume", "person", "resume"),
    Route("POST", "/sessions/{session_id}/chat", "person", "chat"),
    Route("POST", "/sessions/{session_id}/score", "person", "score"),
    Route("POST", "/sessions/{session_id}/investigate", "person", "investigate"),
    Route("POST", "/sessions/{session_id}/feedback", "person", "feedback"),
    Route(
        "POST", "/sessions/{session_id}/executions/{execution_id}/cancel", "person", "cancel_agent"
    ),
)
# The pages' data, served by tarsy.web.pages (the shells and assets carry no data).
PAGE_DATA_ROUTES: tuple[Route, ...] = (
    Route("GET", "/ui/data/sessions", "person", "read"),
    Route("GET", "/ui/data/sessions/{session_id}", "person", "read"),
    Route("GET", "/ui/data/audit", "person", "audit"),
)
ROUTES: tuple[Route, ...] = API_ROUTES + PAGE_DATA_ROUTES


def person_routes() -> tuple[Route, ...]:
    """Every route a signed-in person calls (the sign-in tests try each one)."""
    return tuple(r for r in ROUTES if r.caller == "person")


def state_changing_routes() -> tuple[Route, ...]:
    """Every route a person calls that writes (the cross-site tests try each one)."""
    return tuple(r for r in person_routes() if r.changes_state)


def find_route(
    routes: tuple[Route, ...], method: str, path: str
) -> tuple[Route | None, dict[str, str], tuple[str, ...]]:
    """The route ``method path`` is, its parameters, and the methods its path takes.

    Returns:
        ``(route, parameters, allowed)``: route None with ``allowed`` empty: no
        such path (404); route None with ``allowed`` set: another method (405).
    """
    allowed: list[str] = []
    for route in routes:
        found = route.pattern.match(path)
        if found is None:
            continue
        if route.method == method:
            return route, found.groupdict(), ()
        allowed.append(route.method)
    return None, {}, tuple(allowed)

"""Where a session's page is, for the messages and commands that point people at it.

Import-light on purpose: Slack notifications, ingest replies and the CLI use it
without loading the templates.
"""

from __future__ import annotations

import re
from urllib.parse import quote

# The prefix of every browser page on the api function.
UI_PREFIX = "/ui"


def list_url(api_url: str) -> str:
    """The session list's page on the api at ``api_url``."""
    return f"{api_url.rstrip('/')}{UI_PREFIX}/"


def session_url(api_url: str, session_id: str) -> str:
    """A session's page on the api at ``api_url``."""
    return f"{api_url.rstrip('/')}{UI_PREFIX}/sessions/{quote(session_id, safe='')}"


def is_web_path(path: str) -> bool:
    """Whether the api's ``path`` is one of the browser routes."""
    return path == UI_PREFIX or path.startswith(UI_PREFIX + "/")


# The session segment of an api or page path: /sessions/{id}, /ui/sessions/{id}, /ui/data/...
_SESSION_SEGMENT = re.compile(r"^(/ui(?:/data)?)?/sessions/[^/]+")


def span_route(path: str) -> str:
    """The route a span is named after: the path, its session id replaced by a placeholder.

    A span name must not carry the session id (one name per route, not per session).
    """
    return _SESSION_SEGMENT.sub(r"\1/sessions/{session_id}", path)

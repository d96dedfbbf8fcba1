"""A loopback fake of the Slack Web API methods tarsy calls, for slack-sdk's ``base_url``.

``chat.postMessage`` is recorded (and answered with a new ``ts``); what was
posted shows in the channel as Slack shows it: ``conversations.history``
answers with :attr:`FakeSlack.history` and the top-level posts, newest first;
``conversations.replies`` with a thread's parent and its replies; ``users.info``
with :attr:`FakeSlack.users` (``{"U...": "email"}``: the profile's e-mail, as
with the ``users:read.email`` scope; an unknown user is ``user_not_found``). A
message's
``metadata`` comes back only with ``include_all_metadata``, as Slack does. Any
method can be made to fail with an HTTP status or with Slack's
``{"ok": false, "error": ...}``, before or after it took effect
(``Failure.after``: the post is made, the answer is lost). The real
``slack_sdk.WebClient`` talks to it over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.json_handler import JsonHandler, serving

POST_MESSAGE = "chat.postMessage"
HISTORY = "conversations.history"
REPLIES = "conversations.replies"
USERS_INFO = "users.info"


@dataclass
class Failure:
    """How one method fails: an HTTP status, or ok:false with an error code."""

    status: int = 200
    error: str | None = None
    # True: the method takes effect (a post is made), then the answer is the failure.
    after: bool = False


@dataclass
class FakeSlack:
    """What the fake serves and what it was sent."""

    port: int = 0
    token: str = "xoxb-test-token"
    history: list[dict[str, Any]] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    posts: list[dict[str, Any]] = field(default_factory=list)
    history_requests: list[dict[str, str]] = field(default_factory=list)
    replies_requests: list[dict[str, str]] = field(default_factory=list)
    unauthorized: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """What slack-sdk's ``base_url`` must be (it appends the method name)."""
        return f"http://127.0.0.1:{self.port}/api/"

    def posted(self) -> list[dict[str, Any]]:
        """A copy of the recorded chat.postMessage bodies."""
        with self.lock:
            return list(self.posts)


class _Handler(JsonHandler):
    state: FakeSlack

    def _arguments(self) -> dict[str, Any]:
        url = urlsplit(self.path)
        arguments: dict[str, Any] = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if raw:
            if "json" in (self.headers.get("Content-Type") or ""):
                arguments.update(json.loads(raw))
            else:
                arguments.update({k: v[0] for k, v in parse_qs(raw.decode()).items()})
        return arguments

    def _channel(self, channel: str, with_metadata: bool) -> list[dict[str, Any]]:
        """Every message of ``channel``, newest first, as the API returns them."""
        with self.state.lock:
            posted = [
                {
                    "type": "message",
                    "ts": post["ts"],
                    "text": post.get("text", ""),
                    "bot_id": "B0TARSY",
                    **({"thread_ts": post["thread_ts"]} if post.get("thread_ts") else {}),
                    **({"metadata": _json(post["metadata"])} if post.get("metadata") else {}),
                }
                for post in self.state.posts
                if post.get("channel") == channel
            ]
            given = list(self.state.history)
        messages = sorted(posted, key=lambda m: str(m["ts"]), reverse=True) + given
        if not with_metadata:
            messages = [{k: v for k, v in m.items() if k != "metadata"} for m in messages]
        return messages

    def _serve(self) -> None:
        method = urlsplit(self.path).path.rsplit("/", 1)[-1]
        arguments = self._arguments()
        if self.headers.get("Authorization") != f"Bearer {self.state.token}":
            with self.state.lock:
                self.state.unauthorized += 1
            self._answer(200, {"ok": False, "error": "invalid_auth"})
            return
        failure = self.state.failures.get(method)
        if failure is not None and not failure.after and self._fail(failure):
            return
        with_metadata = str(arguments.get("include_all_metadata", "")).lower() in (
            "1",
            "true",
        )
        if method == POST_MESSAGE:
            with self.state.lock:
                ts = f"1700000000.{len(self.state.posts) + 1:06d}"
                self.state.posts.append({**arguments, "ts": ts})
            answer = {"ok": True, "channel": arguments.get("channel"), "ts": ts}
        elif method == HISTORY:
            with self.state.lock:
                self.state.history_requests.append({k: str(v) for k, v in arguments.items()})
            # As Slack does: a thread's replies are not in the channel's history.
            messages = [
                m
                for m in self._channel(str(arguments.get("channel")), with_metadata)
                if m.get("thread_ts", m.get("ts")) == m.get("ts")
            ]
            answer = {"ok": True, "messages": messages, "has_more": False}
        elif method == REPLIES:
            with self.state.lock:
                self.state.replies_requests.append({k: str(v) for k, v in arguments.items()})
            parent = str(arguments.get("ts"))
            thread = [
                m
                for m in self._channel(str(arguments.get("channel")), with_metadata)
                if m.get("ts") == parent or m.get("thread_ts") == parent
            ]
            thread.sort(key=lambda m: str(m["ts"]))  # oldest first, parent on top
            answer = {"ok": True, "messages": thread, "has_more": False}
        elif method == USERS_INFO:
            user = str(arguments.get("user"))
            email = self.state.users.get(user)
            if email is None:
                self._answer(200, {"ok": False, "error": "user_not_found"})
                return
            answer = {"ok": True, "user": {"id": user, "profile": {"email": email}}}
        else:
            self._answer(404, {"ok": False, "error": "unknown_method"})
            return
        if failure is not None and failure.after and self._fail(failure):
            return
        self._answer(200, answer)

    def _fail(self, failure: Failure) -> bool:
        if failure.status != 200:
            self._answer(failure.status, {"ok": False, "error": "fatal_error"})
            return True
        if failure.error:
            self._answer(200, {"ok": False, "error": failure.error})
            return True
        return False

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()


def _handler(state: FakeSlack) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"state": state})


def _json(value: Any) -> Any:
    """A form-encoded JSON argument (slack-sdk sends ``metadata`` and ``blocks`` so), decoded."""
    return json.loads(value) if isinstance(value, str) else value


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    """Serve a :class:`FakeSlack` on 127.0.0.1 in a thread for the duration of the block."""
    state = FakeSlack()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    with serving(server) as port:
        state.port = port
        yield state

"""Runbooks from URLs: which URL, whether it may be fetched, the fetch against a fake transport."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import httpx
import pytest

from tarsy.agent.prompts import user_prompt
from tarsy.config import load_config
from tarsy.errors import ConfigError, RunbookError
from tarsy.models import Session
from tarsy.settings import Settings
from tarsy.tools.masking import MaskingConfig
from tarsy.tools.runbooks import (
    FETCH_ATTEMPTS,
    check_url,
    decode_text,
    fetch_runbook,
    fetch_timeout,
    is_url,
    prompt_runbook,
    raw_url,
    resolve_runbook,
    runbook_source,
)
from tarsy_dev.cli import runbook_line

GITHUB = ("github.com", "raw.githubusercontent.com")
BLOB = "https://github.com/org/runbooks/blob/main/k8s/crashloop.md"
RAW = "https://raw.githubusercontent.com/org/runbooks/main/k8s/crashloop.md"


def session(**fields: object) -> Session:
    return Session.model_validate(
        {"session_id": "s", "alert_type": "t", "alert_data": "d", "chain_id": "c", **fields}
    )


# ─── which URL (pure) ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("runbook", "expected"),
    [
        ("https://github.com/o/r/blob/main/rb.md", True),
        ("  http://runbooks.example/x  ", True),
        ("HTTPS://EXAMPLE.COM/RB", True),
        ("1. Check the logs.\n2. https://example.com", False),
        ("see https://example.com", False),
        ("ftp://example.com/rb", False),
        ("", False),
        (None, False),
    ],
)
def test_a_runbook_is_a_url_only_when_it_is_one_url(runbook: str | None, expected: bool) -> None:
    assert is_url(runbook) is expected


def test_the_alerts_runbook_wins_over_the_chains() -> None:
    chain_url = "https://github.com/org/rb/blob/main/default.md"
    assert runbook_source(session(runbook=f" {BLOB} "), chain_url) == BLOB
    assert runbook_source(session(runbook="Read the logs."), chain_url) is None  # inline text
    assert runbook_source(session(), chain_url) == chain_url
    assert runbook_source(session(runbook="  "), chain_url) == chain_url
    assert runbook_source(session(), None) is None


def test_a_runbook_is_fetched_once_per_session() -> None:
    tried = session(runbook=BLOB, runbook_url=BLOB, runbook_error="HTTP 404 from github.com")
    assert runbook_source(tried, None) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (BLOB, RAW),
        (BLOB + "?plain=1#L10", RAW),
        (
            "https://www.github.com/o/r/blob/v1.2/a/b/c.md",
            "https://raw.githubusercontent.com/o/r/v1.2/a/b/c.md",
        ),
        ("https://github.com/o/r/tree/main/docs", "https://github.com/o/r/tree/main/docs"),
        ("https://github.com/o/r/blob/main", "https://github.com/o/r/blob/main"),
        (RAW, RAW),
        ("https://example.com/o/r/blob/main/x.md", "https://example.com/o/r/blob/main/x.md"),
    ],
)
def test_github_blob_pages_become_raw_files(url: str, expected: str) -> None:
    assert raw_url(url) == expected


def test_only_allowed_hosts_are_fetched() -> None:
    assert check_url(BLOB, GITHUB) == RAW
    assert check_url("https://RAW.githubusercontent.com/o/r/main/x.md", GITHUB).startswith(
        "https://"
    )
    assert check_url("http://127.0.0.1:8123/rb.md", ("127.0.0.1",)) == "http://127.0.0.1:8123/rb.md"
    for url, kind in [
        ("https://gist.github.com/o/1", "domain"),  # exact hosts: no subdomains
        ("https://github.com.evil.example/o/r/blob/main/x.md", "domain"),
        ("https://evil.example/?u=https://github.com/", "domain"),
        ("file:///etc/passwd", "invalid_url"),
        ("https://user:pw@github.com/o/r/blob/main/x.md", "invalid_url"),
        ("https://github.com:port/x", "invalid_url"),
    ]:
        with pytest.raises(RunbookError) as failure:
            check_url(url, GITHUB)
        assert failure.value.kind == kind, url


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        ("text/plain; charset=utf-8", "Étape 1".encode(), "Étape 1"),
        ("text/markdown", b"# Runbook", "# Runbook"),
        (None, b"plain", "plain"),
        ("text/plain; charset=latin-1", "caf\xe9".encode("latin-1"), "caf\xe9"),
        ("application/json", b'{"a": 1}', '{"a": 1}'),
    ],
)
def test_text_bodies_decode(content_type: str | None, body: bytes, text: str) -> None:
    assert decode_text(body, content_type) == text


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("image/png", b"\x89PNG"),
        ("application/octet-stream", b"x"),
        ("text/plain", b"\xff\xfe\x00bad"),
        ("text/plain", b"nul\x00byte"),
        ("text/plain; charset=no-such-charset", b"x"),
    ],
)
def test_other_bodies_are_not_text(content_type: str, body: bytes) -> None:
    with pytest.raises(RunbookError) as failure:
        decode_text(body, content_type)
    assert failure.value.kind == "not_text"


def test_the_fetch_gets_half_the_step_budget_at_most_thirty_seconds() -> None:
    assert fetch_timeout(486.0) == 30.0
    assert fetch_timeout(10.0) == 5.0
    assert fetch_timeout(0.5) == 1.0


def test_prompts_show_the_fetched_text_never_the_url() -> None:
    fetched = session(runbook=BLOB, runbook_url=BLOB, runbook_text="1. Read the previous logs.")
    failed = session(runbook=BLOB, runbook_url=BLOB, runbook_error="HTTP 404 from github.com")
    inline = session(runbook="Restart nothing.")
    assert prompt_runbook(fetched) == "1. Read the previous logs."
    assert prompt_runbook(failed) is None
    assert prompt_runbook(inline) == "Restart nothing."
    assert "1. Read the previous logs." in user_prompt(fetched)
    assert "RUNBOOK" not in user_prompt(failed) and BLOB not in user_prompt(failed)


# ─── the fetch, against httpx's mock transport ───────────────────────────────


Answer = httpx.Response | Exception


class Server:
    """A scripted HTTP server at the transport: records requests, answers by URL."""

    def __init__(self, routes: Mapping[str, Answer | Sequence[Answer]]) -> None:
        self.routes = routes
        self.served: dict[str, int] = {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes[str(request.url)]
        if isinstance(route, Sequence):
            answer = route[self.served.get(str(request.url), 0)]
            self.served[str(request.url)] = self.served.get(str(request.url), 0) + 1
        else:
            answer = route
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def settings(**env: object) -> Settings:
    return Settings.model_validate(env)


async def fetch(server: Server, url: str = BLOB, *, seconds: float = 5.0, **env: object) -> str:
    return await fetch_runbook(url, settings(**env), seconds=seconds, transport=server.transport)


async def failure(server: Server, url: str = BLOB, **env: object) -> RunbookError:
    with pytest.raises(RunbookError) as caught:
        await fetch_runbook(url, settings(**env), seconds=5.0, transport=server.transport)
    return caught.value


async def test_a_blob_url_is_fetched_as_its_raw_file() -> None:
    server = Server(
        {RAW: httpx.Response(200, text="1. Look.", headers={"content-type": "text/plain"})}
    )
    assert await fetch(server) == "1. Look."
    [request] = server.requests
    assert "authorization" not in request.headers


async def test_the_token_is_sent_as_bearer() -> None:
    server = Server({RAW: httpx.Response(200, text="private")})
    assert await fetch(server, TARSY_RUNBOOK_TOKEN="ghp_secret") == "private"
    assert server.requests[0].headers["authorization"] == "Bearer ghp_secret"


async def test_a_disallowed_host_is_never_requested() -> None:
    server = Server({})
    error = await failure(server, "https://evil.example/rb.md", TARSY_RUNBOOK_TOKEN="t")
    assert error.kind == "domain" and server.requests == []


async def test_redirects_are_followed_to_allowed_hosts_only() -> None:
    moved = "https://raw.githubusercontent.com/org/new/main/k8s/crashloop.md"
    server = Server(
        {
            RAW: httpx.Response(301, headers={"location": moved}),
            moved: httpx.Response(200, text="moved here"),
        }
    )
    assert await fetch(server) == "moved here"
    server = Server({RAW: httpx.Response(302, headers={"location": "https://evil.example/steal"})})
    error = await failure(server, TARSY_RUNBOOK_TOKEN="t")
    assert error.kind == "domain" and len(server.requests) == 1  # the token never left


async def test_http_errors_fail_and_only_transient_ones_are_retried() -> None:
    server = Server({RAW: httpx.Response(404)})
    error = await failure(server)
    assert (error.kind, error.status, len(server.requests)) == ("http", 404, 1)

    server = Server({RAW: [httpx.Response(503), httpx.Response(200, text="second time")]})
    assert await fetch(server) == "second time"

    server = Server({RAW: [httpx.Response(500) for _ in range(FETCH_ATTEMPTS)]})
    error = await failure(server)
    assert (error.kind, error.status, len(server.requests)) == ("http", 500, FETCH_ATTEMPTS)

    server = Server({RAW: [httpx.ConnectError("refused"), httpx.Response(200, text="up")]})
    assert await fetch(server) == "up"


async def test_a_runbook_over_the_cap_is_refused() -> None:
    body = b"x" * 2048
    server = Server({RAW: httpx.Response(200, content=body)})
    assert await fetch(server, TARSY_RUNBOOK_MAX_BYTES=2048) == "x" * 2048
    server = Server({RAW: httpx.Response(200, content=body)})
    assert (await failure(server, TARSY_RUNBOOK_MAX_BYTES=2047)).kind == "too_large"

    # No content-length: the body is read only up to the cap.
    class Endless(httpx.AsyncByteStream):
        def __init__(self) -> None:
            self.chunks = 0

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            while True:
                self.chunks += 1
                yield b"y" * 1024

    stream = Endless()
    server = Server({RAW: httpx.Response(200, stream=stream)})
    assert (await failure(server, TARSY_RUNBOOK_MAX_BYTES=4096)).kind == "too_large"
    assert stream.chunks <= 5


async def test_a_binary_body_is_not_used() -> None:
    server = Server(
        {RAW: httpx.Response(200, content=b"\x89PNG", headers={"content-type": "image/png"})}
    )
    assert (await failure(server)).kind == "not_text"


async def test_a_slow_host_times_out_within_the_deadline() -> None:
    class Slow(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await asyncio.Event().wait()  # never answers
            raise AssertionError  # pragma: no cover

    started = asyncio.get_running_loop().time()
    with pytest.raises(RunbookError) as caught:
        await fetch_runbook(BLOB, settings(), seconds=0.2, transport=Slow())
    assert caught.value.kind == "timeout"
    assert asyncio.get_running_loop().time() - started < 2.0


async def test_resolve_never_raises_and_masks_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fake_fetch(url: str, settings: Settings, *, seconds: float) -> str:
        assert url == BLOB and seconds == fetch_timeout(settings.step_budget_seconds)
        return "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789"

    monkeypatch.setattr("tarsy.tools.runbooks.fetch_runbook", fake_fetch)
    masking = MaskingConfig()
    fetched = await resolve_runbook(session(runbook=BLOB), None, settings(), masking)
    assert fetched is not None and fetched.url == BLOB and fetched.error is None
    assert fetched.text is not None and "ghp_abcdef" not in fetched.text

    async def broken(url: str, settings: Settings, *, seconds: float) -> str:
        raise RunbookError("http", "HTTP 404 from raw.githubusercontent.com", status=404)

    monkeypatch.setattr("tarsy.tools.runbooks.fetch_runbook", broken)
    failed = await resolve_runbook(session(runbook=BLOB), None, settings(), masking)
    assert failed is not None
    assert (failed.text, failed.error) == (None, "HTTP 404 from raw.githubusercontent.com")
    recorded = failed.on(session(runbook=BLOB))
    assert (recorded.runbook_url, recorded.runbook_error) == (BLOB, failed.error)
    assert await resolve_runbook(session(runbook="inline"), None, settings(), masking) is None


def test_allowed_domains_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TARSY_ALLOWED_RUNBOOK_DOMAINS", " GitHub.com, runbooks.internal ,")
    assert Settings().allowed_runbook_domains == ("github.com", "runbooks.internal")
    monkeypatch.delenv("TARSY_ALLOWED_RUNBOOK_DOMAINS")
    assert Settings().allowed_runbook_domains == GITHUB


def test_the_cli_says_whether_the_runbook_was_fetched() -> None:
    assert runbook_line({"runbook": "inline text"}) is None
    fetched = {"runbook_url": BLOB, "runbook_text": "abc"}
    assert runbook_line(fetched) == f"runbook: fetched from {BLOB} (3 characters)"
    failed = {"runbook_url": BLOB, "runbook_text": None, "runbook_error": "HTTP 404 from x"}
    line = runbook_line(failed)
    assert line is not None and "not fetched" in line and "HTTP 404 from x" in line


def test_a_chains_runbook_url_must_be_http() -> None:
    chain = (
        "agent_chains:\n  c:\n    alert_types: [c]\n    stages: [{name: s, agent: investigator}]\n"
    )
    good = load_config(Settings(), user_text=chain + f"    runbook_url: {BLOB}\n")
    assert good.chain("c").runbook_url == BLOB
    with pytest.raises(ConfigError) as failure:
        load_config(Settings(), user_text=chain + "    runbook_url: file:///etc/passwd\n")
    assert "runbook_url" in str(failure.value)

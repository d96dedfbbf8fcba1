"""Runbooks from URLs: which URL a session's runbook comes from, may it be fetched, the fetch.

An alert's ``runbook`` is text or an http(s) URL (Alertmanager's ``runbook_url``
annotation arrives as one); a chain may name a default ``runbook_url`` for
alerts that bring none. A URL is fetched **once per session, by the
``start_session`` step** (:func:`resolve_runbook`), not at ingest: ingest
answers in well under a second and makes no outbound calls. The outcome is
written on the session (``runbook_url``, ``runbook_text`` or
``runbook_error``) in the same batch that creates the first stage, so later
stages read it from Firestore and never fetch again; ``GET /sessions/{id}``
shows it, and ``tarsy watch`` / ``tarsy show`` print a line saying whether the
runbook was fetched or why not.

A fetch that cannot succeed never stops the investigation: a host outside
``allowed_runbook_domains``, an HTTP error, a body over ``runbook_max_bytes``,
a time-out (the fetch gets at most half of the step's budget, capped at
:data:`FETCH_TIMEOUT_CAP`) or a body that is not text all leave the session
without a runbook, saying why. GitHub ``blob`` pages are fetched as their raw
file; an optional token (``TARSY_RUNBOOK_TOKEN_SECRET``) is sent as a Bearer
token, to the allowed hosts only (redirects to other hosts are refused, so it
cannot leak through one).

Pure functions for the URL rules and the body; :func:`fetch_runbook` is the
thin I/O shell (httpx, retried with tenacity on dropped connections, 429 and 5xx).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

from tarsy._pydantic import DeferredModel
from tarsy.errors import ConfigError, RunbookError
from tarsy.models import Session
from tarsy.settings import Settings
from tarsy.tools.masking import Masker, MaskingConfig

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

GITHUB_HOSTS = frozenset({"github.com", "www.github.com"})
RAW_GITHUB_HOST = "raw.githubusercontent.com"
MAX_REDIRECTS = 3
FETCH_ATTEMPTS = 3
# A runbook host slower than this is failing; the step has better uses for its budget.
FETCH_TIMEOUT_CAP = 30.0
# Content types taken as text besides text/*; none at all is taken as text too.
TEXT_TYPES = frozenset(
    {"application/json", "application/yaml", "application/x-yaml", "application/markdown"}
)


# ─── which URL, and may it be fetched (pure) ──────────────────────────────────


def is_url(runbook: str | None) -> bool:
    """Whether an alert's ``runbook`` is a URL to fetch rather than the runbook's text."""
    if runbook is None:
        return False
    text = runbook.strip()
    return text.lower().startswith(("http://", "https://")) and not any(c.isspace() for c in text)


def runbook_source(session: Session, chain_runbook_url: str | None) -> str | None:
    """The URL to fetch for ``session``; None when there is nothing to fetch.

    The alert's own runbook wins, text or URL; its chain's ``runbook_url``
    applies only when the alert has none. A session whose runbook was fetched
    (or tried) already has nothing more to fetch.
    """
    if session.runbook_url is not None:
        return None
    if session.runbook and session.runbook.strip():
        return session.runbook.strip() if is_url(session.runbook) else None
    return chain_runbook_url


def raw_url(url: str) -> str:
    """A GitHub ``blob`` page as its raw file; any other URL unchanged.

    ``https://github.com/org/repo/blob/main/docs/rb.md`` becomes
    ``https://raw.githubusercontent.com/org/repo/main/docs/rb.md`` (query and
    fragment dropped: ``?plain=1`` and ``#L10`` mean nothing for the raw file).
    """
    parts = urlsplit(url)
    segments = parts.path.split("/")
    # ["", owner, repo, "blob", ref, *path]
    is_blob = (
        (parts.hostname or "").lower() in GITHUB_HOSTS
        and len(segments) >= 6
        and segments[3] == "blob"
        and all(segments[1:3])
    )
    if not is_blob:
        return url
    path = "/".join([*segments[1:3], *segments[4:]])
    return urlunsplit(("https", RAW_GITHUB_HOST, f"/{path}", "", ""))


def check_url(url: str, allowed: Sequence[str]) -> str:
    """The URL to request for runbook ``url``, if its host is allowed.

    Hosts match exactly, case-insensitively, ports aside (``docs.example.com``
    is not allowed by ``example.com``). A GitHub blob page on an allowed host is
    requested as its raw file.

    Raises:
        RunbookError: Not an http(s) URL, credentials in it, or a host not allowed.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        raise RunbookError("invalid_url", f"not a valid URL: {e}") from e
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise RunbookError("invalid_url", "only http and https URLs with a host are fetched")
    if parts.username is not None or parts.password is not None:
        raise RunbookError("invalid_url", "credentials in the URL are not sent; use the token")
    host = parts.hostname.lower()
    if host not in {h.lower() for h in allowed}:
        listed = ", ".join(allowed) or "none"
        raise RunbookError("domain", f"host {host!r} is not in allowed_runbook_domains ({listed})")
    return raw_url(url)


def redirect_target(current: str, location: str, allowed: Sequence[str]) -> str:
    """Where a redirect from ``current`` leads, if that host is allowed too (see check_url)."""
    return check_url(urljoin(current, location), allowed)


def decode_text(body: bytes, content_type: str | None) -> str:
    """The runbook's text from a response body.

    Raises:
        RunbookError: The content type is not text, or the bytes do not decode as
            its charset (UTF-8 unless it names another), or they hold NUL bytes.
    """
    media_type, _, params = (content_type or "").partition(";")
    media_type = media_type.strip().lower()
    if media_type and not media_type.startswith("text/") and media_type not in TEXT_TYPES:
        raise RunbookError("not_text", f"content type {media_type!r} is not text")
    charset = "utf-8"
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    try:
        text = body.decode(charset)
    except (LookupError, UnicodeDecodeError) as e:
        raise RunbookError("not_text", f"the body is not {charset} text: {e}") from e
    if "\x00" in text:
        raise RunbookError("not_text", "the body holds NUL bytes: not text")
    return text


def fetch_timeout(step_budget_seconds: float) -> float:
    """The whole fetch's deadline: half the step's budget (the stage start needs the rest)."""
    return max(1.0, min(FETCH_TIMEOUT_CAP, step_budget_seconds / 2))


class RunbookFetch(DeferredModel):
    """What fetching a session's runbook URL gave: its text, or why there is none."""

    url: str
    text: str | None = None
    error: str | None = None

    def on(self, session: Session) -> Session:
        """``session`` as it reads once this outcome is recorded on it."""
        return session.model_copy(
            update={"runbook_url": self.url, "runbook_text": self.text, "runbook_error": self.error}
        )


def prompt_runbook(session: Session) -> str | None:
    """The runbook the prompts show: the fetched text when a URL was fetched, else the alert's."""
    if session.runbook_url is not None:
        return session.runbook_text
    return session.runbook


# ─── the fetch (I/O) ──────────────────────────────────────────────────────────


def _token(settings: Settings) -> str | None:
    if settings.runbook_token is not None:
        return settings.runbook_token.get_secret_value()
    if settings.runbook_token_secret is None:
        return None
    from tarsy import secrets
    from tarsy.config.schema import SecretRef

    try:
        return secrets.resolve(SecretRef(secret=settings.runbook_token_secret), settings)
    except ConfigError as e:
        raise RunbookError("token", f"the runbook token cannot be read: {e}") from e


async def _get_once(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], settings: Settings
) -> str:
    """One GET, following redirects to allowed hosts, reading at most the size cap."""
    import httpx

    limit = settings.runbook_max_bytes
    for _ in range(MAX_REDIRECTS + 1):
        try:
            async with client.stream("GET", url, headers=headers) as response:
                location = response.headers.get("location")
                if response.is_redirect and location:
                    url = redirect_target(url, location, settings.allowed_runbook_domains)
                    continue
                host = urlsplit(url).hostname
                if response.status_code >= 400:
                    raise RunbookError(
                        "http",
                        f"HTTP {response.status_code} from {host}",
                        status=response.status_code,
                    )
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise RunbookError("too_large", f"{declared} bytes, over the {limit}-byte cap")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > limit:
                        raise RunbookError("too_large", f"over the {limit}-byte cap")
                return decode_text(bytes(body), response.headers.get("content-type"))
        except httpx.TimeoutException as e:
            raise RunbookError("timeout", f"no answer in time from {urlsplit(url).hostname}") from e
        except httpx.TransportError as e:
            message = f"cannot reach {urlsplit(url).hostname}: {type(e).__name__}"
            raise RunbookError("connection", message) from e
    raise RunbookError("http", f"more than {MAX_REDIRECTS} redirects")


async def fetch_runbook(
    url: str,
    settings: Settings,
    *,
    seconds: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> str:
    """Fetch a runbook's text, in at most ``seconds``, retries included.

    ``transport`` replaces the network (tests).

    Raises:
        RunbookError: Whatever kept the runbook from being fetched.
    """
    import httpx
    from tenacity import (
        AsyncRetrying,
        retry_if_exception,
        stop_after_attempt,
        wait_exponential_jitter,
    )

    target = check_url(url, settings.allowed_runbook_domains)
    headers = {"Accept": "text/plain, text/markdown;q=0.9, */*;q=0.1"}
    token = _token(settings)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    retrying = AsyncRetrying(
        stop=stop_after_attempt(FETCH_ATTEMPTS),
        wait=wait_exponential_jitter(initial=0.5, max=4.0),
        retry=retry_if_exception(lambda e: isinstance(e, RunbookError) and e.retryable),
        reraise=True,
    )
    try:
        async with (
            asyncio.timeout(seconds),
            httpx.AsyncClient(
                transport=transport, timeout=seconds, follow_redirects=False
            ) as client,
        ):
            async for attempt in retrying:
                with attempt:
                    return await _get_once(client, target, headers, settings)
    except TimeoutError as e:
        raise RunbookError("timeout", f"not fetched within {seconds:g}s") from e
    raise AssertionError("unreachable: the last attempt returns or raises")


async def resolve_runbook(
    session: Session, chain_runbook_url: str | None, settings: Settings, masking: MaskingConfig
) -> RunbookFetch | None:
    """Fetch the session's runbook URL, if it has one still to fetch; never raises for it.

    The text is masked like the alert (invariant 5: it reaches Firestore and the model).
    """
    url = runbook_source(session, chain_runbook_url)
    if url is None:
        return None
    try:
        text = await fetch_runbook(
            url, settings, seconds=fetch_timeout(settings.step_budget_seconds)
        )
    except RunbookError as e:
        logger.warning("runbook %s not fetched (%s): %s", url, e.kind, e)
        return RunbookFetch(url=url, error=str(e))
    return RunbookFetch(url=url, text=Masker(masking).mask(text).text)

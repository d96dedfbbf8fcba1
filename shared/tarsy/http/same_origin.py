"""No action from another site: the checks every state-changing request of a person passes.

Design constraint: people are signed in by Identity-Aware Proxy's cookie, which
a browser may attach to a request another site's page makes, so the cookie
alone proves nothing about intent (OWASP's CSRF guidance). A state-changing
request is therefore refused (403, before anything is read or written) unless:

* its body is ``application/json``: a page on another site cannot send that
  without a CORS preflight, which the api never answers; a form, ``text/plain``
  or no content type at all are what such a page can send;
* its ``Sec-Fetch-Site`` (sent by every current browser, unforgeable by a
  page) is absent, ``same-origin`` or ``none``: ``cross-site`` and
  ``same-site`` (a sibling subdomain is another party) are refused;
* its ``Origin``, when present, is the api's own: the origin of
  ``TARSY_PUBLIC_API_URL`` (where people open it, through the proxy) or the
  origin of the host the request was sent to (``Host``, or the
  ``X-Forwarded-Host`` a proxy in front sets: a page can set neither on
  another site's request). ``null`` (a sandboxed frame, a redirect) is not the
  api's.

Clients that are not browsers (the CLI, curl) send neither header and pass,
as long as they send JSON. Pure: headers in, an error or nothing out.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from tarsy.errors import InputError

JSON_TYPE = "application/json"
_REFUSED_FETCH_SITES = frozenset({"cross-site", "same-site"})


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url``, lower-case (None: not an absolute http(s) URL)."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def own_origins(headers: Mapping[str, str], public_api_url: str) -> frozenset[str]:
    """The origins a request to this api may come from: its public URL's and its host's."""
    origins: set[str] = set()
    if (public := origin_of(public_api_url)) is not None:
        origins.add(public)
    # The host the browser sent the request to: its own Host, or the one a proxy in
    # front passed on (a page cannot set X-Forwarded-Host on another site's request
    # without a preflight, which the api never answers).
    for name in ("host", "x-forwarded-host"):
        for host in headers.get(name, "").lower().split(","):
            if host := host.strip():
                # The scheme the browser used is not in the request; either is this host.
                origins.update({f"http://{host}", f"https://{host}"})
    return frozenset(origins)


def is_json(content_type: str) -> bool:
    """Whether a Content-Type is ``application/json`` (parameters such as charset aside)."""
    return content_type.split(";", 1)[0].strip().lower() == JSON_TYPE


def check_same_origin(headers: Mapping[str, str], public_api_url: str) -> None:
    """Refuse a state-changing request another site could have made (headers lower-case).

    Raises:
        InputError: 403, naming what gave it away.
    """
    fetch_site = headers.get("sec-fetch-site", "").strip().lower()
    if fetch_site in _REFUSED_FETCH_SITES:
        raise InputError(
            f"refused: the browser says this request came from another site "
            f"(Sec-Fetch-Site: {fetch_site}); act from tarsy's own pages",
            status=403,
        )
    origin = headers.get("origin")
    if origin is not None and origin.strip().lower() not in own_origins(headers, public_api_url):
        raise InputError(
            f"refused: a request from {origin.strip()!r} may not change anything here; "
            "act from tarsy's own pages",
            status=403,
        )
    if not is_json(headers.get("content-type", "")):
        raise InputError(
            f"refused: an action's body must be JSON (Content-Type: {JSON_TYPE}; "
            "send {} when it has no fields)",
            status=403,
        )

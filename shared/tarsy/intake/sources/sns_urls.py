"""Which URLs in an SNS message tarsy will ever contact.

An SNS message names two URLs the receiver is expected to fetch: the
``SigningCertURL`` (to verify the message) and, in a subscription
confirmation, the ``SubscribeURL`` (to confirm). Both come from the request
body, so before the signature is verified they are attacker-controlled: a
forged message could point the certificate at a key of the attacker's own, or
make tarsy request an internal address. So a URL is contacted only if:

* its scheme is ``https`` (the TLS server certificate is what ties the
  downloaded signing certificate to AWS);
* its whole host matches the configured pattern (by default SNS's regional
  endpoints, ``sns.<region>.amazonaws.com`` and ``.amazonaws.com.cn``; not
  merely any ``amazonaws.com`` host, which would include S3 buckets anyone
  can create);
* it has no user info and no port other than 443;
* for a certificate, its path ends in ``.pem``.

The URL is parsed by httpx, the same parser that will fetch it, so the check
and the request cannot disagree about the host.
"""

from __future__ import annotations

import re

import httpx

from tarsy.intake.sources.errors import SignatureError

_SUSPICIOUS = re.compile(r"[\s\\]")


class UntrustedUrlError(SignatureError):
    """A URL in an SNS message is not one tarsy will contact (401)."""


def host_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """Compile a host pattern once.

    Args:
        pattern: A regular expression or an already compiled one.

    Returns:
        The compiled pattern (matched against the whole host).
    """
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


def check_sns_url(
    url: str, pattern: str | re.Pattern[str], *, field: str, require_pem: bool = False
) -> httpx.URL:
    """Return ``url`` parsed, if tarsy may contact it.

    Args:
        url: The URL from the message.
        pattern: The allowed-host pattern (``alert_sources.sns.cert_host_pattern``).
        field: The message field it came from, for the error.
        require_pem: Whether the path must end in ``.pem`` (the signing certificate).

    Returns:
        The parsed URL, to be fetched as is.

    Raises:
        UntrustedUrlError: Any rule above is broken (401); nothing was fetched.
    """
    if _SUSPICIOUS.search(url):
        raise UntrustedUrlError(f"{field} contains whitespace or a backslash")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as e:
        raise UntrustedUrlError(f"{field} is not a URL: {e}") from e
    if parsed.scheme != "https":
        raise UntrustedUrlError(f"{field} must be an https URL")
    if parsed.userinfo:
        raise UntrustedUrlError(f"{field} must not carry user info")
    if parsed.port not in (None, 443):
        raise UntrustedUrlError(f"{field} must use the default https port")
    if not host_pattern(pattern).fullmatch(parsed.host):
        raise UntrustedUrlError(f"{field} host {parsed.host!r} is not an allowed SNS host")
    if require_pem and not parsed.path.endswith(".pem"):
        raise UntrustedUrlError(f"{field} must name a .pem certificate")
    return parsed

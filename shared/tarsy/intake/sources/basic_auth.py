"""The API key as each sender can present it, HTTP basic auth included.

``POST /alerts`` takes the key as ``Authorization: Bearer <key>`` or
``X-API-Key``. Several alert senders can only do basic auth: Alertmanager's
``basic_auth``, Grafana's contact point, and above all AWS SNS and PagerDuty,
which take credentials solely inside the subscription URL
(``https://user:key@host/alerts/sns``). So on the source routes the key may
also arrive as the basic-auth *password*; the user name is free (senders
insist on one, tarsy ignores it).

SNS sends those URL credentials only after the endpoint answered ``401`` with
a ``WWW-Authenticate: Basic`` challenge, so a missing key raises
:class:`~tarsy.intake.sources.errors.BasicAuthRequired`, whose ``challenge`` the
route must send back.

Keys are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from pydantic import ConfigDict, SecretStr

from tarsy._pydantic import DeferredModel
from tarsy.intake.sources.errors import BasicAuthRequired, CredentialsError


class BasicCredentials(DeferredModel):
    """Decoded ``Authorization: Basic`` credentials."""

    model_config = ConfigDict(frozen=True)

    username: str
    password: SecretStr


def parse_basic_auth(authorization: str | None) -> BasicCredentials | None:
    """Decode an ``Authorization`` header if it uses the Basic scheme (RFC 7617).

    Args:
        authorization: The header value, or ``None``.

    Returns:
        The credentials, or ``None`` when the header is absent or another scheme.

    Raises:
        CredentialsError: The Basic credentials are not base64 of UTF-8
            ``user:password`` (401).
    """
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as e:  # UnicodeDecodeError is a ValueError
        raise CredentialsError("malformed basic auth: not base64 of UTF-8 text") from e
    username, sep, password = decoded.partition(":")
    if not sep:
        raise CredentialsError("malformed basic auth: no ':' between user name and password")
    return BasicCredentials(username=username, password=SecretStr(password))


def presented_key(headers: Mapping[str, str]) -> str | None:
    """Return the API key a request presents, however it presents it.

    In order: ``Authorization: Bearer <key>``, ``Authorization: Basic`` (the
    password, any user name), ``X-API-Key``.

    Args:
        headers: Request headers, names lower-case.

    Returns:
        The key, or ``None`` if the request carries none (an empty one counts as none).

    Raises:
        CredentialsError: Malformed Basic credentials (401).
    """
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    credentials = parse_basic_auth(authorization)
    if credentials is not None and credentials.password.get_secret_value():
        return credentials.password.get_secret_value()
    key = headers.get("x-api-key", "").strip()
    return key or None


def check_key(headers: Mapping[str, str], expected: str | SecretStr) -> None:
    """Accept the request only if it presents the expected API key.

    Args:
        headers: Request headers, names lower-case.
        expected: The configured key.

    Raises:
        BasicAuthRequired: No key at all (401, with a Basic challenge).
        CredentialsError: A malformed or wrong key (401).
    """
    key = presented_key(headers)
    if key is None:
        raise BasicAuthRequired(
            "missing API key: send it as the basic-auth password, "
            "'Authorization: Bearer <key>' or 'X-API-Key'"
        )
    wanted = expected.get_secret_value() if isinstance(expected, SecretStr) else expected
    if not hmac.compare_digest(key.encode(), wanted.encode()):
        raise CredentialsError("invalid API key")

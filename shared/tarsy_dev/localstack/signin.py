"""Local sign-in: what Identity-Aware Proxy does in the cloud, on loopback, with a local key.

Design constraint: the api verifies people exactly as deployed (see
:mod:`tarsy.access.iap`), so locally something must play the proxy's part. The
stack makes an ES256 key (``state_dir/signin-key.pem``, mode 0600) and runs one
process that serves its public key at ``/_signin/public_key`` in the format
google-auth reads (the functions' ``TARSY_IAP_CERTS_URL``) and forwards every
other request to the api function with a freshly signed
``x-goog-iap-jwt-assertion`` for one named local user, dropping any assertion
the caller sent (as the proxy does). A browser opens the pages through it and
is signed in; the CLI signs its own requests with the same key as the user it
is told to be (``tarsy --user EMAIL``). Signing uses google-auth's ES256 signer
and ``jwt.encode``; nothing here is deployed.

Programmatic access, as IAP has it: a request carrying ``Authorization: Bearer``
(or ``Proxy-Authorization``) with an OIDC identity token is let through only if
the token verifies as IAP verifies Google's (signature, ``aud`` = IAP's OAuth
client id, ``exp``, ``iss`` = accounts.google.com); it is then forwarded with an
assertion for the token's e-mail, else refused with 401 and not forwarded. No
cookie-less fallback to the signed-in user: a bad token is a refusal. The
proxy's own key stands in for Google's, and ``/_signin/token`` stands in for
Google's token endpoint: google-auth's ``fetch_id_token`` with a service-account
file whose ``token_uri`` points there (:func:`write_service_account`) gets an
identity token from it, through the same JWT-bearer grant it sends to Google.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.auth import jwt as google_jwt
from google.auth.crypt import es256

from tarsy.access.iap import ASSERTION_HEADER, IAP_ISSUER

logger = logging.getLogger(__name__)

KEYS_PATH = "/_signin/public_key"
TOKEN_PATH = "/_signin/token"  # stands in for Google's OAuth token endpoint
# What IAP checks an identity token against: its OAuth client id as the audience.
LOCAL_CLIENT_ID = "tarsy-local-iap.apps.googleusercontent.com"
OIDC_ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})
# The audience google-auth gives the grant it sends to a token endpoint, whatever its URL.
GRANT_AUDIENCE = "https://oauth2.googleapis.com/token"
_JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN_LIFETIME_S = 3600  # as Google's
KEY_FILE = "signin-key.pem"
LOCAL_AUDIENCE = "/projects/0/apps/tarsy-local"
DEFAULT_USER = "you@tarsy.local"
LIFETIME_S = 600  # as the proxy's assertions
# Not forwarded either way: they describe one connection, not the request.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
     "proxy-authorization", "proxy-authenticate", "host", "content-length",
     "content-encoding"}
)  # fmt: skip


def new_key() -> bytes:
    """A fresh P-256 private key, PEM (PKCS#8)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def key_id(private_pem: bytes) -> str:
    """A stable id for a key: the first 16 hex digits of its public point."""
    import hashlib

    public = (
        _private(private_pem)
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    return hashlib.sha256(public).hexdigest()[:16]


def _private(private_pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(private_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the sign-in key is not an elliptic-curve key")
    return key


def public_keys(private_pem: bytes) -> dict[str, str]:
    """``{key id: public key PEM}``, the document google-auth verifies against."""
    public = (
        _private(private_pem)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return {key_id(private_pem): public.decode()}


def write_key(path: Path) -> bytes:
    """Make a key at ``path`` (readable by this user only) unless one is there; return it."""
    if path.exists():
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = new_key()
    path.touch(mode=0o600)
    path.write_bytes(pem)
    return pem


def assertion(
    private_pem: bytes,
    email: str,
    *,
    audience: str = LOCAL_AUDIENCE,
    issued_at: float | None = None,
    lifetime_s: int = LIFETIME_S,
) -> str:
    """An assertion as the proxy signs it, for ``email``.

    Args:
        private_pem: The signing key.
        email: Who it says is asking.
        audience: The ``aud`` claim.
        issued_at: ``iat`` (seconds since the epoch; default now).
        lifetime_s: From ``iat`` to ``exp``.

    Returns:
        The compact JWT.
    """
    now = time.time() if issued_at is None else issued_at
    signer = es256.ES256Signer.from_string(private_pem, key_id=key_id(private_pem))
    payload = {
        "iss": IAP_ISSUER,
        "aud": audience,
        "sub": f"accounts.google.com:{email}",
        "email": email,
        "iat": int(now),
        "exp": int(now) + lifetime_s,
    }
    token: bytes = google_jwt.encode(signer, payload)  # type: ignore[no-untyped-call]
    return token.decode()


class TokenRefused(ValueError):
    """A bearer token or grant the proxy refuses, as IAP (or Google's token endpoint) would."""


def id_token(
    private_pem: bytes,
    email: str,
    *,
    audience: str,
    issued_at: float | None = None,
    lifetime_s: int = ID_TOKEN_LIFETIME_S,
) -> str:
    """An OIDC identity token for ``email``, as Google issues one, signed with ``private_pem``.

    Args:
        private_pem: The key that stands in for Google's.
        email: Whose token it is.
        audience: The ``aud`` claim (IAP's OAuth client id).
        issued_at: ``iat`` (seconds since the epoch; default now).
        lifetime_s: From ``iat`` to ``exp``.

    Returns:
        The compact JWT.
    """
    now = int(time.time() if issued_at is None else issued_at)
    signer = es256.ES256Signer.from_string(private_pem, key_id=key_id(private_pem))
    payload = {
        "iss": "https://accounts.google.com",
        "aud": audience,
        "azp": email,
        "sub": email,
        "email": email,
        "email_verified": True,
        "iat": now,
        "exp": now + lifetime_s,
    }
    token: bytes = google_jwt.encode(signer, payload)  # type: ignore[no-untyped-call]
    return token.decode()


def verify_id_token(private_pem: bytes, token: str, client_id: str) -> str:
    """The e-mail of a valid identity token for ``client_id``, checked as IAP checks one.

    Signature (by the key standing in for Google's), ``aud``, ``iat``/``exp`` (google-auth's
    checks, with its clock skew) and ``iss``; the token must name a verified e-mail.

    Raises:
        TokenRefused: The token fails any check.
    """
    try:
        claims: dict[str, object] = google_jwt.decode(  # type: ignore[no-untyped-call]
            token, certs=public_keys(private_pem), audience=client_id
        )
    except ValueError as e:  # google-auth's MalformedError and InvalidValue are ValueErrors
        raise TokenRefused(f"invalid identity token: {e}") from e
    if claims.get("iss") not in OIDC_ISSUERS:
        raise TokenRefused(f"identity token issuer {claims.get('iss')!r} is not Google's")
    email = claims.get("email")
    if not isinstance(email, str) or not email or claims.get("email_verified") is False:
        raise TokenRefused("identity token names no verified e-mail")
    return email


def bearer_token(headers: dict[str, str]) -> str | None:
    """The token of an ``Authorization`` or ``Proxy-Authorization: Bearer`` header, if any."""
    for name in ("authorization", "proxy-authorization"):
        value = headers.get(name, "")
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def write_service_account(path: Path, email: str, token_uri: str) -> dict[str, str]:
    """Write a local service-account key file (mode 0600) whose grants go to ``token_uri``.

    google-auth's ``fetch_id_token`` reads it through ``GOOGLE_APPLICATION_CREDENTIALS``
    exactly as a key file from Google; only ``token_uri`` differs (the proxy's).
    """
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "tarsy-local",
        "private_key_id": key_id_of_rsa(key),
        "private_key": pem,
        "client_email": email,
        "client_id": "0",
        "token_uri": token_uri,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps(info), encoding="utf-8")
    return info


def key_id_of_rsa(key: rsa.RSAPrivateKey) -> str:
    """A stable id for a service account's key: 16 hex digits of its public key."""
    import hashlib

    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()[:16]


def service_account_keys(info: dict[str, str]) -> dict[str, str]:
    """``{key id: public key PEM}`` of a service-account key file, to verify its grants."""
    key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("a service account key is an RSA key")
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {info["private_key_id"]: public.decode()}


def grant_id_token(
    private_pem: bytes, form: dict[str, str], accounts: dict[str, dict[str, str]]
) -> str:
    """The identity token a JWT-bearer grant earns, as Google's token endpoint issues it.

    Args:
        private_pem: The key standing in for Google's.
        form: The grant (``grant_type``, ``assertion``).
        accounts: The trusted service accounts: ``{email: {key id: public key PEM}}``.

    Raises:
        TokenRefused: Not a JWT-bearer grant, an unknown account, or a grant that fails
            verification (signature, audience, expiry), or one that names no audience.
    """
    if form.get("grant_type") != _JWT_BEARER or not form.get("assertion"):
        raise TokenRefused("not a JWT-bearer grant")
    grant = form["assertion"]
    try:
        unverified = google_jwt.decode(grant, verify=False)  # type: ignore[no-untyped-call]
        email = str(unverified.get("iss", ""))
        if email not in accounts:
            raise TokenRefused(f"unknown service account {email!r}")
        claims = google_jwt.decode(  # type: ignore[no-untyped-call]
            grant, certs=accounts[email], audience=GRANT_AUDIENCE
        )
    except TokenRefused:
        raise
    except ValueError as e:
        raise TokenRefused(f"invalid grant: {e}") from e
    audience = claims.get("target_audience")
    if not isinstance(audience, str) or not audience:
        raise TokenRefused("the grant names no target_audience")
    return id_token(private_pem, email, audience=audience)


_IDEMPOTENT = frozenset({"GET", "HEAD"})


class SignInProxy(ThreadingHTTPServer):
    """The proxy: serve with ``serve_forever()`` (a thread in tests, a process in the stack)."""

    daemon_threads = True

    def __init__(
        self,
        port: int,
        upstream: str,
        private_pem: bytes,
        user: str,
        audience: str = LOCAL_AUDIENCE,
        *,
        client_id: str = LOCAL_CLIENT_ID,
        service_accounts: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.upstream = upstream.rstrip("/")
        self.private_pem = private_pem
        self.user = user
        self.audience = audience
        self.client_id = client_id
        self.accounts = {
            info["client_email"]: service_account_keys(info) for info in service_accounts or []
        }
        self.keys = json.dumps(public_keys(private_pem)).encode()
        self.http = httpx.Client(timeout=120.0)


class _Handler(BaseHTTPRequestHandler):
    server: SignInProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        logger.info("%s %s", self.address_string(), format % args)

    def _answer(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _token(self, body: bytes) -> None:
        """Google's token endpoint, locally: a service account's grant for an identity token."""
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
        try:
            token = grant_id_token(self.server.private_pem, form, self.server.accounts)
        except TokenRefused as e:
            logger.warning("token grant refused: %s", e)
            error = {"error": "invalid_grant", "error_description": str(e)}
            self._answer(400, json.dumps(error).encode(), [("Content-Type", "application/json")])
            return
        self._answer(200, json.dumps({"id_token": token}).encode(),
                     [("Content-Type", "application/json")])  # fmt: skip

    def _identity(self) -> str | None:
        """Who the request is from: a bearer token's verified e-mail, else the signed-in user.

        None: the request carried a bearer token that IAP would refuse (answered 401 here).
        """
        token = bearer_token({name.lower(): value for name, value in self.headers.items()})
        if token is None:
            return self.server.user
        try:
            return verify_id_token(self.server.private_pem, token, self.server.client_id)
        except TokenRefused as e:
            logger.warning("%s %s: bearer token refused: %s", self.command, self.path, e)
            self._answer(401, f"Invalid IAP credentials: {e}".encode(),
                         [("Content-Type", "text/plain")])  # fmt: skip
            return None

    def _forward(self) -> None:
        if self.path == KEYS_PATH:
            self._answer(200, self.server.keys, [("Content-Type", "application/json")])
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == TOKEN_PATH and self.command == "POST":
            self._token(body)
            return
        email = self._identity()
        if email is None:
            return
        # The bearer token was for the proxy; the api gets the proxy's assertion only.
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() not in _HOP_BY_HOP
            and name.lower() not in (ASSERTION_HEADER, "x-forwarded-host", "authorization")
        }
        # The host the browser asked for (the api sees the proxy's upstream as Host): a
        # page opened at localhost rather than 127.0.0.1 is still the api's own origin.
        if host := self.headers.get("Host"):
            headers["X-Forwarded-Host"] = host
        headers[ASSERTION_HEADER] = assertion(
            self.server.private_pem, email, audience=self.server.audience
        )
        try:
            response = self._send(headers, body)
        except httpx.HTTPError as e:
            logger.warning("%s %s: the api is not answering: %r", self.command, self.path, e)
            self._answer(502, f"the api is not answering: {e}".encode(),
                         [("Content-Type", "text/plain")])  # fmt: skip
            return
        kept = [(n, v) for n, v in response.headers.items() if n.lower() not in _HOP_BY_HOP]
        self._answer(response.status_code, response.content, kept)

    def _send(self, headers: dict[str, str], body: bytes) -> httpx.Response:
        """Forward the request; a GET or HEAD the api dropped unanswered is sent once more.

        The api's server may close an idle kept-alive connection just as the proxy
        sends on it, and the request then fails with no answer. A browser sends an
        idempotent request again, and so does the proxy; a POST is never sent twice.
        """

        def send() -> httpx.Response:
            return self.server.http.request(
                self.command, self.server.upstream + self.path, headers=headers, content=body
            )

        try:
            return send()
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as e:
            if self.command not in _IDEMPOTENT:
                raise
            logger.info("%s %s: sent again (%r)", self.command, self.path, e)
            return send()

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _forward


def main(argv: list[str] | None = None) -> None:
    """Serve the sign-in proxy until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the api function's URL")
    parser.add_argument("--key", type=Path, required=True, help="the signing key (PEM)")
    parser.add_argument("--user", default=DEFAULT_USER, help="who the browser is signed in as")
    parser.add_argument("--audience", default=LOCAL_AUDIENCE)
    parser.add_argument(
        "--client-id", default=LOCAL_CLIENT_ID, help="IAP's OAuth client id: bearer tokens' aud"
    )
    parser.add_argument(
        "--service-account",
        type=Path,
        action="append",
        default=[],
        help="a key file (write_service_account) whose grants /_signin/token honours",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    accounts = [json.loads(path.read_text(encoding="utf-8")) for path in args.service_account]
    server = SignInProxy(
        args.port,
        args.upstream,
        args.key.read_bytes(),
        args.user,
        args.audience,
        client_id=args.client_id,
        service_accounts=accounts,
    )
    logger.info("signing in as %s, forwarding to %s", args.user, args.upstream)
    server.serve_forever()


if __name__ == "__main__":
    main()

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
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.auth import jwt as google_jwt
from google.auth.crypt import es256

from tarsy.access.iap import ASSERTION_HEADER, IAP_ISSUER

logger = logging.getLogger(__name__)

KEYS_PATH = "/_signin/public_key"
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


_IDEMPOTENT = frozenset({"GET", "HEAD"})


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, private_pem: bytes, user: str,
                 audience: str) -> None:  # fmt: skip
        super().__init__(("127.0.0.1", port), _Handler)
        self.upstream = upstream.rstrip("/")
        self.private_pem = private_pem
        self.user = user
        self.audience = audience
        self.keys = json.dumps(public_keys(private_pem)).encode()
        self.http = httpx.Client(timeout=120.0)


class _Handler(BaseHTTPRequestHandler):
    server: _Proxy
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

    def _forward(self) -> None:
        if self.path == KEYS_PATH:
            self._answer(200, self.server.keys, [("Content-Type", "application/json")])
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() not in _HOP_BY_HOP
            and name.lower() not in (ASSERTION_HEADER, "x-forwarded-host")
        }
        # The host the browser asked for (the api sees the proxy's upstream as Host): a
        # page opened at localhost rather than 127.0.0.1 is still the api's own origin.
        if host := self.headers.get("Host"):
            headers["X-Forwarded-Host"] = host
        headers[ASSERTION_HEADER] = assertion(
            self.server.private_pem, self.server.user, audience=self.server.audience
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    server = _Proxy(args.port, args.upstream, args.key.read_bytes(), args.user, args.audience)
    logger.info("signing in as %s, forwarding to %s", args.user, args.upstream)
    server.serve_forever()


if __name__ == "__main__":
    main()

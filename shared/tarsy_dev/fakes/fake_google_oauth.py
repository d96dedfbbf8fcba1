"""A loopback stand-in for Google's OAuth 2.0 token endpoint, and a service account that uses it.

Design constraint: Vertex AI is reached with the process's Google credentials
(Application Default Credentials), never an API key, so a test of the
``vertexai`` type must run google-auth's real service-account flow: sign a JWT
with the account's private key and trade it for an access token at the
account's ``token_uri``. This fake is that ``token_uri`` on 127.0.0.1, and
:func:`write_service_account` writes a key file (a fresh RSA key) that names
it; point ``GOOGLE_APPLICATION_CREDENTIALS`` at the file. The fake checks the
grant's signature against the account's public key, so a token is only given
to the real flow.
"""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import jwt

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# google-auth addresses a service account's grant to Google's token endpoint, whatever
# the key file's token_uri (where it is sent).
AUDIENCES = ["https://oauth2.googleapis.com/token"]


class FakeGoogleOAuth:
    """``POST /token``: a signed JWT-bearer grant in, a short-lived access token out."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.tokens: list[str] = []  # every access token handed out, in order
        self.claims: list[dict[str, Any]] = []  # the verified claims of every grant
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def token_uri(self) -> str:
        """The account's ``token_uri``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/token"

    def private_key_pem(self) -> str:
        """The service account's private key, as its key file holds it."""
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def grant(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        """The token response to one form-encoded grant (status, JSON body)."""
        if form.get("grant_type") != [JWT_BEARER] or not form.get("assertion"):
            return 400, {"error": "unsupported_grant_type"}
        public = self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        try:
            # google-auth ships no types for jwt.decode.
            claims = jwt.decode(form["assertion"][0], certs=public, audience=AUDIENCES)  # type: ignore[no-untyped-call]
        except ValueError as e:  # a bad signature, audience or expiry
            return 400, {"error": "invalid_grant", "error_description": str(e)}
        token = f"ya29.fake-{secrets.token_hex(8)}"
        self.claims.append(claims)
        self.tokens.append(token)
        return 200, {"access_token": token, "expires_in": 3600, "token_type": "Bearer"}

    def start(self) -> Self:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def write_service_account(oauth: FakeGoogleOAuth, path: Path, project: str) -> Path:
    """A service-account key file whose ``token_uri`` is ``oauth``; returns ``path``."""
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": project,
                "private_key_id": secrets.token_hex(20),
                "private_key": oauth.private_key_pem(),
                "client_email": f"tarsy-test@{project}.iam.gserviceaccount.com",
                "client_id": "100000000000000000000",
                "token_uri": oauth.token_uri,
            }
        )
    )
    return path


def _handler_for(oauth: FakeGoogleOAuth) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            status, body = (
                oauth.grant(form) if self.path == "/token" else (404, {"error": "not_found"})
            )
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    return Handler

"""A loopback fake of the PagerDuty REST API v2 incident notes, for the client's ``base_url``.

``POST /incidents/{id}/notes`` adds a note (answered 201 with the note, as
PagerDuty does) and ``GET /incidents/{id}/notes`` lists an incident's notes,
oldest first. As PagerDuty: the key is ``Authorization: Token token=KEY`` (else
401), a POST without a ``From`` header is refused 400, an unknown incident is
404. Either method can be made to fail with an HTTP status, before or after it
took effect (``Failure.after``: the note is added, the answer is lost). The
real ``pagerduty.RestApiV2Client`` talks to it over HTTPS on 127.0.0.1 (the
client takes nothing but an https base URL): the fake's certificate is made
for the run, and :attr:`FakePagerDuty.ca_file` is what a client must trust
(``SSL_CERT_FILE``, which the client's transport reads).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.json_handler import JsonHandler, serving

NOTES_PATH = re.compile(r"^/incidents/(?P<incident>[A-Za-z0-9]+)/notes/?$")
Method = Literal["GET", "POST"]


@dataclass
class Failure:
    """How one method fails: an HTTP status, before or after it took effect."""

    status: int = 500
    after: bool = False


@dataclass
class FakePagerDuty:
    """What the fake serves and what it was sent."""

    port: int = 0
    ca_file: str = ""
    token: str = "u+pd-test-key"
    incidents: set[str] = field(default_factory=lambda: {"Q1INCIDENT"})
    notes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failures: dict[Method, Failure] = field(default_factory=dict)
    froms: list[str] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    unauthorized: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """What the client's ``base_url`` must be (it appends the path)."""
        return f"https://127.0.0.1:{self.port}"

    def notes_of(self, incident: str) -> list[dict[str, Any]]:
        """A copy of the notes an incident holds."""
        with self.lock:
            return list(self.notes.get(incident, []))


class _Handler(JsonHandler):
    state: FakePagerDuty

    def _error(self, status: int, message: str) -> None:
        self._answer(status, {"error": {"message": message, "code": 2000 + status}})

    def _serve(self, method: Method) -> None:
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        with self.state.lock:
            self.state.requests.append((method, path))
        if self.headers.get("Authorization") != f"Token token={self.state.token}":
            with self.state.lock:
                self.state.unauthorized += 1
            self._error(401, "Unauthorized")
            return
        match = NOTES_PATH.match(path)
        if match is None:
            self._error(404, "Not Found")
            return
        incident = match["incident"]
        if incident not in self.state.incidents:
            self._error(404, "Incident Not Found")
            return
        failure = self.state.failures.get(method)
        if failure is not None and not failure.after:
            self._error(failure.status, "Failure")
            return
        if method == "GET":
            answer: tuple[int, dict[str, Any]] = (200, {"notes": self.state.notes_of(incident)})
        else:
            sender = self.headers.get("From")
            if not sender:
                self._error(400, "From header required")
                return
            try:
                content = json.loads(raw)["note"]["content"]
            except (ValueError, KeyError, TypeError):
                self._error(400, "Invalid Input Provided")
                return
            with self.state.lock:
                self.state.froms.append(sender)
                notes = self.state.notes.setdefault(incident, [])
                note = {
                    "id": f"PNOTE{len(notes) + 1:04d}",
                    "user": {"type": "user_reference", "summary": sender},
                    "channel": {"summary": "The PagerDuty REST API"},
                    "content": content,
                    "created_at": "2026-11-28T00:00:00Z",
                }
                notes.append(note)
            answer = (201, {"note": note})
        if failure is not None and failure.after:
            self._error(failure.status, "Failure")
            return
        self._answer(*answer)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


def _handler(state: FakePagerDuty) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"state": state})


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, written into ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake PagerDuty")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextmanager
def fake_pagerduty() -> Iterator[FakePagerDuty]:
    """Serve a :class:`FakePagerDuty` on 127.0.0.1 (HTTPS) in a thread for the block."""
    state = FakePagerDuty()
    directory = tempfile.TemporaryDirectory(prefix="fake-pagerduty-")
    cert_path, key_path = _certificate(Path(directory.name))
    state.ca_file = str(cert_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    try:
        with serving(server) as port:
            state.port = port
            yield state
    finally:
        directory.cleanup()

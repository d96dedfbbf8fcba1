"""Signed-in requests for unit tests: a local key, its public keys served on loopback.

The api's verification (tarsy.access.iap) runs whole: google-auth fetches the
keys over HTTP from the loopback server and checks each assertion, as it does
against Identity-Aware Proxy's keys when deployed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tarsy.access.iap import ASSERTION_HEADER
from tarsy.settings import Settings
from tarsy_dev.localstack.signin import LOCAL_AUDIENCE, assertion, new_key, public_keys
from tests.unit.sources.loopback import loopback_server

ADMIN = "ada.admin@example.com"
RESPONDER = "rita.responder@example.com"
VIEWER = "victor.viewer@example.com"
NOBODY = "nora.nobody@elsewhere.example"
GRANTS = {
    "admin": [f"user:{ADMIN}"],
    "responder": [f"user:{RESPONDER}"],
    "viewer": [f"user:{VIEWER}", "domain:viewers.example.com"],
}
KEYS_PATH = "/keys"


@dataclass(frozen=True)
class SignIn:
    """A signing key whose public keys a loopback server publishes."""

    key: bytes
    certs_url: str

    def settings(self, **more: object) -> Settings:
        """Settings that verify this key's assertions and grant :data:`GRANTS`."""
        return Settings(
            TARSY_IAP_AUDIENCE=LOCAL_AUDIENCE,
            TARSY_IAP_CERTS_URL=self.certs_url,
            TARSY_ACCESS_GRANTS=json.dumps(GRANTS),
            **more,
        )

    def headers(self, email: str = ADMIN, **claims: object) -> dict[str, str]:
        """The header of a request signed in as ``email``."""
        return {ASSERTION_HEADER: assertion(self.key, email, **claims)}  # type: ignore[arg-type]


@contextmanager
def signin_server() -> Iterator[SignIn]:
    """A fresh key, its public keys served on loopback for the duration of the block."""
    key = new_key()
    with loopback_server() as server:
        server.routes[KEYS_PATH] = (200, json.dumps(public_keys(key)).encode())
        yield SignIn(key=key, certs_url=f"http://127.0.0.1:{server.port}{KEYS_PATH}")

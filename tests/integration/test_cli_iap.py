"""The real CLI through IAP's programmatic access, on the local sign-in proxy (issue 42, point 5).

With ``TARSY_IAP_AUDIENCE`` set, ``tarsy`` gets an identity token with google-auth
(a service account's key file whose ``token_uri`` is the proxy's stand-in for
Google's token endpoint) and sends it as ``Authorization: Bearer``; the proxy
verifies it as IAP would and forwards the request signed as the token's e-mail.
A forged, expired or wrong-audience token is refused before the api sees it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tarsy_dev import cli
from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.processes import free_port
from tarsy_dev.localstack.signin import (
    TOKEN_PATH,
    SignInProxy,
    id_token,
    new_key,
    write_service_account,
)
from tarsy_dev.localstack.stack import Stack

from .conftest import RESPONDER

CLIENT_ID = "1234-tarsy-iap.apps.googleusercontent.com"
OTHER_APP = "5678-another-app.apps.googleusercontent.com"
NOBODY = "ci-robot@tarsy-local.iam.gserviceaccount.com"  # granted no role


class Iap:
    """A sign-in proxy in front of the stack's api that takes identity tokens for CLIENT_ID."""

    def __init__(self, stack: Stack, accounts: dict[str, Path]) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        infos = [
            write_service_account(path, email, self.url + TOKEN_PATH)
            for email, path in accounts.items()
        ]
        self.key_files = accounts
        self.server = SignInProxy(
            port,
            stack.api_url,
            stack.signin_key_pem,  # the api trusts what this key signs, as the stack's proxy
            stack.user,
            client_id=CLIENT_ID,
            service_accounts=infos,
        )
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def iap(stack: Stack, tmp_path: Path) -> Iterator[Iap]:
    proxy = Iap(stack, {RESPONDER: tmp_path / "responder.json", NOBODY: tmp_path / "nobody.json"})
    yield proxy
    proxy.close()


def through_iap(monkeypatch: pytest.MonkeyPatch, iap: Iap, key_file: Path | None) -> None:
    """The environment of a person running ``tarsy`` against a deployed api behind IAP."""
    monkeypatch.setenv("TARSY_API_URL", iap.url)
    monkeypatch.setenv("TARSY_IAP_AUDIENCE", CLIENT_ID)
    for name in ("TARSY_SIGNIN_KEY", "TARSY_USER", "TARSY_API_KEY", "TARSY_IAP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    if key_file is None:
        monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    else:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))


def finished_session(client: TarsyClient) -> str:
    session_id = client.submit({"alert_type": "generic", "data": "error rate 31%"}).session_id
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=60)
    assert last.status.is_terminal, last.status
    return session_id


def test_the_cli_reaches_the_api_with_a_google_auth_identity_token(
    stack: Stack,
    client: TarsyClient,
    iap: Iap,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session_id = finished_session(client)
    through_iap(monkeypatch, iap, iap.key_files[RESPONDER])

    assert cli.main(["show", session_id]) == cli.EXIT_OK
    assert session_id in capsys.readouterr().out
    assert cli.main(["list", "--json"]) == cli.EXIT_OK
    assert session_id in capsys.readouterr().out


def test_the_api_sees_the_token_s_person_not_the_proxy_s_signed_in_user(
    stack: Stack,
    client: TarsyClient,
    iap: Iap,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session_id = finished_session(client)
    through_iap(monkeypatch, iap, iap.key_files[NOBODY])

    assert cli.main(["show", session_id]) == cli.EXIT_ERROR
    assert "403" in capsys.readouterr().err  # a valid token, for someone with no role


def bad_token(kind: str, stack: Stack) -> str:
    """A token IAP refuses: signed by another key, two hours old, or for another app."""
    match kind:
        case "forged":
            return id_token(new_key(), RESPONDER, audience=CLIENT_ID)
        case "expired":
            two_hours_ago = time.time() - 2 * 3600
            return id_token(stack.signin_key_pem, RESPONDER, audience=CLIENT_ID,
                            issued_at=two_hours_ago)  # fmt: skip
        case _:
            return id_token(stack.signin_key_pem, RESPONDER, audience=OTHER_APP)


@pytest.mark.parametrize("kind", ["forged", "expired", "wrong audience"])
def test_a_forged_expired_or_wrong_audience_token_is_refused(
    stack: Stack,
    client: TarsyClient,
    iap: Iap,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    session_id = finished_session(client)
    through_iap(monkeypatch, iap, None)
    monkeypatch.setenv("TARSY_IAP_TOKEN", bad_token(kind, stack))

    assert cli.main(["show", session_id]) == cli.EXIT_ERROR
    assert "HTTP 401" in capsys.readouterr().err
    # The same person with a token google-auth fetched is let in: only the token differed.
    monkeypatch.delenv("TARSY_IAP_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(iap.key_files[RESPONDER]))
    assert cli.main(["show", session_id]) == cli.EXIT_OK

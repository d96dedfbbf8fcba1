"""An HTTP client for the ingest and api functions (used by the CLI, the demo and tests)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from datetime import datetime
from typing import Any

import httpx
from pydantic import BaseModel, Field
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from tarsy.access.iap import ASSERTION_HEADER
from tarsy.errors import ApiError
from tarsy.models import ExecutionStatus
from tarsy.persistence.audit_log import AuditPage
from tarsy.persistence.session_list import SessionPage
from tarsy.web.links import session_url
from tarsy_dev.localstack.signin import assertion

DEFAULT_TIMEOUT_S = 30.0

# gunicorn (what functions-framework serves with) closes an idle keep-alive
# connection after 2 s. With httpx's default 5 s expiry, a request sent just as
# the server closes the pooled connection fails with "Server disconnected
# without sending a response". Expire idle connections client-side first.
KEEPALIVE_EXPIRY_S = 1.0

# A GET is idempotent, so a transport failure (a connection the server closed
# under us, a refused connect while a function restarts) is retried. POSTs are
# not: a lost response does not tell whether the alert or the chat was taken.
_retry_idempotent = retry(
    retry=retry_if_exception_type(httpx.TransportError),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.1, max=1.0),
    reraise=True,
)


# What to do when no URL is known: locally, `make up` writes them to .local/stack.env.
NO_INGEST_URL = (
    "no ingest URL: run `make up` (it writes .local/stack.env, which tarsy reads), "
    "or pass --ingest-url or set TARSY_INGEST_URL"
)
NO_API_URL = (
    "no api URL: run `make up` (it writes .local/stack.env, which tarsy reads), "
    "or pass --api-url or set TARSY_API_URL"
)


class Submitted(BaseModel):
    """The ingest function's 202 body."""

    session_id: str
    status_url: str


class SourceOutcome(BaseModel):
    """One alert of a native source's notification, as the ingest function answered."""

    fingerprint: str
    session_id: str | None
    outcome: str
    reason: str | None = None


class SourceAnswer(BaseModel):
    """What ``POST /alerts/{source}`` answered: the alerts' outcomes, or an SNS subscription."""

    alerts: list[SourceOutcome] = Field(default_factory=list)
    subscription: str | None = None
    topic_arn: str | None = None


class SessionView(BaseModel):
    """``GET /sessions/{id}``: the session with its stages, executions and timeline."""

    session: dict[str, Any]
    stages: list[dict[str, Any]]
    executions: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    audit: list[dict[str, Any]] = Field(default_factory=list, description="who did what")

    @property
    def status(self) -> ExecutionStatus:
        """The session's status."""
        return ExecutionStatus(self.session["status"])

    @property
    def is_finished(self) -> bool:
        """Whether nothing more happens without a person: terminal, or paused for a resume."""
        return self.status.is_terminal or self.status is ExecutionStatus.PAUSED


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"HTTP {response.status_code}: {response.text[:300]}"
    message = str(error.get("message", response.text))
    details = error.get("details")
    if isinstance(details, list):
        fields = "; ".join(f"{d.get('field')}: {d.get('message')}" for d in details)
        return f"HTTP {response.status_code}: {message} ({fields})"
    return f"HTTP {response.status_code}: {message}"


class LocalSignIn(httpx.Auth):
    """Sign each request as ``user`` with the local stack's key, as the proxy would.

    Design constraint: the api takes only a verified assertion; locally the CLI
    holds the stack's key (``.local/signin-key.pem``) and signs a fresh one per
    request, so the same verification runs as for a browser behind the proxy.
    """

    def __init__(self, key_pem: bytes, user: str) -> None:
        self._key = key_pem
        self.user = user

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the assertion header (a fresh one each time: they expire)."""
        request.headers[ASSERTION_HEADER] = assertion(self._key, self.user)
        yield request


class IapIdentity(httpx.Auth):
    """An OIDC identity token for IAP's audience on every api request, as IAP requires.

    Design constraint: IAP refuses the API key; a non-browser client must send
    ``Authorization: Bearer`` with a Google-issued identity token whose ``aud`` is
    IAP's OAuth client id. The token comes from google-auth
    (``fetch_id_token_credentials``: the service-account key file named by
    ``GOOGLE_APPLICATION_CREDENTIALS``, or the metadata server), refreshed when it
    expires, or is one the person obtained (``gcloud auth print-identity-token``),
    sent as given. Only requests to the api carry it: ingest keeps its own key.
    """

    def __init__(self, audience: str, api_url: str, *, token: str | None = None) -> None:
        self.audience = audience
        self._api = api_url.rstrip("/")
        self._given = token
        self._credentials: Any = None

    def token(self) -> str:
        """The current identity token, fetched or refreshed with google-auth when needed.

        Raises:
            ApiError: google-auth found no credentials that can mint an identity token.
        """
        if self._given:
            return self._given
        import google.auth.exceptions
        import google.auth.transport.requests
        import google.oauth2.id_token

        request = google.auth.transport.requests.Request()
        try:
            if self._credentials is None:
                self._credentials = google.oauth2.id_token.fetch_id_token_credentials(  # type: ignore[no-untyped-call]
                    self.audience, request=request
                )
            if not self._credentials.valid:
                self._credentials.refresh(request)
        except google.auth.exceptions.GoogleAuthError as e:
            raise ApiError(
                f"cannot get an identity token for {self.audience!r} (TARSY_IAP_AUDIENCE): {e}; "
                "set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or "
                "TARSY_IAP_TOKEN to a token (gcloud auth print-identity-token)"
            ) from e
        return str(self._credentials.token)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the bearer token to a request for the api."""
        if str(request.url).startswith(self._api):
            request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request


class TarsyClient:
    """Submit alerts and read sessions over HTTP."""

    def page_url(self, session_id: str) -> str | None:
        """The session's page in a browser, where people open it (None without a URL)."""
        base = self._ui_url or self._api_url
        return None if base is None else session_url(base, session_id)

    def __init__(
        self,
        *,
        ingest_url: str | None,
        api_url: str | None,
        api_key: str | None,
        signin: LocalSignIn | IapIdentity | None = None,
        ui_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._ingest_url = ingest_url.rstrip("/") if ingest_url else None
        self._api_url = api_url.rstrip("/") if api_url else None
        self._ui_url = ui_url.rstrip("/") if ui_url else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            auth=signin,
            headers=headers,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S),
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> TarsyClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def submit(self, alert: dict[str, Any] | bytes) -> Submitted:
        """POST an alert (a dict, or raw JSON bytes sent as they are)."""
        if self._ingest_url is None:
            raise ApiError(NO_INGEST_URL)
        url = f"{self._ingest_url}/alerts"
        try:
            if isinstance(alert, bytes):
                response = self._http.post(
                    url, content=alert, headers={"Content-Type": "application/json"}
                )
            else:
                response = self._http.post(url, json=alert)
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach ingest at {url}: {e}") from e
        if response.status_code != 202:
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        return Submitted.model_validate(response.json())

    def submit_source(self, source: str, body: bytes) -> SourceAnswer:
        """POST a saved webhook body, unchanged, to a native source's route.

        Args:
            source: ``alertmanager``, ``grafana``, ``pagerduty`` or ``sns``.
            body: The body as the sender posted it.

        Returns:
            One outcome per alert (or, for SNS, the subscription's state).

        Raises:
            ApiError: Unreachable, or anything but 200/202.
        """
        if self._ingest_url is None:
            raise ApiError(NO_INGEST_URL)
        url = f"{self._ingest_url}/alerts/{source}"
        # As the senders send it: SNS posts its JSON as text/plain.
        content_type = "text/plain; charset=UTF-8" if source == "sns" else "application/json"
        try:
            response = self._http.post(url, content=body, headers={"Content-Type": content_type})
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach ingest at {url}: {e}") from e
        if response.status_code not in (200, 202):
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        return SourceAnswer.model_validate(response.json())

    def session(self, session_id: str) -> SessionView:
        """GET one session."""
        if self._api_url is None:
            raise ApiError(NO_API_URL)
        url = f"{self._api_url}/sessions/{session_id}"
        try:
            response = self._get(url)
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach api at {url}: {e}") from e
        if response.status_code != 200:
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        return SessionView.model_validate(response.json())

    def list_sessions(
        self,
        *,
        status: str | None = None,
        alert_type: str | None = None,
        source: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        actor: str | None = None,
        action: str | None = None,
        verdict: str | None = None,
    ) -> SessionPage:
        """GET one page of sessions, newest first; the api validates the filters (422)."""
        if self._api_url is None:
            raise ApiError(NO_API_URL)
        url = f"{self._api_url}/sessions"
        given: dict[str, str | int | datetime | None] = {
            "status": status, "alert_type": alert_type, "source": source, "since": since,
            "until": until, "limit": limit, "cursor": cursor, "actor": actor, "action": action,
            "verdict": verdict,
        }  # fmt: skip
        params = {
            name: value.isoformat() if isinstance(value, datetime) else str(value)
            for name, value in given.items()
            if value is not None
        }
        try:
            response = self._get(url, params)
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach api at {url}: {e}") from e
        if response.status_code != 200:
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        return SessionPage.model_validate(response.json())

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AuditPage:
        """GET one page of the audit across sessions, newest first (an admin's; 403 otherwise)."""
        if self._api_url is None:
            raise ApiError(NO_API_URL)
        url = f"{self._api_url}/audit"
        given: dict[str, str | int | datetime | None] = {
            "actor": actor, "action": action, "since": since, "until": until, "limit": limit,
            "cursor": cursor,
        }  # fmt: skip
        params = {
            name: value.isoformat() if isinstance(value, datetime) else str(value)
            for name, value in given.items()
            if value is not None
        }
        try:
            response = self._get(url, params)
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach api at {url}: {e}") from e
        if response.status_code != 200:
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        return AuditPage.model_validate(response.json())

    def erase(self, session_id: str, reason: str) -> dict[str, Any]:
        """DELETE a session and all its records; the reason is kept in the erasure's record.

        Design constraint: not retried. A lost response does not tell whether the
        session is gone, and a second DELETE of an erased session answers 404.
        """
        if self._api_url is None:
            raise ApiError(NO_API_URL)
        url = f"{self._api_url}/sessions/{session_id}"
        try:
            # A JSON body on a DELETE: the api takes state changes only as application/json.
            response = self._http.request("DELETE", url, json={"reason": reason})
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach api at {url}: {e}") from e
        if response.status_code != 200:
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        result: dict[str, Any] = response.json()
        return result

    @_retry_idempotent
    def _get(self, url: str, params: dict[str, str] | None = None) -> httpx.Response:
        return self._http.get(url, params=params)

    def _post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._api_url is None:
            raise ApiError(NO_API_URL)
        url = f"{self._api_url}{path}"
        try:
            response = self._http.post(url, json=body or {})
        except httpx.HTTPError as e:
            raise ApiError(f"cannot reach api at {url}: {e}") from e
        if response.status_code not in (200, 202):
            raise ApiError(
                _error_message(response), status=response.status_code, body=response.text
            )
        result: dict[str, Any] = response.json()
        return result

    def cancel(self, session_id: str) -> dict[str, Any]:
        """Ask the session to stop."""
        return self._post(f"/sessions/{session_id}/cancel")

    def cancel_agent(self, session_id: str, execution_id: str) -> dict[str, Any]:
        """Ask one running agent of the session to stop; its stage goes on without it."""
        return self._post(f"/sessions/{session_id}/executions/{execution_id}/cancel")

    def resume(self, session_id: str, extra_iterations: int | None = None) -> dict[str, Any]:
        """Continue a session paused at max_iterations."""
        body = {"extra_iterations": extra_iterations} if extra_iterations else {}
        return self._post(f"/sessions/{session_id}/resume", body)

    def investigate_again(self, session_id: str) -> str:
        """Start a new session from a finished session's alert; return the new session's id."""
        return str(self._post(f"/sessions/{session_id}/investigate")["session_id"])

    def feedback(
        self, session_id: str, verdict: str, root_cause: str | None = None
    ) -> dict[str, Any]:
        """Mark a finished session's analysis right, partly_right or wrong (and the real cause)."""
        body: dict[str, Any] = {"verdict": verdict, "root_cause": root_cause}
        result: dict[str, Any] = self._post(f"/sessions/{session_id}/feedback", body)["feedback"]
        return result

    def chat(self, session_id: str, question: str) -> str:
        """Ask a question about a finished session; return the chat's execution id."""
        return str(
            self._post(f"/sessions/{session_id}/chat", {"question": question})["execution_id"]
        )

    def watch(
        self,
        session_id: str,
        *,
        poll_interval: float = 0.5,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[SessionView]:
        """Yield the session each poll until it is finished (the last view is terminal)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = self.session(session_id)
            yield view
            if view.is_finished:
                return
            if deadline is not None and time.monotonic() > deadline:
                raise ApiError(
                    f"session {session_id} still {view.status.value} after {timeout:.0f}s"
                )
            sleep(poll_interval)

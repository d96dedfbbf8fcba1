"""What an alert source is to the ingest function: one object, from request to alerts.

Design constraint: every native sender is checked in the same order (auth,
size, content type, body, shape) and nothing is written on any rejection, so
that order lives here once; a source says only what is its own: its name,
the paths it is posted to, how it authenticates, the media types it sends,
how its body becomes :class:`~tarsy.intake.sources.normalized.NormalizedAlert`
objects, and the status that tells its sender all went well. Each source
module defines its receiver beside its payload models; adding a source is its
module plus its factory and route in :mod:`tarsy.intake.sources.registry` (and a
block in ``alert_sources:`` when it has settings).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import ClassVar

from tarsy.errors import InputError
from tarsy.http.json_body import JsonValue
from tarsy.http.request import HttpRequest, HttpResponse, read_json, required_key
from tarsy.intake.sources.basic_auth import check_key
from tarsy.intake.sources.config import AlertSourcesConfig, SourceConfig
from tarsy.intake.sources.normalized import IntakeSource, NormalizedAlert, SourceName
from tarsy.settings import Settings

ROUTE_PREFIX = "/alerts/"
JSON_MEDIA_TYPES = frozenset({"application/json"})

Received = list[NormalizedAlert] | HttpResponse
AlertOutcomeAnswer = dict[str, str | None]
"""One alert's entry of a success answer (``fingerprint``, ``session_id``, ``outcome``...)."""
"""A notification's alerts, or the whole answer when it carries none (an SNS confirmation)."""


class AlertReceiver(ABC):
    """One native alert source: authenticate, check, parse and normalize what it posts."""

    name: ClassVar[IntakeSource]
    paths: ClassVar[tuple[str, ...]]
    # What a sender may declare; ``+json`` suffixes count as JSON where JSON is accepted.
    media_types: ClassVar[frozenset[str]] = JSON_MEDIA_TYPES
    # What a taken notification is answered with (Alertmanager's API documents only 200).
    success_status: ClassVar[int] = 202

    def source_config(self, sources: AlertSourcesConfig) -> SourceConfig | None:
        """The source's block of ``alert_sources`` (None: a source without settings)."""
        return sources.for_source(self.native_name())

    def native_name(self) -> SourceName:
        """The name of a native sender (``api`` has no ``alert_sources`` block)."""
        if self.name == "api":
            raise ValueError("POST /alerts has no alert_sources block")
        return self.name

    def answer(self, outcomes: list[AlertOutcomeAnswer], settings: Settings) -> HttpResponse:
        """The success answer: ``{"alerts": [...]}``, one entry per alert, in order."""
        return HttpResponse(status=self.success_status, body={"alerts": outcomes})

    @abstractmethod
    async def receive(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> Received:
        """Check the request in the intake's order; its alerts, or the whole answer.

        Raises:
            InputError: The rejection (401/403, 413, 415, 400, 422, 503), before any write.
        """

    async def checked_json(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> str:
        """The body as JSON text, once the request passed auth, size and media type."""
        await self.authenticate(request, settings, sources)
        check_size(request, settings)
        self.check_media_type(request)
        return json_text(request, settings)

    async def authenticate(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> None:
        """The API key as Bearer, X-API-Key or basic-auth password (what senders can send)."""
        check_source_key(request, settings)

    def check_media_type(self, request: HttpRequest) -> None:
        """Refuse a body this sender does not send (415)."""
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        json_ok = "application/json" in self.media_types and _is_json(media_type)
        if not json_ok and media_type not in self.media_types:
            accepted = " or ".join(sorted(self.media_types))
            raise InputError(f"content type must be {accepted}", status=415)


class BodyReceiver(AlertReceiver):
    """A source whose authenticated body alone gives its alerts (every one but SNS)."""

    async def receive(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> Received:
        """The alerts of a checked body."""
        return self.alerts(await self.checked_json(request, settings, sources), sources)

    @abstractmethod
    def alerts(self, body: str, sources: AlertSourcesConfig) -> list[NormalizedAlert]:
        """The normalized alerts of an authenticated JSON body (400/422 on a bad one)."""


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def check_source_key(request: HttpRequest, settings: Settings) -> None:
    """Accept the API key as Bearer, X-API-Key or basic-auth password.

    Raises:
        InputError: 503 when no key is configured (and auth is not disabled).
        CredentialsError: A missing (with a Basic challenge), malformed or wrong key (401).
    """
    required = required_key(settings)
    if required is not None:
        check_key(request.headers, required)


def check_size(request: HttpRequest, settings: Settings) -> None:
    """Refuse a body over ``max_alert_bytes`` (413)."""
    if request.body_too_large or len(request.body) > settings.max_alert_bytes:
        raise InputError(f"body exceeds {settings.max_alert_bytes} bytes", status=413)


def json_text(request: HttpRequest, settings: Settings) -> str:
    """The body as JSON text, checked by :func:`tarsy.http.request.read_json`."""
    payload: JsonValue = read_json(request, settings.max_alert_bytes)
    return json.dumps(payload, ensure_ascii=False)

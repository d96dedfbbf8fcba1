"""The native alert-source routes of the ingest function, one per sender.

``POST /alerts`` takes tarsy's own ``{alert_type, data}``; an SRE pointing
Alertmanager, Grafana, PagerDuty or AWS SNS at tarsy should not need a
translator, so each gets a route that takes its body as it is sent:

* ``/alerts/alertmanager``: Alertmanager webhook v4;
* ``/alerts/alertmanager/api/v2/alerts`` (and ``.../api/v1/alerts``): the
  alerts API of an Alertmanager, for Grafana's "Alertmanager" contact point,
  whose URL is then ``https://HOST/alerts/alertmanager`` (Grafana appends
  the API path; older releases append ``/api/v1/alerts``, with the same
  body). Its alerts belong to the ``alertmanager`` source: its settings, and
  Alertmanager's own fingerprint of their labels (see
  :mod:`tarsy.intake.sources.alertmanager_api`). It answers ``200`` where the
  others answer ``202``: Alertmanager's API documents only 200 for success,
  and clients generated from its OpenAPI spec, such as ``amtool``, take any
  other code as an error;
* ``/alerts/grafana``: Grafana's webhook contact point;
* ``/alerts/pagerduty``: PagerDuty V3 webhook subscriptions;
* ``/alerts/sns``: AWS SNS HTTPS subscriptions carrying CloudWatch alarms.

Each request is checked in the order ``POST /alerts`` uses — method, auth,
size, content type, body, shape — and nothing is written on any rejection.
Authentication is what each sender can send: the API key as Bearer,
``X-API-Key`` or the basic-auth password (SNS and PagerDuty can only put it
in the URL, ``https://tarsy:KEY@host/...``; Grafana's Alertmanager contact
point can only send basic auth, and only when its user is set too);
PagerDuty's HMAC signature instead of the key once a signing secret is
configured; for SNS, the key and the message's own signature and an
allow-listed topic. A missing key is
answered with a ``Basic`` challenge, because SNS sends the credentials of its
subscription URL only after one.

The body becomes normalized alerts (:mod:`tarsy.intake.sources`), and each alert an
outcome (:mod:`tarsy.intake.alerts`): the answer is ``202 {"alerts": [...]}``
(``200`` on the Alertmanager API route) with one ``{fingerprint,
session_id, outcome}`` per alert.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from tarsy.bus import Publisher
from tarsy.config.schema import TarsyConfig
from tarsy.errors import ConfigError, InputError
from tarsy.http.json_body import JsonValue
from tarsy.http.request import HttpRequest, HttpResponse, error_response, read_json
from tarsy.intake.alerts import Intake, PublishFailed
from tarsy.intake.sources.basic_auth import check_key
from tarsy.intake.sources.config import PagerDutySourceConfig
from tarsy.intake.sources.dispatch import BodySource, alerts_from_api_body, alerts_from_body
from tarsy.intake.sources.normalized import SOURCE_NAMES, NormalizedAlert, SourceName
from tarsy.intake.sources.pagerduty_signature import SIGNATURE_HEADER, verify_pagerduty_signature
from tarsy.persistence.store import Store
from tarsy.settings import Settings

logger = logging.getLogger(__name__)

ROUTE_PREFIX = "/alerts/"
SOURCE_ROUTES: dict[str, SourceName] = {f"{ROUTE_PREFIX}{name}": name for name in SOURCE_NAMES}
"""Path → the source it takes."""

ALERTMANAGER_API_ROUTES: frozenset[str] = frozenset(
    f"{ROUTE_PREFIX}alertmanager/api/{version}/alerts" for version in ("v1", "v2")
)
"""Paths of tarsy's Alertmanager alerts API: what an Alertmanager client posts to."""

# SNS posts its JSON as text/plain; every other sender as application/json.
_SNS_MEDIA_TYPES = frozenset({"text/plain", "application/json"})


def source_for(path: str) -> SourceName | None:
    """Return the source whose route ``path`` is, if any.

    Args:
        path: The request path.

    Returns:
        The source, or None for any other path.
    """
    path = path.rstrip("/")
    if path in ALERTMANAGER_API_ROUTES:
        return "alertmanager"
    return SOURCE_ROUTES.get(path)


def _media_type(request: HttpRequest) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def error_answer(error: InputError) -> HttpResponse:
    """Render a rejection; a 401 carries the error's own challenge when it has one.

    Args:
        error: The rejection.

    Returns:
        The response (``WWW-Authenticate: Basic ...`` for a missing or wrong key).
    """
    response = error_response(error)
    challenge = getattr(error, "challenge", None)
    if response.status == 401 and isinstance(challenge, str):
        response.headers["WWW-Authenticate"] = challenge
    return response


def check_source_key(request: HttpRequest, settings: Settings) -> None:
    """Accept the API key as Bearer, X-API-Key or basic-auth password.

    Args:
        request: The request.
        settings: Its ``api_key`` and ``auth_disabled``.

    Raises:
        InputError: 503 when no key is configured (and auth is not disabled).
        CredentialsError: A missing (with a Basic challenge), malformed or wrong key (401).
    """
    if settings.auth_disabled:
        return
    if settings.api_key is None:
        raise InputError(
            "authentication is not configured: set TARSY_API_KEY "
            "(or TARSY_AUTH_DISABLED=true for local runs)",
            status=503,
        )
    check_key(request.headers, settings.api_key)


def _check_size(request: HttpRequest, settings: Settings) -> None:
    if request.body_too_large or len(request.body) > settings.max_alert_bytes:
        raise InputError(f"body exceeds {settings.max_alert_bytes} bytes", status=413)


def _check_content_type(request: HttpRequest, source: SourceName) -> None:
    media_type = _media_type(request)
    if source == "sns":
        if media_type not in _SNS_MEDIA_TYPES:
            raise InputError("content type must be text/plain (as SNS sends) or JSON", status=415)
    elif not _is_json(media_type):
        raise InputError("content type must be application/json", status=415)


def _json_text(request: HttpRequest, settings: Settings) -> str:
    """The body as JSON text, checked by :func:`tarsy.http.request.read_json`."""
    payload: JsonValue = read_json(request, settings.max_alert_bytes)
    return json.dumps(payload, ensure_ascii=False)


async def pagerduty_secrets(settings: Settings, config: PagerDutySourceConfig) -> list[str]:
    """The PagerDuty signing secrets in force: the setting's, then the config's named ones.

    Args:
        settings: ``TARSY_PAGERDUTY_SIGNING_SECRET`` (comma-separated during a rotation).
        config: ``alert_sources.pagerduty.signing_secrets`` (names of environment
            variables or Secret Manager secrets).

    Returns:
        The secret values; empty when none is configured (the API key is then required).

    Raises:
        InputError: A named secret cannot be read (503: the deployment must change).
    """
    # Imported here: tarsy.secrets loads Secret Manager's client only when a name needs it.
    from tarsy.secrets import resolve_name

    found: list[str] = []
    if settings.pagerduty_signing_secret is not None:
        value = settings.pagerduty_signing_secret.get_secret_value()
        found.extend(part.strip() for part in value.split(",") if part.strip())
    for name in config.signing_secrets:
        try:
            found.append(await asyncio.to_thread(resolve_name, name, settings))
        except ConfigError as e:
            raise InputError(f"PagerDuty signing secret {name!r}: {e}", status=503) from e
    return found


async def _body_alerts(
    source: BodySource, request: HttpRequest, settings: Settings, config: TarsyConfig
) -> list[NormalizedAlert]:
    """Authenticate and parse an Alertmanager, Grafana or PagerDuty notification."""
    secrets = (
        await pagerduty_secrets(settings, config.alert_sources.pagerduty)
        if source == "pagerduty"
        else []
    )
    if secrets:
        _check_size(request, settings)
        # Over the raw body as received: parsed only once it is known to be PagerDuty's.
        verify_pagerduty_signature(request.body, request.headers.get(SIGNATURE_HEADER), secrets)
    else:
        check_source_key(request, settings)
        _check_size(request, settings)
    _check_content_type(request, source)
    return alerts_from_body(source, _json_text(request, settings), config.alert_sources)


async def _api_alerts(
    request: HttpRequest, settings: Settings, config: TarsyConfig
) -> list[NormalizedAlert]:
    """Authenticate and parse alerts posted to the Alertmanager API route."""
    check_source_key(request, settings)
    _check_size(request, settings)
    _check_content_type(request, "alertmanager")
    return alerts_from_api_body(_json_text(request, settings), config.alert_sources)


async def _sns(
    request: HttpRequest, settings: Settings, config: TarsyConfig, intake: Intake
) -> HttpResponse:
    """Verify an SNS message, then confirm, note or take it."""
    # Imported here: httpx and cryptography are needed by this route only.
    from tarsy.intake.sources.sns import SubscriptionConfirmation, normalize_sns, parse_sns
    from tarsy.intake.sources.sns_certificates import HttpxCertificateFetcher
    from tarsy.intake.sources.sns_confirm import confirm_subscription
    from tarsy.intake.sources.sns_endpoint import endpoint_transport
    from tarsy.intake.sources.sns_signature import SnsVerifier

    check_source_key(request, settings)
    _check_size(request, settings)
    _check_content_type(request, "sns")
    message = parse_sns(_json_text(request, settings))
    sns = config.alert_sources.sns
    try:
        transport = endpoint_transport(settings.sns_endpoint_url)
    except ValueError as e:
        raise InputError(f"TARSY_SNS_ENDPOINT_URL: {e}", status=503) from e
    fetcher = HttpxCertificateFetcher(transport=transport) if transport is not None else None
    await SnsVerifier.from_config(sns, fetcher=fetcher).verify(message)
    outcome = normalize_sns(message, sns)
    if isinstance(outcome, list):
        return await _take(intake, outcome, "sns", config)
    body: dict[str, Any] = {"topic_arn": outcome.topic_arn, "message_id": outcome.message_id}
    if isinstance(outcome, SubscriptionConfirmation):
        await confirm_subscription(outcome, sns.cert_host_pattern, transport=transport)
        logger.info("confirmed the SNS subscription of topic %s", outcome.topic_arn)
        return HttpResponse(status=200, body={**body, "subscription": "confirmed"})
    # Visiting its SubscribeURL would subscribe again: the message is only noted.
    logger.warning("SNS topic %s unsubscribed this endpoint", outcome.topic_arn)
    return HttpResponse(status=200, body={**body, "subscription": "unsubscribed"})


async def _take(
    intake: Intake,
    alerts: list[NormalizedAlert],
    source: SourceName,
    config: TarsyConfig,
    *,
    status: int = 202,
) -> HttpResponse:
    try:
        outcomes = await intake.take(alerts, config.alert_sources.for_source(source))
    except PublishFailed:
        return HttpResponse(
            status=503,
            body={"error": {"status": 503, "message": "queue unavailable, retry"}},
            headers={"Retry-After": "5"},
        )
    return HttpResponse(
        status=status,
        body={"alerts": [outcome.answer() for outcome in outcomes]},
    )


async def handle(
    request: HttpRequest, settings: Settings, config: TarsyConfig, store: Store, bus: Publisher
) -> HttpResponse:
    """Serve one request to a source route.

    Args:
        request: The request; its path is one of :data:`SOURCE_ROUTES` (else 404).
        settings: Process settings (keys, limits).
        config: The configuration (``alert_sources``, chains, masking).
        store: Firestore.
        bus: The steps topic.

    Returns:
        202 with the outcomes (200 on the Alertmanager API route), 200 for an
        SNS (un)subscription, else the rejection.
    """
    source = source_for(request.path)
    if source is None:
        return error_answer(InputError(f"no route {request.path!r}", status=404))
    intake = Intake(settings=settings, config=config, store=store, bus=bus)
    try:
        if request.method != "POST":
            raise InputError(
                f"method {request.method} not allowed on {request.path}",
                status=405,
                details={"allow": "POST"},
            )
        if source == "sns":
            return await _sns(request, settings, config, intake)
        if request.path.rstrip("/") in ALERTMANAGER_API_ROUTES:
            alerts = await _api_alerts(request, settings, config)
            return await _take(intake, alerts, source, config, status=200)
        alerts = await _body_alerts(source, request, settings, config)
        return await _take(intake, alerts, source, config)
    except InputError as e:
        logger.info("rejected %s notification: %s %s", source, e.status, e)
        return error_answer(e)

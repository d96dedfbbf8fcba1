"""PagerDuty V3 webhooks (webhook subscriptions).

Each delivery carries exactly one ``event``: ``id``, ``event_type`` (e.g.
``incident.triggered``), ``resource_type``, ``occurred_at``, ``agent``,
``client`` and ``data``, whose shape depends on the event type — an incident
for most ``incident.*`` types, a note, responder request or status update for
others, a service for ``service.*``, a greeting for the ``pagey.ping`` test
event a new subscription sends.

Only two event types mean something to tarsy: ``incident.triggered`` starts
an investigation and ``incident.resolved`` records the resolution. Every
other type is acknowledged and reported ``ignored`` (with the type as the
reason), so a subscription to "all events" works and PagerDuty, which drops a
delivery on any 4xx, never disables the subscription for it. The incident's
id is the dedup key: PagerDuty delivers at least once, and one incident
should be one investigation.

The V3 payload carries the incident, not the alert behind it (no custom
details): the investigation gets the title, service, urgency, priority and
the link to the incident.

Authentication is the ``X-PagerDuty-Signature`` header, checked over the raw
body before this module parses it (:mod:`tarsy.intake.sources.pagerduty_signature`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from tarsy.errors import ConfigError, InputError
from tarsy.http.request import HttpRequest
from tarsy.intake.sources.alert_type import derive_alert_type
from tarsy.intake.sources.config import AlertSourcesConfig, PagerDutySourceConfig
from tarsy.intake.sources.limits import cap_alerts
from tarsy.intake.sources.normalized import AlertEvent, NormalizedAlert
from tarsy.intake.sources.pagerduty_signature import SIGNATURE_HEADER, verify_pagerduty_signature
from tarsy.intake.sources.parsing import Tolerant, parse_json, validate_payload
from tarsy.intake.sources.receiver import (
    ROUTE_PREFIX,
    BodyReceiver,
    Received,
    check_size,
    json_text,
)
from tarsy.settings import Settings

WHAT = "PagerDuty V3 webhook"

EVENTS: dict[str, AlertEvent] = {
    "incident.triggered": "firing",
    "incident.resolved": "resolved",
}
"""Event types that act on an investigation; every other type is ignored."""


class PagerDutyReference(Tolerant):
    """A reference to another PagerDuty object (service, priority, team, user...)."""

    id: str = ""
    type: str = ""
    summary: str = ""
    html_url: str = ""


class PagerDutyIncident(Tolerant):
    """``event.data`` of the incident event types."""

    id: str = Field(min_length=1)
    type: str = "incident"
    number: int | None = None
    status: str = ""
    title: str = ""
    html_url: str = ""
    incident_key: str | None = None
    created_at: str = ""
    urgency: str = ""
    service: PagerDutyReference | None = None
    priority: PagerDutyReference | None = None
    escalation_policy: PagerDutyReference | None = None
    teams: list[PagerDutyReference] = Field(default_factory=list)
    assignees: list[PagerDutyReference] = Field(default_factory=list)


class PagerDutyEvent(Tolerant):
    """The one event of a V3 webhook delivery."""

    id: str = Field(min_length=1)
    event_type: str = Field(min_length=1)
    resource_type: str = ""
    occurred_at: str = ""
    agent: dict[str, Any] | None = None
    client: dict[str, Any] | None = None
    data: dict[str, Any] | None = None


class PagerDutyWebhook(Tolerant):
    """The body of a PagerDuty V3 webhook delivery."""

    event: PagerDutyEvent


def parse_pagerduty(body: bytes | str) -> PagerDutyWebhook:
    """Parse and validate a PagerDuty V3 webhook body.

    Call it only after the signature over the same raw bytes has verified.

    Args:
        body: The raw request body.

    Returns:
        The validated delivery.

    Raises:
        MalformedBodyError: Not JSON (400).
        PayloadShapeError: Not a V3 delivery (422, fields named).
    """
    return validate_payload(PagerDutyWebhook, parse_json(body), WHAT)


def _summary(reference: PagerDutyReference | None) -> str | None:
    if reference is None:
        return None
    return reference.summary or None


def incident_data(event: PagerDutyEvent, incident: PagerDutyIncident) -> dict[str, Any]:
    """Return what the investigation reads about an incident event.

    Args:
        event: The delivery's event.
        incident: Its data, validated as an incident.

    Returns:
        Title, service, urgency, priority and link first, then the rest.
    """
    return {
        "title": incident.title,
        "service": _summary(incident.service),
        "urgency": incident.urgency or None,
        "priority": _summary(incident.priority),
        "html_url": incident.html_url,
        "incident_id": incident.id,
        "incident_number": incident.number,
        "incident_key": incident.incident_key,
        "status": incident.status,
        "created_at": incident.created_at,
        "escalation_policy": _summary(incident.escalation_policy),
        "teams": [team.summary for team in incident.teams if team.summary],
        "event_type": event.event_type,
        "occurred_at": event.occurred_at,
    }


def incident_id_of(event: PagerDutyEvent) -> str | None:
    """Return the id of the incident an event concerns, whatever its data type.

    Args:
        event: The event.

    Returns:
        ``data.id`` for incident data, ``data.incident.id`` for notes,
        responders and status updates, else ``None``.
    """
    data = event.data or {}
    if data.get("type") == "incident" and isinstance(data.get("id"), str) and data["id"]:
        return str(data["id"])
    reference = data.get("incident")
    if isinstance(reference, dict) and isinstance(reference.get("id"), str) and reference["id"]:
        return str(reference["id"])
    return None


def normalize_pagerduty(
    webhook: PagerDutyWebhook, config: PagerDutySourceConfig
) -> list[NormalizedAlert]:
    """Return the delivery's one alert: firing, resolved or ignored.

    Args:
        webhook: The validated delivery.
        config: ``alert_sources.pagerduty``.

    Returns:
        A one-element list.

    Raises:
        PayloadShapeError: A triggered or resolved event whose data is not an
            incident (422, naming ``event.data...``).
    """
    event = webhook.event
    action = EVENTS.get(event.event_type)
    if action is None:
        key = incident_id_of(event) or event.id
        data: dict[str, Any] = {
            "event_type": event.event_type,
            "event_id": event.id,
            "resource_type": event.resource_type,
            "occurred_at": event.occurred_at,
            "incident_id": incident_id_of(event),
        }
        alert = NormalizedAlert(
            source="pagerduty",
            fingerprint=key,
            alert_key=key,
            event="ignored",
            reason=f"PagerDuty event type {event.event_type!r} starts no investigation",
            alert_type=derive_alert_type(data, config),
            data=data,
        )
        return [alert]
    incident = validate_payload(PagerDutyIncident, event.data, WHAT, prefix="event.data")
    data = incident_data(event, incident)
    alert = NormalizedAlert(
        source="pagerduty",
        fingerprint=incident.id,
        alert_key=incident.id,
        event=action,
        alert_type=derive_alert_type(data, config),
        data=data,
    )
    return cap_alerts([alert], config.max_alerts_per_notification)


class PagerDutyReceiver(BodyReceiver):
    """``POST /alerts/pagerduty``: a V3 webhook subscription's delivery.

    Once a signing secret is configured, the ``X-PagerDuty-Signature`` HMAC over
    the raw body authenticates it instead of the API key (which PagerDuty can
    only put in the URL).
    """

    name = "pagerduty"
    paths = (f"{ROUTE_PREFIX}pagerduty",)

    async def receive(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> Received:
        """Verify the signature (or the key), then parse as every source does."""
        secrets = await pagerduty_secrets(settings, sources.pagerduty)
        if not secrets:
            return await super().receive(request, settings, sources)
        check_size(request, settings)
        # Over the raw body as received: parsed only once it is known to be PagerDuty's.
        verify_pagerduty_signature(request.body, request.headers.get(SIGNATURE_HEADER), secrets)
        self.check_media_type(request)
        return self.alerts(json_text(request, settings), sources)

    def alerts(self, body: str, sources: AlertSourcesConfig) -> list[NormalizedAlert]:
        """The delivery's one alert."""
        return normalize_pagerduty(parse_pagerduty(body), sources.pagerduty)


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

"""tarsy's own ``POST /alerts``: one more alert source, through the same door as the senders.

Design constraint: there is one intake. ``POST /alerts`` is checked in the
order every source is (method, auth, size, content type, body, shape; nothing
written on any rejection), its alert is created, started and, when the start
cannot be published, removed again by the same code as a native sender's
(:mod:`tarsy.intake.routes`, :mod:`tarsy.intake.alerts`). What is its own is
here: the API key only (Bearer or ``X-API-Key``, no basic auth), the body
:class:`~tarsy.models.AlertSubmission` with its per-request ``runbook``,
``mcp`` selection and ``metadata``, no deduplication (each call is one
investigation), and the answer ``202 {"session_id", "status_url"}``.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from pydantic import ValidationError

from tarsy.commands.start import status_url
from tarsy.errors import InputError
from tarsy.http.json_body import firestore_map_problems
from tarsy.http.request import HttpRequest, HttpResponse, check_api_key, read_json
from tarsy.intake.sources.config import AlertSourcesConfig, SourceConfig
from tarsy.intake.sources.normalized import IntakeSource, NormalizedAlert
from tarsy.intake.sources.receiver import (
    AlertOutcomeAnswer,
    AlertReceiver,
    Received,
    check_size,
)
from tarsy.models import AlertSubmission
from tarsy.settings import Settings

ALERTS_PATH = "/alerts"


def validation_details(error: ValidationError) -> list[dict[str, str]]:
    """Return one ``{field, message, type}`` entry per schema error."""
    return [
        {
            "field": ".".join(str(p) for p in err["loc"]) or "(body)",
            "message": err["msg"],
            "type": err["type"],
        }
        for err in error.errors()
    ]


def parse_submission(request: HttpRequest, settings: Settings) -> AlertSubmission:
    """Check method, auth, size, type, body and schema, in that order; raise InputError.

    The body is read by :func:`tarsy.http.request.read_json` (Content-Encoding, UTF-8,
    depth, numbers and lone surrogates; 400, 413 or 415). ``metadata`` is
    stored as a Firestore map, so what Firestore would refuse in it is a 422
    with field-level details, like a schema error: nothing that passes here
    fails at the write.
    """
    if request.method != "POST":
        raise InputError(
            f"method {request.method} not allowed on {ALERTS_PATH}",
            status=405,
            details={"allow": "POST"},
        )
    check_api_key(request.headers, settings)
    check_size(request, settings)
    ApiReceiver().check_media_type(request)
    payload = read_json(request, settings.max_alert_bytes)
    if not isinstance(payload, dict):
        raise InputError(
            "body must be a JSON object",
            status=422,
            details=[{"field": "(body)", "message": "expected an object", "type": "dict_type"}],
        )
    try:
        submission = AlertSubmission.model_validate(payload)
    except ValidationError as e:
        raise InputError(
            "alert does not match the schema", status=422, details=validation_details(e)
        ) from e
    problems = firestore_map_problems(submission.metadata, "metadata")
    if problems:
        raise InputError("metadata cannot be stored as sent", status=422, details=problems)
    return submission


def alert_of(submission: AlertSubmission) -> NormalizedAlert:
    """The one alert of a submission: firing, never deduplicated, with its own extras."""
    occurrence = f"api-{uuid.uuid4()}"
    return NormalizedAlert(
        source="api",
        fingerprint=occurrence,
        alert_key=occurrence,
        event="firing",
        alert_type=submission.alert_type,
        # Text data has no labels to route on; the model reads it as written (data_text).
        data=submission.data if isinstance(submission.data, dict) else {"text": submission.data},
        data_text=submission.data_as_text(),
        runbook=submission.runbook,
        mcp=submission.mcp,
        metadata=submission.metadata,
        deduplicate=False,
    )


class ApiReceiver(AlertReceiver):
    """``POST /alerts`` (also the function's root URL): tarsy's own alert shape."""

    name: ClassVar[IntakeSource] = "api"
    paths: ClassVar[tuple[str, ...]] = (ALERTS_PATH, "")

    def source_config(self, sources: AlertSourcesConfig) -> SourceConfig | None:
        """None: the API has no ``alert_sources`` block (nothing to deduplicate)."""
        return None

    async def receive(
        self, request: HttpRequest, settings: Settings, sources: AlertSourcesConfig
    ) -> Received:
        """The submission's one alert."""
        return [alert_of(parse_submission(request, settings))]

    def answer(self, outcomes: list[AlertOutcomeAnswer], settings: Settings) -> HttpResponse:
        """``202 {"session_id", "status_url"}`` of the one session created."""
        [created] = outcomes
        session_id = str(created["session_id"])
        return HttpResponse(
            status=self.success_status,
            body={"session_id": session_id, "status_url": status_url(settings, session_id)},
        )

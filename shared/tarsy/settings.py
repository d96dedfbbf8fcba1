"""Process settings, read once from the environment.

Every environment variable the product reads is a field here; nothing else in
the code reads ``os.environ``. Each field names, in ``json_schema_extra``, the
cloud functions that read it, so the Terraform checks can assert that every
function gets exactly the variables it uses (see ``tests/infra``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

ALL_FUNCTIONS = ("ingest", "step", "api")


def _used_by(*functions: str) -> JsonDict:
    return {"functions": list(functions)}


def _environment_names(field_name: str, validation_alias: object) -> list[str]:
    if isinstance(validation_alias, AliasChoices):
        return [str(choice) for choice in validation_alias.choices]
    return [str(validation_alias)] if validation_alias is not None else [field_name.upper()]


class EnvironmentModel(BaseModel):
    """A frozen model whose fields not given explicitly are read from the environment.

    Design constraint: every function builds its settings on its first request, and
    importing pydantic-settings (with python-dotenv and argparse) cost about 25 ms of
    each cold start for what the functions use of it: a field's value from the first
    of its environment names that is set, explicit values first. Values arrive as
    strings and pydantic's lax mode converts them, as pydantic-settings does. The
    CLI, which also reads a ``.env`` file, keeps pydantic-settings
    (``tarsy_dev.client_settings``).
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _read_environment(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        values = dict(data)
        for name, field in cls.model_fields.items():
            names = _environment_names(name, field.validation_alias)
            if name in values or any(variable in values for variable in names):
                continue
            found = next((variable for variable in names if variable in os.environ), None)
            if found is not None:
                values[found] = os.environ[found]
        return values


class Settings(EnvironmentModel):
    """Settings for the ingest, step and api functions, the CLI and the local stack."""

    project_id: str = Field(
        default="tarsy-local",
        validation_alias=AliasChoices("GOOGLE_CLOUD_PROJECT", "GCP_PROJECT"),
        description="Google Cloud project holding Firestore and Pub/Sub.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    firestore_database: str = Field(
        default="(default)",
        validation_alias="TARSY_FIRESTORE_DATABASE",
        description="Firestore database id.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    steps_topic: str = Field(
        default="tarsy-steps",
        validation_alias="TARSY_STEPS_TOPIC",
        description="Pub/Sub topic that carries step messages.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias="TARSY_API_KEY",
        description="Key that callers of ingest and api present (Bearer or X-API-Key).",
        json_schema_extra=_used_by("ingest", "api"),
    )
    auth_disabled: bool = Field(
        default=False,
        validation_alias="TARSY_AUTH_DISABLED",
        description="Accept unauthenticated requests. For local runs only.",
        json_schema_extra=_used_by("ingest", "api"),
    )
    iap_audience: str = Field(
        default="",
        validation_alias="TARSY_IAP_AUDIENCE",
        description=(
            "Audience of Identity-Aware Proxy's signed header (x-goog-iap-jwt-assertion): "
            "/projects/NUMBER/global/backendServices/ID behind a load balancer. Every api and "
            "page request must carry a header that verifies against it; empty: none can."
        ),
        json_schema_extra=_used_by("api"),
    )
    iap_certs_url: str = Field(
        default="https://www.gstatic.com/iap/verify/public_key",
        validation_alias="TARSY_IAP_CERTS_URL",
        description=(
            "Where the proxy's public keys are published ({key id: PEM}, as google-auth reads "
            "them); the local stack serves its own signing key's on loopback."
        ),
        json_schema_extra=_used_by("api"),
    )
    access_grants: str = Field(
        default="",
        validation_alias="TARSY_ACCESS_GRANTS",
        description=(
            'Roles granted to people: JSON {"viewer": [...], "responder": [...], "admin": '
            "[...]} of user:EMAIL, serviceAccount:EMAIL or domain:DOMAIN members "
            "(tarsy.access.roles). Terraform sets it from var.access."
        ),
        json_schema_extra=_used_by("ingest", "api"),
    )
    cloud_identity_url: str = Field(
        default="https://cloudidentity.googleapis.com",
        validation_alias="TARSY_CLOUD_IDENTITY_URL",
        description=(
            "Cloud Identity Groups API base URL, asked who is in the group:EMAIL members of "
            "TARSY_ACCESS_GRANTS (a local fake in tests)."
        ),
        json_schema_extra=_used_by("ingest", "api"),
    )
    public_api_url: str = Field(
        default="",
        validation_alias="TARSY_PUBLIC_API_URL",
        description=(
            "Base URL of the api function, used to build status_url in ingest replies "
            "and the link in Slack notifications."
        ),
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    scoring_off_reason: str | None = Field(
        default=None,
        validation_alias="TARSY_SCORING_OFF_REASON",
        description=(
            "When set, chains that score sessions do not: the session records "
            "'not scored (<reason>)' instead of running a judge (the local stack sets "
            "'stand-in model', which cannot judge)."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    memory_recall: int = Field(
        default=3,
        ge=0,
        le=10,
        validation_alias="TARSY_MEMORY_RECALL",
        description=(
            "How many earlier sessions of the same alert (fingerprint, or alert name on the "
            "same workload) a new session's investigation is told of, as history to verify; "
            "0 turns memory off (the evaluations do: each run stands alone)."
        ),
        json_schema_extra=_used_by("step"),
    )
    max_alert_bytes: int = Field(
        default=1024 * 1024,
        validation_alias="TARSY_MAX_ALERT_BYTES",
        gt=0,
        description="Largest accepted ingest body (413 above it).",
        json_schema_extra=_used_by("ingest"),
    )
    pagerduty_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias="TARSY_PAGERDUTY_SIGNING_SECRET",
        description=(
            "Signing secret of the PagerDuty webhook subscription (several, comma-separated, "
            "while one is rotated). When set, POST /alerts/pagerduty takes a valid "
            "X-PagerDuty-Signature instead of the API key."
        ),
        json_schema_extra=_used_by("ingest"),
    )
    pagerduty_token_secret: str | None = Field(
        default=None,
        validation_alias="TARSY_PAGERDUTY_TOKEN_SECRET",
        description=(
            "Secret Manager secret holding a PagerDuty REST API key (a name in this project, "
            "or projects/P/secrets/S[/versions/V]), for the incident notes of "
            "alert_sources.pagerduty.incident_notes. Unset, and PAGERDUTY_API_TOKEN unset: "
            "no notes."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    pagerduty_api_token: SecretStr | None = Field(
        default=None,
        validation_alias="PAGERDUTY_API_TOKEN",
        description="PagerDuty REST API key given directly, for local runs.",
        json_schema_extra=_used_by("step", "api"),
    )
    pagerduty_from_email: str = Field(
        default="",
        validation_alias="TARSY_PAGERDUTY_FROM_EMAIL",
        description=(
            "The e-mail of a PagerDuty user, sent as the From header of every note "
            "(PagerDuty requires it with an account-level API key). Empty: no notes."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    pagerduty_base_url: str | None = Field(
        default=None,
        validation_alias="TARSY_PAGERDUTY_BASE_URL",
        description="PagerDuty REST API base URL override (a proxy, a local fake).",
        json_schema_extra=_used_by("step", "api"),
    )
    sns_endpoint_url: str | None = Field(
        default=None,
        validation_alias="TARSY_SNS_ENDPOINT_URL",
        description=(
            "Local runs only: fetch SNS signing certificates and visit SubscribeURLs at this "
            "base URL (an SNS emulator such as moto) instead of the SNS host the message names; "
            "that host is still checked against alert_sources.sns.cert_host_pattern."
        ),
        json_schema_extra=_used_by("ingest"),
    )
    config_path: str | None = Field(
        default=None,
        validation_alias="TARSY_CONFIG_PATH",
        description="YAML file adding or overriding agents and chains.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    gemini_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        description="Gemini API key; when unset, Vertex AI with ADC is used.",
        json_schema_extra=_used_by("step"),
    )
    gemini_base_url: str | None = Field(
        default=None,
        validation_alias="GEMINI_BASE_URL",
        description="Gemini endpoint override (proxy, regional endpoint, local fake).",
        json_schema_extra=_used_by("step"),
    )
    vertex_project: str | None = Field(
        default=None,
        validation_alias="TARSY_VERTEX_PROJECT",
        description="Vertex AI project when it differs from the Firestore project.",
        json_schema_extra=_used_by("step"),
    )
    vertex_location: str = Field(
        default="us-central1",
        validation_alias=AliasChoices("TARSY_VERTEX_LOCATION", "GOOGLE_CLOUD_LOCATION"),
        description="Vertex AI location, used when no Gemini API key is set.",
        json_schema_extra=_used_by("step"),
    )
    default_model: str = Field(
        default="gemini-2.5-flash",
        validation_alias="TARSY_DEFAULT_MODEL",
        description="Model of the built-in default LLM provider.",
        json_schema_extra=_used_by("step"),
    )
    step_lease_seconds: int = Field(
        default=45,
        validation_alias="TARSY_STEP_LEASE_SECONDS",
        ge=3,
        description=(
            "How long a step's claim on its execution lasts without renewal; a running step "
            "renews it every third of this, so a dead step is re-run soon after it expires."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    step_cancel_poll_seconds: float = Field(
        default=2.0,
        validation_alias="TARSY_STEP_CANCEL_POLL_SECONDS",
        gt=0,
        description=(
            "How often a running step reads its execution for a cancel; a cancel then "
            "cuts its model call, retries, backoff sleeps and tool calls short."
        ),
        json_schema_extra=_used_by("step"),
    )
    step_due_seconds: int = Field(
        default=45,
        validation_alias="TARSY_STEP_DUE_SECONDS",
        ge=1,
        description=(
            "How soon a published step must have been claimed; past it, the sweeper "
            "publishes it again (a lost message heals within this plus one sweep)."
        ),
        json_schema_extra=_used_by("ingest", "step", "api"),
    )
    step_timeout_seconds: int = Field(
        default=540,
        validation_alias="TARSY_STEP_TIMEOUT_SECONDS",
        ge=1,
        description=(
            "The step function's timeout; model attempts, retries and tools share a budget "
            "derived from it, so a step ends in time to record what happened."
        ),
        json_schema_extra=_used_by("step"),
    )
    sweeper_invoker: str = Field(
        default="",
        validation_alias="TARSY_SWEEPER_INVOKER",
        description=(
            "Service account e-mail whose Google OIDC token may call POST /sweep; "
            "empty: the sweeper takes the regular API key (local runs)."
        ),
        json_schema_extra=_used_by("api"),
    )
    sweeper_audience: str = Field(
        default="",
        validation_alias="TARSY_SWEEPER_AUDIENCE",
        description=(
            "Expected audience of the sweeper's OIDC token (the api function URL); "
            "required with TARSY_SWEEPER_INVOKER (the api refuses to start without it)."
        ),
        json_schema_extra=_used_by("api"),
    )
    slack_channel: str = Field(
        default="",
        validation_alias="TARSY_SLACK_CHANNEL",
        description=(
            "Slack channel for session notifications (an id such as C0123ABCD: threading "
            "reads its history). Empty: only chains with their own slack_channel notify."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    slack_token_secret: str | None = Field(
        default=None,
        validation_alias="TARSY_SLACK_TOKEN_SECRET",
        description=(
            "Secret Manager secret holding the Slack bot token (a name in this project, or "
            "projects/P/secrets/S[/versions/V]). Unset, and SLACK_BOT_TOKEN unset: no Slack."
        ),
        json_schema_extra=_used_by("ingest", "step", "api"),
    )
    slack_bot_token: SecretStr | None = Field(
        default=None,
        validation_alias="SLACK_BOT_TOKEN",
        description="Slack bot token (xoxb-...) given directly, for local runs.",
        json_schema_extra=_used_by("ingest", "step", "api"),
    )
    slack_base_url: str | None = Field(
        default=None,
        validation_alias="TARSY_SLACK_BASE_URL",
        description="Slack Web API base URL override (a proxy, a local fake), ending in /api/.",
        json_schema_extra=_used_by("ingest", "step", "api"),
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias="SLACK_SIGNING_SECRET",
        description=(
            "The Slack app's signing secret given directly, for local runs. With it (or "
            "TARSY_SLACK_SIGNING_SECRET_NAME) and a bot token, ingest serves POST "
            "/slack/events: questions asked in a session's Slack thread are answered there."
        ),
        json_schema_extra=_used_by("ingest"),
    )
    slack_signing_secret_name: str | None = Field(
        default=None,
        validation_alias="TARSY_SLACK_SIGNING_SECRET_NAME",
        description=(
            "Secret Manager secret holding the Slack app's signing secret (a name in this "
            "project, or projects/P/secrets/S[/versions/V]): turns on thread questions."
        ),
        json_schema_extra=_used_by("ingest"),
    )
    memory_scope_labels: tuple[str, ...] = Field(
        default=("cluster", "environment", "env"),
        validation_alias="TARSY_MEMORY_SCOPE_LABELS",
        description=(
            "Alert labels that say where an alert comes from (comma-separated): an earlier "
            "session is recalled only from the same values of these and the same alert source."
        ),
        json_schema_extra=_used_by("step"),
    )
    allowed_runbook_domains: tuple[str, ...] = Field(
        default=("github.com", "raw.githubusercontent.com"),
        validation_alias="TARSY_ALLOWED_RUNBOOK_DOMAINS",
        description=(
            "Hosts a runbook URL may name (comma-separated, exact host names); a runbook "
            "elsewhere is not fetched and the investigation goes on without it."
        ),
        json_schema_extra=_used_by("step"),
    )
    runbook_token_secret: str | None = Field(
        default=None,
        validation_alias="TARSY_RUNBOOK_TOKEN_SECRET",
        description=(
            "Secret Manager secret holding a token sent as 'Authorization: Bearer' with runbook "
            "fetches (a GitHub token for private repositories), to the allowed hosts only."
        ),
        json_schema_extra=_used_by("step"),
    )
    runbook_token: SecretStr | None = Field(
        default=None,
        validation_alias="TARSY_RUNBOOK_TOKEN",
        description="The runbook token given directly, for local runs.",
        json_schema_extra=_used_by("step"),
    )
    runbook_max_bytes: int = Field(
        default=256 * 1024,
        validation_alias="TARSY_RUNBOOK_MAX_BYTES",
        gt=0,
        le=512 * 1024,
        description=(
            "Largest runbook fetched; a larger one is not used (it is stored on the session "
            "document, which Firestore caps at 1 MiB with the alert)."
        ),
        json_schema_extra=_used_by("step"),
    )
    telemetry_cloud: bool = Field(
        default=False,
        validation_alias="TARSY_TELEMETRY_CLOUD",
        description="Export traces to Cloud Trace and metrics to Cloud Monitoring.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description=(
            "OTLP/HTTP collector base URL of traces and metrics (/v1/traces, /v1/metrics)."
        ),
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    trace_sample_ratio: float = Field(
        default=1.0,
        validation_alias="TARSY_TRACE_SAMPLE_RATIO",
        ge=0.0,
        le=1.0,
        description="Share of sessions traced, decided once at ingest and kept by every step.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    metric_logs: bool = Field(
        default=False,
        validation_alias="TARSY_METRIC_LOGS",
        description=(
            "Also write each step, model call and session end as a structured log line "
            "(field tarsy_metric), the source of Terraform's log-based metrics and alerts."
        ),
        json_schema_extra=_used_by("step", "api"),
    )
    retention_days: int = Field(
        default=90,
        validation_alias="TARSY_RETENTION_DAYS",
        ge=1,
        le=36500,
        description=(
            "Days a finished session and all its records are kept: the sweeper stamps "
            "expire_at on them, and Firestore TTL deletes them after it."
        ),
        json_schema_extra=_used_by("api"),
    )
    log_format: Literal["json", "console"] = Field(
        default="json",
        validation_alias="TARSY_LOG_FORMAT",
        description="json: Cloud Logging structured lines; console: human-readable.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )
    log_level: str = Field(
        default="INFO",
        validation_alias="TARSY_LOG_LEVEL",
        description="Root log level.",
        json_schema_extra=_used_by(*ALL_FUNCTIONS),
    )

    @field_validator("allowed_runbook_domains", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(host.strip().lower() for host in value.split(",") if host.strip())
        return value

    @field_validator("memory_scope_labels", mode="before")
    @classmethod
    def _label_list(cls, value: object) -> object:
        # Label names are case-sensitive (Prometheus): kept as written.
        if isinstance(value, str):
            return tuple(label.strip() for label in value.split(",") if label.strip())
        return value

    @model_validator(mode="after")
    def _sweeper_audience_with_its_invoker(self) -> Settings:
        """Fail closed: a sweeper token is checked against an audience, never against any.

        google-auth skips the audience check when given none, so an empty
        ``TARSY_SWEEPER_AUDIENCE`` beside an invoker would take that account's
        token minted for any service: the settings refuse to load instead.
        """
        if self.sweeper_invoker.strip() and not self.sweeper_audience.strip():
            raise ValueError(
                "TARSY_SWEEPER_INVOKER is set but TARSY_SWEEPER_AUDIENCE is empty: set it to "
                "the api's URL (the audience of Cloud Scheduler's OIDC token)"
            )
        return self

    @property
    def step_budget_seconds(self) -> float:
        """What a step's model attempts, retries and summaries may use of its timeout.

        The rest is kept for the commit and the publish: a tenth, at least 20 s,
        though a very short timeout keeps half for the model.
        """
        timeout = float(self.step_timeout_seconds)
        reserve = max(timeout * 0.1, min(20.0, timeout / 2))
        return timeout - reserve


def env_names(field_name: str, model: type[BaseModel] = Settings) -> list[str]:
    """Return the environment variable names that feed one field of ``model``."""
    return _environment_names(field_name, model.model_fields[field_name].validation_alias)


# What the ``tarsy`` CLI reads besides the settings above (its ClientSettings, in the
# development package; a test ties the two): known, so never reported as misspelt.
CLIENT_VARIABLES = frozenset(
    {
        "TARSY_INGEST_URL",
        "TARSY_API_URL",
        "TARSY_UI_URL",
        "TARSY_SIGNIN_KEY",
        "TARSY_USER",
        "TARSY_IAP_TOKEN",
    }
)


def functions_reading(field_name: str) -> list[str]:
    """Return the cloud functions that read one settings field."""
    extra = Settings.model_fields[field_name].json_schema_extra
    assert isinstance(extra, dict)
    functions = extra["functions"]
    assert isinstance(functions, list)
    return [str(f) for f in functions]


def unknown_tarsy_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``TARSY_*`` variables that no setting reads, most likely misspelt (sorted).

    Settings ignore variables they do not know, so a typo such as
    ``TARSY_DEFAULT_MODLE`` would otherwise leave the default in force silently.
    """
    known = {name for field in Settings.model_fields for name in env_names(field)}
    known |= CLIENT_VARIABLES
    names = os.environ if environ is None else environ
    return sorted(name for name in names if name.startswith("TARSY_") and name not in known)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read from the environment on first use."""
    return Settings()

"""The ``alert_sources:`` section of the YAML config: one block per native source.

Each source decides, per deployment, four things the payload cannot:

* which ``alert_type`` an alert gets: read from a field of the normalized
  alert (``alert_type_from``, a dotted path such as ``labels.alertname``) or
  fixed for the whole route (``alert_type``);
* which chain runs its alerts when no chain lists their type (``chain``): a
  PagerDuty incident or a CloudWatch alarm has no labels for ``alert_routes``
  to route by (``tarsy.config.routing``);
* how long a repeat of a finished alert is still a duplicate
  (``dedup_window_seconds``) and whether a resolution cancels a running
  investigation (``cancel_on_resolve``);
* how many alerts of one notification are processed
  (``max_alerts_per_notification``; see :mod:`tarsy.intake.sources.limits`).

Plus each source's own trust settings: PagerDuty's signing secrets (by name:
the values live in the environment or Secret Manager like the other keys) and
SNS's topic allow-list and signing-certificate host pattern.

Every model forbids unknown keys so a typo fails at load with the field's
path, like the rest of the config.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from tarsy._pydantic import DeferredModel
from tarsy.intake.sources.normalized import SourceName

ALERT_TYPE_PATTERN = r"^[\w.\-/: ]+$"
"""What tarsy accepts as an ``alert_type`` (the same rule as ``POST /alerts``)."""

ALERT_TYPE_MAX_LENGTH = 200

DEFAULT_CERT_HOST_PATTERN = r"^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$"
"""SNS's regional endpoints (``sns.<region>.amazonaws.com``, ``.com.cn`` in China)."""

_PATH_SEGMENT = r"[A-Za-z_][A-Za-z0-9_\-]*"
_FIELD_PATH = re.compile(rf"^{_PATH_SEGMENT}(\.{_PATH_SEGMENT})*$")
_TOPIC_ARN = re.compile(r"^arn:aws[a-z\-]*:sns:[a-z0-9\-]+:\d{12}:[A-Za-z0-9_\-]{1,256}(\.fifo)?$")
_SECRET_NAME = re.compile(r"^[A-Za-z0-9_./@:\-]+$")


def _check_alert_type(value: str) -> str:
    if not re.fullmatch(ALERT_TYPE_PATTERN, value) or len(value) > ALERT_TYPE_MAX_LENGTH:
        raise ValueError("must be 1 to 200 letters, digits, spaces or any of _ . - / :")
    return value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from e
    return value


def _check_topic_arn(value: str) -> str:
    if not _TOPIC_ARN.fullmatch(value):
        raise ValueError("not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)")
    return value


def _check_secret_name(value: str) -> str:
    if not _SECRET_NAME.fullmatch(value):
        raise ValueError(
            "a secret reference is the name of an environment variable or a Secret "
            "Manager secret (no spaces)"
        )
    return value


AlertTypeName = Annotated[str, AfterValidator(_check_alert_type)]
TopicArn = Annotated[str, AfterValidator(_check_topic_arn)]
SecretName = Annotated[str, AfterValidator(_check_secret_name)]


class _Strict(DeferredModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Strict):
    """Settings every native source has."""

    source: ClassVar[SourceName]
    default_alert_type_from: ClassVar[str]
    alert_type_roots: ClassVar[frozenset[str]]
    """First segments ``alert_type_from`` may start with: keys of the normalized ``data``."""
    roots_need_key: ClassVar[frozenset[str]] = frozenset()
    """Roots that are maps: a path must name a key inside them (``labels.<name>``)."""

    alert_type_from: str | None = Field(
        default=None,
        description="dotted path into the alert's data whose value is the alert type "
        "(default: the source's own, see type_path)",
    )
    alert_type: AlertTypeName | None = Field(
        default=None, description="a fixed alert type for every alert of this route"
    )
    chain: str | None = Field(
        default=None,
        min_length=1,
        description="the chain of this source's alerts that no chain claims by alert type "
        "(before alert_routes; unset: the rules decide)",
    )
    dedup_window_seconds: int = Field(
        default=3600,
        ge=0,
        le=30 * 24 * 3600,
        description="a repeat this long after its session ended is still a duplicate",
    )
    cancel_on_resolve: bool = Field(
        default=False, description="a resolution cancels a still-running investigation"
    )
    max_alerts_per_notification: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="alerts of one notification processed; the rest are reported ignored",
    )

    @field_validator("alert_type_from")
    @classmethod
    def _path_known(cls, path: str | None) -> str | None:
        if path is None:
            return None
        if not _FIELD_PATH.fullmatch(path):
            raise ValueError(f"{path!r} is not a dotted path such as 'labels.alertname'")
        root, _, rest = path.partition(".")
        if root not in cls.alert_type_roots:
            known = ", ".join(sorted(cls.alert_type_roots))
            raise ValueError(f"{cls.source} alerts have no field {root!r} (known: {known})")
        if root in cls.roots_need_key and not rest:
            raise ValueError(f"must name a key inside {root!r}: '{root}.<name>'")
        return path

    @field_validator("alert_type")
    @classmethod
    def _one_way_to_type(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("alert_type_from") is not None:
            raise ValueError("give either 'alert_type' (fixed) or 'alert_type_from', not both")
        return value

    @property
    def type_path(self) -> str:
        """The dotted path the alert type is read from (unless ``alert_type`` is fixed)."""
        return self.alert_type_from or self.default_alert_type_from


_GROUPED_ROOTS = frozenset({"labels", "annotations", "commonLabels"})


class AlertmanagerSourceConfig(SourceConfig):
    """``alert_sources.alertmanager``: Prometheus Alertmanager webhooks (version 4)."""

    source: ClassVar[SourceName] = "alertmanager"
    default_alert_type_from: ClassVar[str] = "labels.alertname"
    alert_type_roots: ClassVar[frozenset[str]] = _GROUPED_ROOTS
    roots_need_key: ClassVar[frozenset[str]] = _GROUPED_ROOTS


class GrafanaSourceConfig(SourceConfig):
    """``alert_sources.grafana``: Grafana unified-alerting webhook contact points."""

    source: ClassVar[SourceName] = "grafana"
    default_alert_type_from: ClassVar[str] = "labels.alertname"
    alert_type_roots: ClassVar[frozenset[str]] = _GROUPED_ROOTS
    roots_need_key: ClassVar[frozenset[str]] = _GROUPED_ROOTS


class PagerDutySourceConfig(SourceConfig):
    """``alert_sources.pagerduty``: PagerDuty V3 webhook subscriptions.

    With ``signing_secrets`` set, a valid ``X-PagerDuty-Signature`` authenticates
    a delivery and no API key is needed. Several names support rotation: a
    delivery is accepted if it verifies with any of them.
    """

    source: ClassVar[SourceName] = "pagerduty"
    default_alert_type_from: ClassVar[str] = "service"
    alert_type_roots: ClassVar[frozenset[str]] = frozenset(
        {"service", "title", "urgency", "priority", "escalation_policy"}
    )

    signing_secrets: list[SecretName] = Field(
        default_factory=list,
        description="names of the env variables / Secret Manager secrets holding signing secrets",
    )
    incident_notes: bool = Field(
        default=False,
        description="when a session of a PagerDuty incident completes, add a note to the "
        "incident with the executive summary and the session's link (needs a REST API key: "
        "TARSY_PAGERDUTY_TOKEN_SECRET, and TARSY_PAGERDUTY_FROM_EMAIL)",
    )

    @field_validator("signing_secrets")
    @classmethod
    def _unique_secrets(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError("lists a name twice")
        return names


class SnsSourceConfig(SourceConfig):
    """``alert_sources.sns``: AWS SNS HTTPS subscriptions carrying CloudWatch alarms.

    Every message's signature is verified against the certificate at its
    ``SigningCertURL``, fetched only over https from a host matching
    ``cert_host_pattern``; only topics in ``allowed_topic_arns`` are accepted
    (an empty list accepts none).
    """

    source: ClassVar[SourceName] = "sns"
    default_alert_type_from: ClassVar[str] = "Trigger.Namespace"
    alert_type_roots: ClassVar[frozenset[str]] = frozenset(
        {"AlarmName", "AWSAccountId", "Region", "Trigger", "TopicArn"}
    )

    allowed_topic_arns: list[TopicArn] = Field(
        default_factory=list, description="topics whose messages are accepted"
    )
    cert_host_pattern: Annotated[str, AfterValidator(_check_regex)] = Field(
        default=DEFAULT_CERT_HOST_PATTERN,
        description="regular expression the whole host of SigningCertURL/SubscribeURL must match",
    )


class AlertSourcesConfig(_Strict):
    """``alert_sources:``: one block per native alert source, each optional."""

    alertmanager: AlertmanagerSourceConfig = Field(default_factory=AlertmanagerSourceConfig)
    grafana: GrafanaSourceConfig = Field(default_factory=GrafanaSourceConfig)
    pagerduty: PagerDutySourceConfig = Field(default_factory=PagerDutySourceConfig)
    sns: SnsSourceConfig = Field(default_factory=SnsSourceConfig)

    def for_source(self, source: SourceName) -> SourceConfig:
        """Return the block of one source.

        Args:
            source: The source name.

        Returns:
            Its settings.
        """
        config: SourceConfig = getattr(self, source)
        return config

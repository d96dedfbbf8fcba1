"""The one shape every alert source is turned into: :class:`NormalizedAlert`.

Each sender groups, names and signs its alerts differently; the ingest route
should not care. One notification becomes a list of normalized alerts, one per
alert it carries (TARSy's unit is one session per firing alert), each with:

* ``event``: what the route does with it. ``firing`` may start a session,
  ``resolved`` records the resolution on the session it belongs to, ``ignored``
  is acknowledged and reported with its ``reason`` (a PagerDuty event type
  that starts nothing, a CloudWatch ``INSUFFICIENT_DATA``, an alert beyond the
  per-notification cap).
* ``fingerprint``: the sender's identity of *this occurrence* — the dedup key
  (for ``POST /alerts``, which deduplicates nothing, a fresh id per call).
  A redelivery of the same alert carries the same fingerprint.
* ``alert_key``: the identity of the alert *across its lifecycle*, which is what
  a resolution must be matched against. It equals ``fingerprint`` for every
  source but CloudWatch, whose occurrence is "alarm ARN + state-change time"
  while the alarm itself is its ARN: an ``OK`` arrives with a new state-change
  time, so only the ARN links it to the ``ALARM`` it resolves.

Both keys are free text from the sender (ARNs hold ``/`` and ``:``), so
:attr:`NormalizedAlert.dedup_key` and :attr:`NormalizedAlert.resolve_key`
give fixed-length digests, namespaced by source, that are safe as Firestore
document ids.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.models import MCPSelection

SourceName = Literal["alertmanager", "grafana", "pagerduty", "sns"]
"""The alert sources with their own ingest route."""

SOURCE_NAMES: tuple[SourceName, ...] = ("alertmanager", "grafana", "pagerduty", "sns")

IntakeSource = SourceName | Literal["api"]
"""Every door into intake: the native senders, and tarsy's own ``POST /alerts`` (``api``)."""

AlertEvent = Literal["firing", "resolved", "ignored"]
"""What a normalized alert asks of the route."""


def source_digest(source: str, key: str) -> str:
    """Return a Firestore-safe, source-namespaced digest of a sender's key.

    Args:
        source: The source name.
        key: The sender's key (fingerprint or alert key).

    Returns:
        ``"{source}-{sha256 hex}"``: no ``/``, fixed length, one namespace per source.
    """
    digest = hashlib.sha256(f"{source}\n{key}".encode()).hexdigest()
    return f"{source}-{digest}"


class NormalizedAlert(DeferredModel):
    """One alert of one notification, in the shape the ingest route consumes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: IntakeSource
    fingerprint: str = Field(min_length=1, description="identity of this occurrence (dedup)")
    alert_key: str = Field(min_length=1, description="identity across firing and resolution")
    event: AlertEvent
    reason: str | None = Field(default=None, description="why an alert is ignored")
    alert_type: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(description="what the investigation reads about the alert")
    runbook: str | None = None
    # What only tarsy's own POST /alerts carries (a native sender has none of it):
    # a chosen set of MCP servers and tools, the caller's metadata (else the
    # fingerprint is recorded), and the data's text as the caller wrote it.
    mcp: MCPSelection | None = None
    metadata: dict[str, Any] | None = None
    data_text: str | None = None
    # Native senders repeat an alert until it resolves: claim its fingerprint so that a
    # repeat names the running session. A POST /alerts is one investigation per call.
    deduplicate: bool = True

    @property
    def dedup_key(self) -> str:
        """A document id for the dedup claim of this occurrence."""
        return source_digest(self.source, self.fingerprint)

    @property
    def resolve_key(self) -> str:
        """A document id under which a resolution finds the session it resolves."""
        return source_digest(self.source, self.alert_key)

    def ignored(self, reason: str) -> NormalizedAlert:
        """Return a copy of this alert marked ``ignored`` for ``reason``.

        Args:
            reason: Why the route should acknowledge it and do nothing.

        Returns:
            The copy; this alert is unchanged.
        """
        return self.model_copy(update={"event": "ignored", "reason": reason})

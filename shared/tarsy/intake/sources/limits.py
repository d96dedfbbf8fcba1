"""The per-notification alert cap: the first N are processed, the rest reported ignored.

A single Alertmanager or Grafana notification can carry hundreds of alerts
(a whole cluster going down in one group). Each firing alert costs a session,
and the ingest route must answer within the sender's timeout, so
``max_alerts_per_notification`` bounds the work done per request.

Refusing the notification with 413 was the alternative. It is worse: the
sender retries the same oversized body forever and *no* alert gets
investigated, while truncation investigates the first N and tells the sender,
alert by alert, which ones were dropped (``ignored``, with the reason). The
order is the sender's own, so the choice is stable across redeliveries: a
redelivered notification caps the same alerts, and the dedup keys of the
first N match the first delivery's.
"""

from __future__ import annotations

from collections.abc import Sequence

from tarsy.intake.sources.normalized import NormalizedAlert


def over_cap_reason(limit: int) -> str:
    """Return the ``reason`` given to alerts beyond the cap.

    Args:
        limit: The configured ``max_alerts_per_notification``.

    Returns:
        A sentence naming the setting and its value.
    """
    return f"beyond max_alerts_per_notification ({limit}) for one notification"


def cap_alerts(alerts: Sequence[NormalizedAlert], limit: int) -> list[NormalizedAlert]:
    """Keep the first ``limit`` alerts as they are and mark the rest ``ignored``.

    Every alert counts towards the cap, whatever its event: a resolution costs
    a write just as a new session does. An alert that was already ``ignored``
    keeps its own reason.

    Args:
        alerts: The notification's alerts, in the sender's order.
        limit: How many to process (at least 1).

    Returns:
        A new list of the same length and order.

    Raises:
        ValueError: If ``limit`` is below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    reason = over_cap_reason(limit)
    return [
        alert if i < limit or alert.event == "ignored" else alert.ignored(reason)
        for i, alert in enumerate(alerts)
    ]

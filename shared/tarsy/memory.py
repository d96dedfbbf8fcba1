"""Memory of earlier incidents: which earlier sessions a new alert recalls, and how it is told.

Design constraint: history is a lead to check, never evidence. When a new
alert matches earlier sessions (the same alert fingerprint, or the same alert
name on the same workload), the investigating agents' opening names what those
sessions concluded and what people said of them (confirmed, or corrected to
another cause), marked HISTORY TO VERIFY against today's evidence. Recall is
capped (:data:`RECALL_CAP`) and prefers sessions people judged (a confirmed
or corrected one tells more than an unjudged one), then the closer match
(fingerprint before workload), then the newest; each one says how long
before this alert it was. Everything here is pure: the keys a session is found
by (:func:`memory_keys`), the choice among the candidates (:func:`recall`)
and the prompt's text (:func:`history_text`); the engine runs the one query
through the persistence port (``earlier_sessions``) as a session starts and
stores what it recalled on the session, so every opening, a replay and the
page read the same history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from tarsy.evidence.alert import alert_facts
from tarsy.models import RecalledSession, Session

RECALL_CAP = 3
# How many earlier sessions the query reads, of which RECALL_CAP are told.
CANDIDATES = 20
CONCLUSION_CHARS = 800
KEY_CHARS = 400

FINGERPRINT_PREFIX = "fp:"
WORKLOAD_PREFIX = "wl:"

# Labels that name a workload, most specific first (a pod's name is cut to its owner's).
_WORKLOAD_LABELS = (
    "deployment",
    "statefulset",
    "daemonset",
    "cronjob",
    "job_name",
    "service",
    "app_kubernetes_io_name",
    "app",
    "container",
    "pod",
)
# A Deployment's pod: NAME-<ReplicaSet hash>-<5 chars>; a StatefulSet's: NAME-<ordinal>.
_DEPLOYMENT_POD = re.compile(r"^(?P<name>.+)-[a-z0-9]{6,10}-[a-z0-9]{5}$")
_STATEFUL_POD = re.compile(r"^(?P<name>.+)-\d+$")

HISTORY_HEAD = (
    "HISTORY TO VERIFY (not evidence): earlier tarsy investigations of alerts like this one, "
    "with what people said of them. The cause may differ today: check each against today's "
    "evidence before you rely on it, never cite it as evidence, and say in your analysis "
    "whether today's evidence confirms it."
)


def workload_of(labels: Mapping[str, str]) -> str:
    """``namespace/workload`` named by an alert's labels ('' when none names a workload)."""
    for label in _WORKLOAD_LABELS:
        value = labels.get(label, "").strip()
        if not value:
            continue
        if label == "pod":
            found = _DEPLOYMENT_POD.match(value) or _STATEFUL_POD.match(value)
            value = found["name"] if found else value
        return f"{labels.get('namespace', '').strip()}/{value}"
    return ""


def _fingerprint(alert_data: str) -> str:
    """The sender's fingerprint of the (first firing) alert, if it carries one."""
    try:
        data: Any = json.loads(alert_data)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, Mapping):
        return ""
    alerts = data.get("alerts")
    if isinstance(alerts, list):
        firing = [a for a in alerts if isinstance(a, Mapping) and a.get("status") != "resolved"]
        data = firing[0] if firing else data
    value = data.get("fingerprint")
    return value.strip() if isinstance(value, str) else ""


def memory_keys(session: Session) -> list[str]:
    """The keys later alerts find ``session`` by: its fingerprint, its name on its workload.

    Args:
        session: A session, as it starts.

    Returns:
        ``fp:FINGERPRINT`` when the alert carries one, and ``wl:NAME|NAMESPACE/WORKLOAD``
        when its labels name a workload; none for free text.
    """
    keys: list[str] = []
    if fingerprint := _fingerprint(session.alert_data):
        keys.append(FINGERPRINT_PREFIX + fingerprint)
    facts = alert_facts(session.alert_data)
    if workload := workload_of(facts.labels):
        name = facts.name or session.alert_type
        keys.append(f"{WORKLOAD_PREFIX}{name}|{workload}")
    return [key[:KEY_CHARS] for key in keys]


def _conclusion(session: Session) -> str:
    text = (session.executive_summary or session.final_analysis or "").strip()
    if len(text) <= CONCLUSION_CHARS:
        return text
    return text[: CONCLUSION_CHARS - 1].rstrip() + "…"


def _tier(session: Session) -> int:
    """0: people confirmed it or wrote the real cause; 1: not judged; 2: judged wrong, no cause."""
    if session.feedback is None:
        return 1
    if session.feedback.verdict == "right" or session.feedback.corrected:
        return 0
    return 2


def recall(
    session: Session, candidates: Iterable[Session], cap: int = RECALL_CAP
) -> list[RecalledSession]:
    """The earlier sessions ``session`` recalls, best first, at most ``cap``.

    Args:
        session: The new session (its ``memory_keys`` set).
        candidates: Earlier sessions sharing one of its keys (the query's answer).
        cap: How many to keep.

    Returns:
        Finished earlier sessions that concluded something or were judged: judged ones
        first (confirmed or corrected), then by match (fingerprint, then workload),
        then newest first.
    """
    keys = set(session.memory_keys)
    chosen: list[tuple[tuple[int, int, float], RecalledSession]] = []
    for earlier in candidates:
        shared = keys & set(earlier.memory_keys)
        if earlier.session_id == session.session_id or not shared:
            continue
        if earlier.created_at >= session.created_at or not earlier.status.is_terminal:
            continue
        conclusion = _conclusion(earlier)
        if not conclusion and earlier.feedback is None:
            continue
        by_fingerprint = any(k.startswith(FINGERPRINT_PREFIX) for k in shared)
        workload = next(
            (k.partition("|")[2] for k in sorted(shared) if k.startswith(WORKLOAD_PREFIX)), ""
        )
        recalled = RecalledSession(
            session_id=earlier.session_id,
            alert_type=earlier.alert_type,
            status=earlier.status,
            created_at=earlier.created_at,
            matched_by="fingerprint" if by_fingerprint else "workload",
            workload=workload,
            conclusion=conclusion,
            feedback=earlier.feedback,
        )
        rank = (_tier(earlier), 0 if by_fingerprint else 1, -earlier.created_at.timestamp())
        chosen.append((rank, recalled))
    chosen.sort(key=lambda pair: pair[0])
    return [recalled for _, recalled in chosen[:cap]]


def age_text(span: timedelta) -> str:
    """How long before this alert, in the largest whole unit (``3 days``, ``5 hours``)."""
    seconds = max(int(span.total_seconds()), 0)
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "less than a minute"


def _said(recalled: RecalledSession) -> str:
    feedback = recalled.feedback
    if feedback is None:
        return "People's feedback: none (not confirmed by anyone)."
    if feedback.verdict == "right":
        return f"People's feedback: CONFIRMED as right by {feedback.by}."
    judged = "WRONG" if feedback.verdict == "wrong" else "PARTLY RIGHT"
    if feedback.root_cause:
        return (
            f"People's feedback: {judged}, by {feedback.by}; the real root cause was: "
            f"{feedback.root_cause}"
        )
    return f"People's feedback: {judged}, by {feedback.by} (no cause given)."


def history_text(recalled: Sequence[RecalledSession], now: datetime) -> str:
    """The recalled sessions as the opening tells them, each with its age (pure).

    Args:
        recalled: What the session recalled, best first.
        now: When this alert's session was created (ages count back from it).

    Returns:
        One numbered entry per session: how long before, how it matched, how it ended,
        its conclusion and people's feedback; '' when nothing was recalled.
    """
    entries: list[str] = []
    for n, one in enumerate(recalled, start=1):
        match = (
            "the same alert (fingerprint)"
            if one.matched_by == "fingerprint"
            else f"the same alert on the same workload ({one.workload})"
        )
        lines = [
            f"{n}. Session {one.session_id}, {age_text(now - one.created_at)} before this alert: "
            f"{match}, {one.alert_type}, {one.status.value}.",
            f"   Its conclusion then: {one.conclusion or '(none written)'}",
            f"   {_said(one)}",
        ]
        entries.append("\n".join(lines))
    return "\n".join(entries)

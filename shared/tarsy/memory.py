"""Memory of earlier incidents: which earlier sessions a new alert recalls, and how it is told.

Design constraint: history is a lead to check, never evidence. When a new
alert matches earlier sessions (the same alert fingerprint, or the same alert
name on the same workload), the investigating agents' opening names what those
sessions concluded and what people said of them (confirmed, or corrected to
another cause), marked HISTORY TO VERIFY against today's evidence.

Memory keeps its boundaries: every key names where the alert comes from (its
source, and the values of the scope labels, ``TARSY_MEMORY_SCOPE_LABELS``:
``cluster``, ``environment``, ``env`` by default), so staging never recalls
production, nor one cluster another with the same namespace and Deployment;
a workload is named only with its namespace (a ``service`` label alone names
no workload: it would be shared by every namespace). A session people
confirmed or corrected also carries its keys marked judged
(:func:`keys_after_feedback`), and :func:`find_earlier` reads those by their
own query: under a flapping alert, the newest candidates alone would crowd
the judged ones out of the ranking that prefers them. Recall is
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
from typing import Any, Protocol

from tarsy.evidence.alert import alert_facts
from tarsy.models import Feedback, RecalledSession, Session

RECALL_CAP = 3
# How many earlier sessions the query reads, of which RECALL_CAP are told.
CANDIDATES = 20
CONCLUSION_CHARS = 800
KEY_CHARS = 400

FINGERPRINT_PREFIX = "fp:"
WORKLOAD_PREFIX = "wl:"
# A judged session's keys again, under this prefix: found by a query of their own.
JUDGED_PREFIX = "judged:"
DEFAULT_SCOPE_LABELS = ("cluster", "environment", "env")

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
    """``namespace/workload`` named by an alert's labels ('' when none names a workload).

    Without a namespace nothing is named: ``/orders`` would be one key for every
    namespace's ``orders``.
    """
    if not labels.get("namespace", "").strip():
        return ""
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


def scope_of(source: str, labels: Mapping[str, str], scope_labels: Sequence[str]) -> str:
    """Where an alert comes from: its source and its scope labels' values (pure).

    ``source=alertmanager,cluster=prod-eu``: a label the alert lacks is left out,
    so two alerts share a scope only when they agree on every label either has.
    """
    parts = [f"source={source}"]
    for label in scope_labels:
        if value := labels.get(label, "").strip():
            parts.append(f"{label}={value}")
    return ",".join(parts)


def memory_keys(session: Session, scope_labels: Sequence[str] | None = None) -> list[str]:
    """The keys later alerts find ``session`` by: its fingerprint, its name on its workload.

    Args:
        session: A session, as it starts.
        scope_labels: The labels that say where an alert comes from; None: the
            deployment's ``TARSY_MEMORY_SCOPE_LABELS`` (the engine passes none).

    Returns:
        ``fp:SCOPE|FINGERPRINT`` when the alert carries one, and
        ``wl:SCOPE|NAME|NAMESPACE/WORKLOAD`` when its labels name a workload in a
        namespace; none for free text. SCOPE is :func:`scope_of`'s.
    """
    if scope_labels is None:
        # Imported here: the settings are read once per process, and only when needed.
        from tarsy.settings import get_settings

        scope_labels = get_settings().memory_scope_labels
    facts = alert_facts(session.alert_data)
    scope = scope_of(session.source, facts.labels, scope_labels)
    keys: list[str] = []
    if fingerprint := _fingerprint(session.alert_data):
        keys.append(f"{FINGERPRINT_PREFIX}{scope}|{fingerprint}")
    if workload := workload_of(facts.labels):
        name = facts.name or session.alert_type
        keys.append(f"{WORKLOAD_PREFIX}{scope}|{name}|{workload}")
    return [key[:KEY_CHARS] for key in keys]


def judged(feedback: Feedback | None) -> bool:
    """Whether people confirmed a session or wrote its real cause (it is recalled first)."""
    return feedback is not None and (feedback.verdict == "right" or feedback.corrected)


def judged_keys(keys: Iterable[str]) -> list[str]:
    """``keys`` as a judged session carries them, for the query of judged sessions."""
    return [JUDGED_PREFIX + key for key in keys if not key.startswith(JUDGED_PREFIX)]


def keys_after_feedback(keys: Sequence[str], feedback: Feedback | None) -> list[str]:
    """A session's memory keys once ``feedback`` is its latest: judged ones added or dropped."""
    plain = [key for key in keys if not key.startswith(JUDGED_PREFIX)]
    return plain + judged_keys(plain) if judged(feedback) else plain


class EarlierSessionsPort(Protocol):
    """The persistence port's query of earlier sessions (tarsy.persistence.ports)."""

    async def earlier_sessions(
        self, keys: Sequence[str], before: datetime, limit: int
    ) -> list[Session]:
        """Sessions created before ``before`` sharing one of ``keys``, newest first."""
        ...


async def find_earlier(
    store: EarlierSessionsPort, keys: Sequence[str], before: datetime, limit: int = CANDIDATES
) -> list[Session]:
    """The candidates for :func:`recall`: the newest sharing a key, and the newest judged.

    Two queries: the second finds sessions people confirmed or corrected by
    their judged keys, however many newer unjudged ones share the plain keys.
    """
    plain = [key for key in keys if not key.startswith(JUDGED_PREFIX)]
    if not plain:
        return []
    newest = await store.earlier_sessions(plain, before, limit)
    judged_ones = await store.earlier_sessions(judged_keys(plain), before, limit)
    seen: set[str] = set()
    found: list[Session] = []
    for one in [*judged_ones, *newest]:
        if one.session_id not in seen:
            seen.add(one.session_id)
            found.append(one)
    return found


def _conclusion(session: Session) -> str:
    text = (session.executive_summary or session.final_analysis or "").strip()
    if len(text) <= CONCLUSION_CHARS:
        return text
    return text[: CONCLUSION_CHARS - 1].rstrip() + "…"


def _tier(session: Session) -> int:
    """0: people confirmed it or wrote the real cause; 1: not judged; 2: judged wrong, no cause."""
    if session.feedback is None:
        return 1
    return 0 if judged(session.feedback) else 2


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
    keys = {key for key in session.memory_keys if not key.startswith(JUDGED_PREFIX)}
    chosen: list[tuple[tuple[int, int, float], RecalledSession]] = []
    for earlier in candidates:
        theirs = {key.removeprefix(JUDGED_PREFIX) for key in earlier.memory_keys}
        shared = keys & theirs
        if earlier.session_id == session.session_id or not shared:
            continue
        if earlier.created_at >= session.created_at or not earlier.status.is_terminal:
            continue
        conclusion = _conclusion(earlier)
        if not conclusion and earlier.feedback is None:
            continue
        by_fingerprint = any(k.startswith(FINGERPRINT_PREFIX) for k in shared)
        workload = next(
            (k.rpartition("|")[2] for k in sorted(shared) if k.startswith(WORKLOAD_PREFIX)), ""
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

"""Memory of earlier incidents: the keys, the choice of sessions recalled, and the opening."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tarsy.agent.prompts import initial_messages
from tarsy.app import Deps
from tarsy.config import load_config
from tarsy.config.schema import ResolvedAgentConfig
from tarsy.engine.chains import remember
from tarsy.engine.transitions import with_memory
from tarsy.memory import (
    HISTORY_HEAD,
    age_text,
    history_text,
    judged_keys,
    memory_keys,
    recall,
    workload_of,
)
from tarsy.models import ExecutionStatus, Feedback, RecalledSession, Session
from tarsy.persistence.store import firestore_fields
from tarsy.persistence.updates import SessionUpdate
from tarsy.settings import Settings

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
RITA = "rita.responder@example.com"
CAUSE = "the checkout ConfigMap points DB_HOST at the retired database"


def alertmanager_alert(pod: str, fingerprint: str = "a1b2c3", value: str = "7") -> str:
    """One alert as a native Alertmanager source stores it."""
    return json.dumps(
        {
            "status": "firing",
            "fingerprint": fingerprint,
            "labels": {"alertname": "PodCrashLooping", "namespace": "shop", "pod": pod},
            "annotations": {"summary": f"restarted {value} times"},
        }
    )


def session(session_id: str, age: timedelta, alert_data: str, **fields: Any) -> Session:
    values: dict[str, Any] = {
        "session_id": session_id,
        "alert_type": "PodCrashLooping",
        "alert_data": alert_data,
        "chain_id": "default",
        "status": ExecutionStatus.COMPLETED,
        "created_at": NOW - age,
        **fields,
    }
    made = Session.model_validate(values)
    return made.model_copy(update={"memory_keys": memory_keys(made)})


def corrected(at: datetime = NOW) -> Feedback:
    return Feedback(verdict="wrong", root_cause=CAUSE, by=RITA, at=at)


# ─── keys ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("labels", "workload"),
    [
        ({"namespace": "shop", "pod": "checkout-7d9f8b6c5-x2x9z"}, "shop/checkout"),
        ({"namespace": "db", "pod": "postgres-0"}, "db/postgres"),
        ({"namespace": "shop", "deployment": "checkout", "pod": "other-1"}, "shop/checkout"),
        ({"service": "orders"}, ""),  # no namespace: it would be every namespace's orders
        ({"namespace": "shop", "severity": "page"}, ""),
    ],
)
def test_the_workload_is_named_by_its_labels_a_pod_by_its_owner(
    labels: dict[str, str], workload: str
) -> None:
    assert workload_of(labels) == workload


def test_a_native_alert_is_found_by_its_fingerprint_and_its_name_on_its_workload() -> None:
    made = session("s-1", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z"))
    assert made.memory_keys == [
        "fp:source=api|a1b2c3",
        "wl:source=api|PodCrashLooping|shop/checkout",
    ]


def test_two_pods_of_one_deployment_share_the_workload_key() -> None:
    first = session("s-1", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z", "f1"))
    second = session("s-2", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-k8p2q", "f2"))
    assert set(first.memory_keys) & set(second.memory_keys) == {
        "wl:source=api|PodCrashLooping|shop/checkout"
    }


def test_free_text_alerts_have_no_key_and_recall_nothing() -> None:
    assert session("s-1", timedelta(0), "checkout is down again").memory_keys == []


# ─── what is recalled ────────────────────────────────────────────────────────


def test_people_judged_sessions_come_first_then_fingerprint_matches_then_the_newest() -> None:
    now = session("new", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z"))
    pod = "checkout-7d9f8b6c5-aaaaa"
    earlier = [
        session("unjudged-new", timedelta(hours=1), alertmanager_alert(pod, "zz"),
                executive_summary="OOM"),
        session("fingerprint", timedelta(days=9), alertmanager_alert(pod), executive_summary="x"),
        session("confirmed", timedelta(days=5), alertmanager_alert(pod, "zz"),
                executive_summary="a bad image", feedback=Feedback(verdict="right", by=RITA)),
        session("corrected", timedelta(days=2), alertmanager_alert(pod, "zz"),
                executive_summary="OOM", feedback=corrected()),
        session("wrong-no-cause", timedelta(minutes=5), alertmanager_alert(pod, "zz"),
                executive_summary="DNS", feedback=Feedback(verdict="wrong", by=RITA)),
    ]  # fmt: skip
    recalled = recall(now, earlier, cap=10)
    assert [r.session_id for r in recalled] == [
        "corrected", "confirmed", "fingerprint", "unjudged-new", "wrong-no-cause",
    ]  # fmt: skip
    assert [r.session_id for r in recall(now, earlier)] == ["corrected", "confirmed", "fingerprint"]
    assert recalled[2].matched_by == "fingerprint" and recalled[0].matched_by == "workload"
    assert recalled[0].workload == "shop/checkout"


def test_itself_later_running_unrelated_and_empty_sessions_are_not_recalled() -> None:
    data = alertmanager_alert("checkout-7d9f8b6c5-x2x9z")
    now = session("new", timedelta(0), data)
    earlier = [
        now,
        session("later", -timedelta(hours=1), data, executive_summary="x"),
        session("running", timedelta(hours=1), data, status=ExecutionStatus.ACTIVE),
        session("other", timedelta(hours=1), alertmanager_alert("cart-1", "other-fp"),
                executive_summary="x"),
        session("nothing-said", timedelta(hours=1), data, status=ExecutionStatus.FAILED),
    ]  # fmt: skip
    assert recall(now, earlier) == []


def test_a_long_conclusion_is_cut() -> None:
    data = alertmanager_alert("checkout-7d9f8b6c5-x2x9z")
    now = session("new", timedelta(0), data)
    [one] = recall(now, [session("old", timedelta(days=1), data, final_analysis="x" * 5000)])
    assert len(one.conclusion) == 800 and one.conclusion.endswith("…")


# ─── how it is told ──────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (timedelta(days=3, hours=5), "3 days"),
        (timedelta(hours=1, minutes=59), "1 hour"),
        (timedelta(minutes=2), "2 minutes"),
        (timedelta(seconds=10), "less than a minute"),
    ],
)
def test_an_age_is_said_in_its_largest_whole_unit(span: timedelta, text: str) -> None:
    assert age_text(span) == text


def test_the_history_says_how_old_each_session_is_and_what_people_said() -> None:
    recalled = [
        RecalledSession(session_id="s-1", alert_type="PodCrashLooping",
                        status=ExecutionStatus.COMPLETED, created_at=NOW - timedelta(days=3),
                        matched_by="workload", workload="shop/checkout",
                        conclusion="The pod runs out of memory.", feedback=corrected()),
        RecalledSession(session_id="s-2", alert_type="PodCrashLooping",
                        status=ExecutionStatus.COMPLETED, created_at=NOW - timedelta(hours=5),
                        matched_by="fingerprint", conclusion="A bad image tag.",
                        feedback=Feedback(verdict="right", by=RITA)),
        RecalledSession(session_id="s-3", alert_type="PodCrashLooping",
                        status=ExecutionStatus.TIMED_OUT, created_at=NOW - timedelta(days=40),
                        matched_by="fingerprint"),
    ]  # fmt: skip
    assert history_text(recalled, NOW).splitlines() == [
        "1. Session s-1, 3 days before this alert: the same alert on the same workload "
        "(shop/checkout), PodCrashLooping, completed.",
        "   Its conclusion then: The pod runs out of memory.",
        f"   People's feedback: WRONG, by {RITA}; the real root cause was: {CAUSE}",
        "2. Session s-2, 5 hours before this alert: the same alert (fingerprint), "
        "PodCrashLooping, completed.",
        "   Its conclusion then: A bad image tag.",
        f"   People's feedback: CONFIRMED as right by {RITA}.",
        "3. Session s-3, 40 days before this alert: the same alert (fingerprint), "
        "PodCrashLooping, timed_out.",
        "   Its conclusion then: (none written)",
        "   People's feedback: none (not confirmed by anyone).",
    ]


# ─── the acceptance: a second alert on the same workload ─────────────────────


class EarlierSessions:
    """The persistence port's query, over sessions in memory (as Firestore answers it)."""

    def __init__(self, *sessions: Session, fails: bool = False) -> None:
        self.sessions = list(sessions)
        self.fails = fails
        self.asked: list[tuple[list[str], datetime, int]] = []

    async def earlier_sessions(
        self, keys: Sequence[str], before: datetime, limit: int
    ) -> list[Session]:
        self.asked.append((list(keys), before, limit))
        if self.fails:
            raise ConnectionError("firestore unavailable")
        found = [
            s for s in self.sessions if set(s.memory_keys) & set(keys) and s.created_at < before
        ]
        return sorted(found, key=lambda s: s.created_at, reverse=True)[:limit]


def deps_of(store: EarlierSessions, **settings: object) -> Deps:
    fields = {"settings": Settings(**settings), "store": store}
    return cast(Deps, type("D", (), fields)())


@pytest.fixture(scope="module")
def agent() -> ResolvedAgentConfig:
    return load_config(Settings()).resolve("default", 0, 0)


def _between(text: str, label: str) -> str:
    found = re.search(rf"<<<BEGIN {label}>>>\n(.*)\n<<<END {label}>>>", text, re.DOTALL)
    assert found is not None, label
    return found[1]


async def test_a_second_alert_on_the_same_workload_opens_with_the_first_cause_as_history(
    agent: ResolvedAgentConfig,
) -> None:
    first = session("first", timedelta(days=2),
                    alertmanager_alert("checkout-7d9f8b6c5-x2x9z", "f1"),
                    executive_summary="The checkout pods run out of memory.",
                    feedback=corrected(NOW - timedelta(days=1)), verdict="wrong")  # fmt: skip
    second = Session(session_id="second", alert_type="PodCrashLooping", chain_id="default",
                     alert_data=alertmanager_alert("checkout-7d9f8b6c5-k8p2q", "f2", "9"),
                     created_at=NOW)  # fmt: skip
    store = EarlierSessions(first)
    remembered = await remember(second, deps_of(store))
    assert [r.session_id for r in remembered.recalled] == ["first"]
    keys = ["fp:source=api|f2", "wl:source=api|PodCrashLooping|shop/checkout"]
    # The newest sharing a key, then the newest that people judged (their own query).
    assert store.asked == [(keys, NOW, 20), (judged_keys(keys), NOW, 20)]

    opening = initial_messages(agent, remembered)[1].content
    history = _between(opening, "HISTORY")
    assert CAUSE in history and "2 days before this alert" in history
    assert "The checkout pods run out of memory." in history
    # Marked as history to verify, after the alert, and never inside the alert's own data.
    head = opening.index(HISTORY_HEAD)
    assert head < opening.index("<<<BEGIN HISTORY>>>")
    assert opening.index("<<<END ALERT DATA>>>") < head
    assert "HISTORY TO VERIFY (not evidence)" in HISTORY_HEAD
    assert CAUSE not in _between(opening, "ALERT DATA")


async def test_a_session_with_nothing_to_recall_opens_as_before(
    agent: ResolvedAgentConfig,
) -> None:
    alone = session("alone", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z"))
    remembered = await remember(alone, deps_of(EarlierSessions()))
    assert remembered.recalled == [] and remembered.memory_keys == alone.memory_keys
    assert "HISTORY" not in initial_messages(agent, remembered)[1].content


async def test_a_failed_lookup_starts_the_session_without_history_but_with_its_keys() -> None:
    alone = session("alone", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z"))
    remembered = await remember(alone, deps_of(EarlierSessions(fails=True)))
    assert remembered.recalled == []
    assert remembered.memory_keys == [
        "fp:source=api|a1b2c3",
        "wl:source=api|PodCrashLooping|shop/checkout",
    ]


async def test_recall_off_asks_nothing_yet_keeps_the_keys_for_later_sessions() -> None:
    store = EarlierSessions()
    alone = session("alone", timedelta(0), alertmanager_alert("checkout-7d9f8b6c5-x2x9z"))
    remembered = await remember(alone, deps_of(store, TARSY_MEMORY_RECALL=0))
    assert store.asked == [] and remembered.memory_keys == alone.memory_keys


def test_what_was_recalled_is_written_with_the_stage_start_as_plain_fields() -> None:
    recalled = [
        RecalledSession(session_id="s-1", alert_type="PodCrashLooping",
                        status=ExecutionStatus.COMPLETED, created_at=NOW, matched_by="workload",
                        feedback=corrected())
    ]  # fmt: skip
    fields = firestore_fields(with_memory(SessionUpdate(current_stage=0), ["wl:x"], recalled))
    assert fields["memory_keys"] == ["wl:x"] and fields["current_stage"] == 0
    [written] = fields["recalled"]
    assert isinstance(written, dict) and written["feedback"]["root_cause"] == CAUSE
    assert RecalledSession.model_validate(written) == recalled[0]

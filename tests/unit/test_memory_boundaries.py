"""Memory keeps its boundaries (issue 42): where an alert comes from, and judged sessions first."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tarsy.api.handlers import handle
from tarsy.app import Deps
from tarsy.http.request import HttpRequest
from tarsy.memory import (
    CANDIDATES,
    JUDGED_PREFIX,
    find_earlier,
    keys_after_feedback,
    memory_keys,
    recall,
)
from tarsy.models import ExecutionStatus, Feedback, Session
from tarsy.persistence.audit_log import ActionWrites
from tarsy.persistence.store import Store
from tarsy.persistence.updates import SessionUpdate
from tarsy.settings import Settings
from tarsy.tools.masking import MaskingConfig
from tests.unit.signin import RESPONDER, SignIn, signin_server

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
CAUSE = "the orders ConfigMap points DB_HOST at the retired database"
SCOPE = ("cluster", "environment", "env")


def alert(fingerprint: str = "f1", **labels: str) -> str:
    """One Alertmanager alert on shop/orders, with more labels."""
    return json.dumps(
        {
            "status": "firing",
            "fingerprint": fingerprint,
            "labels": {
                "alertname": "KubePodCrashLooping",
                "namespace": "shop",
                "deployment": "orders",
                **labels,
            },
        }
    )


def session(
    session_id: str,
    age: timedelta,
    alert_data: str,
    *,
    source: str = "alertmanager",
    scope: Sequence[str] = SCOPE,
    **fields: Any,
) -> Session:
    made = Session.model_validate(
        {
            "session_id": session_id,
            "alert_type": "KubePodCrashLooping",
            "alert_data": alert_data,
            "chain_id": "default",
            "status": ExecutionStatus.COMPLETED,
            "created_at": NOW - age,
            "source": source,
            "executive_summary": f"{session_id} concluded something",
            **fields,
        }
    )
    keys = keys_after_feedback(memory_keys(made, scope), made.feedback)
    return made.model_copy(update={"memory_keys": keys})


class Firestore:
    """The persistence port's query as Firestore answers it: array-contains-any, newest first."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self.sessions = list(sessions)
        self.queries = 0

    async def earlier_sessions(
        self, keys: Sequence[str], before: datetime, limit: int
    ) -> list[Session]:
        self.queries += 1
        found = [s for s in self.sessions if set(s.memory_keys) & set(keys)]
        found = [s for s in found if s.created_at < before]
        return sorted(found, key=lambda s: s.created_at, reverse=True)[:limit]


async def recalled_by(new: Session, earlier: Sequence[Session]) -> list[str]:
    candidates = await find_earlier(Firestore(earlier), new.memory_keys, new.created_at)
    return [r.session_id for r in recall(new, candidates, cap=10)]


# ─── where an alert comes from ───────────────────────────────────────────────


async def test_two_clusters_with_the_same_namespace_and_deployment_recall_nothing_of_each_other(
) -> None:  # fmt: skip
    # The same fingerprint too: a sender that leaves the cluster out of it.
    eu = session("eu", timedelta(days=1), alert(cluster="prod-eu"),
                 feedback=Feedback(verdict="wrong", root_cause=CAUSE, by=RESPONDER))  # fmt: skip
    us = session("us", timedelta(hours=1), alert(cluster="prod-us"))
    new_eu = session("new-eu", timedelta(0), alert(cluster="prod-eu"))
    new_us = session("new-us", timedelta(0), alert(cluster="prod-us"))
    assert not set(eu.memory_keys) & set(us.memory_keys)
    assert await recalled_by(new_us, [eu]) == []
    assert await recalled_by(new_eu, [us]) == []
    # Each still recalls its own cluster's.
    assert await recalled_by(new_eu, [eu, us]) == ["eu"]
    assert await recalled_by(new_us, [eu, us]) == ["us"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"environment": "staging"}, {"environment": "production"}),
        ({"env": "staging"}, {"env": "prod"}),
        ({"env": "prod"}, {}),  # one says where it is from, the other does not
    ],
)
async def test_staging_never_recalls_production(
    first: dict[str, str], second: dict[str, str]
) -> None:
    old = session("old", timedelta(days=1), alert(**first))
    new = session("new", timedelta(0), alert(**second))
    assert await recalled_by(new, [old]) == []


async def test_the_same_alert_from_another_source_is_another_boundary() -> None:
    old = session("old", timedelta(days=1), alert(), source="grafana")
    new = session("new", timedelta(0), alert(), source="alertmanager")
    assert await recalled_by(new, [old]) == []
    assert await recalled_by(new, [session("same", timedelta(days=1), alert())]) == ["same"]


async def test_the_scope_labels_are_configurable() -> None:
    west = session("west", timedelta(days=1), alert(region="west"), scope=("region",))
    east = session("east", timedelta(0), alert(region="east"), scope=("region",))
    assert await recalled_by(east, [west]) == []
    # With the default labels, a region is not a boundary.
    assert await recalled_by(
        session("east", timedelta(0), alert(region="east")),
        [session("west", timedelta(days=1), alert(region="west"))],
    ) == ["west"]
    assert Settings(TARSY_MEMORY_SCOPE_LABELS="region, cluster").memory_scope_labels == (
        "region",
        "cluster",
    )
    assert Settings().memory_scope_labels == SCOPE


async def test_a_service_without_a_namespace_shares_no_key_across_namespaces() -> None:
    data = json.dumps({"labels": {"alertname": "HighLatency", "service": "orders"}})
    old = session("old", timedelta(days=1), data)
    new = session("new", timedelta(0), data)
    assert old.memory_keys == []  # no fingerprint, and no workload without its namespace
    assert await recalled_by(new, [old]) == []


# ─── judged sessions are found by their own query ────────────────────────────


def flapping(corrected_age: timedelta, newer: int) -> list[Session]:
    """A corrected session, then ``newer`` unjudged ones of the same alert, newer each."""
    correction = Feedback(verdict="wrong", root_cause=CAUSE, by=RESPONDER)
    corrected = session("corrected", corrected_age, alert(fingerprint="old"), feedback=correction)
    flaps = [
        session(f"flap-{n:02d}", timedelta(minutes=10 * (n + 1)), alert(fingerprint=f"f{n}"))
        for n in range(newer)
    ]
    return [corrected, *flaps]


async def test_a_corrected_session_older_than_30_newer_ones_is_still_recalled_first() -> None:
    earlier = flapping(timedelta(days=40), newer=30)
    new = session("new", timedelta(0), alert(fingerprint="new"))
    store = Firestore(earlier)
    candidates = await find_earlier(store, new.memory_keys, new.created_at)
    recalled = recall(new, candidates)
    assert recalled[0].session_id == "corrected"
    assert recalled[0].feedback is not None and recalled[0].feedback.root_cause == CAUSE
    assert store.queries == 2
    # The newest candidates alone would never have reached it.
    newest = await Firestore(earlier).earlier_sessions(new.memory_keys, NOW, CANDIDATES)
    assert "corrected" not in [s.session_id for s in newest]


def test_only_a_confirmed_or_corrected_session_carries_judged_keys() -> None:
    keys = ["fp:source=api|x", "wl:source=api|A|shop/orders"]
    right = Feedback(verdict="right", by=RESPONDER)
    corrected = Feedback(verdict="partly_right", root_cause=CAUSE, by=RESPONDER)
    wrong_no_cause = Feedback(verdict="wrong", by=RESPONDER)
    assert keys_after_feedback(keys, right) == [*keys, *(JUDGED_PREFIX + k for k in keys)]
    assert keys_after_feedback(keys, corrected) == keys_after_feedback(keys, right)
    # A later verdict that judges nothing takes the judged keys away again.
    assert keys_after_feedback(keys_after_feedback(keys, right), wrong_no_cause) == keys
    assert keys_after_feedback(keys, None) == keys


# ─── the feedback route marks the session judged ─────────────────────────────


class FeedbackStore:
    def __init__(self, session: Session) -> None:
        self.sessions = {session.session_id: session}
        self.updates: list[SessionUpdate] = []

    async def get_session(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def commit_action(self, writes: ActionWrites) -> None:
        if writes.session is not None:
            self.updates.append(writes.session)


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


async def test_a_correction_through_the_api_adds_the_judged_keys(signin: SignIn) -> None:
    judged = session("s-1", timedelta(days=1), alert())
    store = FeedbackStore(judged)
    config = type("C", (), {"alert_masking": MaskingConfig()})()
    fields = {"settings": signin.settings(), "store": cast(Store, store), "config": config}
    request = HttpRequest(
        method="POST",
        path="/sessions/s-1/feedback",
        headers={**signin.headers(RESPONDER), "content-type": "application/json"},
        body=json.dumps({"verdict": "wrong", "root_cause": CAUSE}).encode(),
    )
    response = await handle(request, cast(Deps, type("D", (), fields)()))
    assert response.status == 200, response.body
    [update] = store.updates
    assert update.memory_keys == [
        *judged.memory_keys,
        *(JUDGED_PREFIX + k for k in judged.memory_keys),
    ]

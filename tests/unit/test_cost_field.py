"""A cost is stored as integer nano-dollars under its own field, the legacy one still read.

Design constraint: an older deploy wrote float dollars to ``cost`` and, during a
rolling deploy, would read an int there as dollars or add float dollars to it;
so this version writes and increments ``cost_nanos`` only, and reads the cost as
``cost_nanos`` plus whatever ``cost`` holds (disjoint increments).
"""

from __future__ import annotations

from tarsy.models import AgentExecution, LLMInteraction, Session
from tarsy.persistence._firestore import COST_FIELD, document_of, with_cost


def session(**fields: object) -> Session:
    return Session.model_validate(
        {"session_id": "s", "alert_type": "a", "alert_data": "d", "chain_id": "c", **fields}
    )


def test_a_session_and_an_execution_store_their_cost_as_nanos_under_their_own_field() -> None:
    stored = document_of(session(cost=424_000))
    assert stored[COST_FIELD] == 424_000 and "cost" not in stored
    execution = AgentExecution(
        execution_id="e", session_id="s", stage=0, agent="investigator",
        strategy="single-call", provider="default", cost=7,
    )  # fmt: skip
    assert document_of(execution)[COST_FIELD] == 7


def test_a_record_never_incremented_keeps_its_cost_field() -> None:
    call = LLMInteraction(step=1, model="m", provider="p", request={}, cost=5)
    assert document_of(call)["cost"] == 5


def test_the_cost_read_back_is_the_new_field_plus_the_legacy_dollars() -> None:
    # Created by this version, then added to by an older one during the rollout.
    mixed = with_cost({"session_id": "s", COST_FIELD: 424_000, "cost": 0.000001})
    assert session(**mixed).cost == 425_000
    # Written before the split: int nano-dollars in ``cost``.
    assert session(**with_cost({COST_FIELD: 1, "cost": 2})).cost == 3


def test_a_document_from_an_older_deploy_reads_its_float_dollars() -> None:
    legacy = with_cost({"cost": 0.000424})
    assert session(**legacy).cost == 424_000


def test_a_stored_session_round_trips_its_cost() -> None:
    original = session(cost=123_456_789)
    assert Session.model_validate(with_cost(document_of(original))).cost == 123_456_789

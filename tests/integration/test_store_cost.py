"""A cost is added to ``cost_nanos`` on the emulator, and a legacy ``cost`` still counts.

Design constraint: during a rolling deploy an older version adds float dollars
to ``cost`` while this one adds integer nano-dollars to ``cost_nanos``; neither
corrupts the other's field, and this version reads the sum.
"""

from __future__ import annotations

from google.cloud import firestore

from tarsy.models import AgentExecution, Session
from tarsy.persistence._firestore import COST_FIELD, EXECUTIONS, SESSIONS
from tarsy.persistence.step_values import StepCommit
from tarsy.persistence.store import Store


async def test_a_step_adds_nanos_to_their_own_field_beside_an_older_deploys_dollars(
    store: Store,
) -> None:
    session = Session(session_id="s-cost", alert_type="a", alert_data="d", chain_id="c")
    execution = AgentExecution(
        execution_id="e-cost", session_id="s-cost", stage=0, agent="investigator",
        strategy="single-call", provider="default",
    )  # fmt: skip
    await store.create_session(session)
    await store.create_execution(execution, [])
    db = store.client
    refs = [
        db.collection(SESSIONS).document("s-cost"),
        db.collection(EXECUTIONS).document("e-cost"),
    ]
    for ref in refs:
        stored = (await ref.get()).to_dict() or {}
        assert stored[COST_FIELD] == 0 and "cost" not in stored
        # An older deploy's step, during the rollout: float dollars into ``cost``.
        await ref.update({"cost": firestore.Increment(0.25)})

    committed = await store.commit_step(
        StepCommit(execution_id="e-cost", session_id="s-cost", step=1, next_step=2, cost=125)
    )

    assert committed
    for ref in refs:
        stored = (await ref.get()).to_dict() or {}
        assert (stored[COST_FIELD], stored["cost"]) == (125, 0.25)
    read_session = await store.get_session("s-cost")
    read_execution = await store.get_execution("e-cost")
    assert read_session is not None and read_execution is not None
    assert read_session.cost == read_execution.cost == 250_000_125  # exact

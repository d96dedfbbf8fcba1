"""The store's ports: each caller's own, and ``Persistence`` only their union.

Design constraint: a caller depends on the operations it runs, so the ports are
cut by caller (steps, chains, sweeps, session reads, intake, audited actions)
and :class:`~tarsy.persistence.ports.Persistence` restates none of them. The one
adapter, :class:`~tarsy.persistence.store.Store`, offers every port with the
same parameters (mypy checks the assignments below; the test checks by name).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tarsy.notify.ledger import FirestoreLedger, SlackEventLedger
from tarsy.persistence import ports
from tarsy.persistence.store import Store

NARROW: list[Any] = [
    ports.StepStore,
    ports.ChainStore,
    ports.SweepStore,
    ports.SessionReader,
    ports.SessionPages,
    ports.AlertIntake,
    ports.AuditedActions,
    ports.LeaseRenewal,
    ports.ToolListCache,
    ports.ProgressStore,
]


def operations(port: Any) -> set[str]:
    """The public methods a Protocol declares, its bases' included."""
    return {
        name
        for klass in port.__mro__
        if klass not in (object,) and getattr(klass, "_is_protocol", False)
        for name, value in vars(klass).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def _typed_by_mypy(store: Store) -> None:
    # Never called: mypy proves the Store satisfies every port structurally.
    step: ports.StepStore = store
    chain: ports.ChainStore = store
    sweep: ports.SweepStore = store
    pages: ports.SessionPages = store
    whole: ports.Persistence = store
    del step, chain, sweep, pages, whole
    ledger: SlackEventLedger = store.ledger  # the ledger's adapter is on the store's client
    del ledger


def test_the_ledger_lives_on_the_stores_client() -> None:
    store = Store(client=object())  # type: ignore[arg-type]  # never called: no I/O here
    assert isinstance(store.ledger, FirestoreLedger)
    assert store.ledger is store.ledger and store.ledger._db is store.client


def test_persistence_declares_nothing_of_its_own() -> None:
    own = {
        name
        for name, value in vars(ports.Persistence).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }
    assert own == set()
    assert operations(ports.Persistence) == set().union(*(operations(p) for p in NARROW))


@pytest.mark.parametrize("port", NARROW, ids=lambda port: port.__name__)
def test_the_store_offers_each_port_with_its_parameters(port: Any) -> None:
    for name in operations(port):
        declared = inspect.signature(getattr(port, name)).parameters
        offered = inspect.signature(getattr(Store, name)).parameters
        assert list(declared) == list(offered)[: len(declared)], name


def test_each_port_is_narrow_and_no_caller_gets_an_unused_write() -> None:
    whole = len(operations(ports.Persistence))
    assert all(len(operations(port)) <= whole // 2 for port in NARROW)
    assert "record_action" not in operations(ports.Persistence)
    assert not hasattr(Store, "record_action")

"""Deterministic Firestore document ids: they sort in write order and repeat on redelivery."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from tarsy.persistence.step_values import conversation_is_current
from tarsy.persistence.store import record_id, stage_id


@pytest.mark.parametrize(
    ("step", "n", "expected"),
    [(0, 0, "0000-000"), (1, 2, "0001-002"), (42, 17, "0042-017"), (9999, 999, "9999-999")],
)
def test_record_id_format(step: int, n: int, expected: str) -> None:
    assert record_id(step, n) == expected


def test_record_ids_sort_in_step_then_sequence_order() -> None:
    # Steps stay far below 10 000 (max_iterations <= 200) and a step writes < 1000 records.
    pairs = [(step, n) for step in (0, 1, 2, 9, 10, 99, 100, 250, 1000) for n in (0, 1, 9, 10, 999)]
    shuffled = pairs[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled, key=lambda p: record_id(*p)) == pairs


def test_record_id_is_deterministic_and_unique() -> None:
    assert record_id(3, 4) == record_id(3, 4)
    ids = {record_id(step, n) for step in range(50) for n in range(50)}
    assert len(ids) == 2500


@pytest.mark.parametrize(("index", "expected"), [(0, "00"), (7, "07"), (10, "10"), (99, "99")])
def test_stage_id(index: int, expected: str) -> None:
    assert stage_id(index) == expected


def test_stage_ids_sort_in_order() -> None:
    assert sorted(stage_id(i) for i in (10, 2, 0, 1, 99)) == ["00", "01", "02", "10", "99"]


def test_a_conversation_read_after_the_execution_was_last_written_is_the_claimed_one() -> None:
    written = datetime(2026, 11, 28, 0, 0, 0, tzinfo=UTC)
    assert conversation_is_current(written, written)
    assert conversation_is_current(written, written + timedelta(microseconds=1))


def test_a_conversation_read_before_the_execution_was_last_written_is_read_again() -> None:
    written = datetime(2026, 11, 28, 0, 0, 0, tzinfo=UTC)
    assert not conversation_is_current(written, written - timedelta(microseconds=1))

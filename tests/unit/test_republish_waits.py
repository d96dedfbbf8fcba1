"""Re-publishing an overdue step: each further copy of the same step waits twice as long.

A step re-published once and still unclaimed an interval later is more likely
queued behind a backlog than lost again; copies at a fixed interval would fill
that queue with the same step (the burst of ``make chaos`` showed it).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tarsy.engine.messages import MAX_REPUBLISH_DOUBLINGS, due_after_republish
from tarsy.models import AgentExecution

NOW = datetime(2026, 11, 28, 4, 0, tzinfo=UTC)
DUE = timedelta(seconds=45)


def _execution(republished: int) -> AgentExecution:
    return AgentExecution(
        execution_id="s-s00-a00", session_id="s", stage=0, agent="a", strategy="react",
        provider="p", step=3, republished=republished,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("republished", "intervals"), [(0, 1), (1, 2), (2, 4), (3, 8), (4, 8), (40, 8)]
)
def test_each_further_republish_waits_twice_as_long_up_to_eight_intervals(
    republished: int, intervals: int
) -> None:
    assert due_after_republish(_execution(republished), NOW, DUE) == NOW + DUE * intervals


def test_the_longest_wait_stays_well_inside_a_sessions_default_half_hour() -> None:
    longest = DUE * 2**MAX_REPUBLISH_DOUBLINGS
    assert longest == timedelta(minutes=6)
    assert longest < timedelta(minutes=30) / 4


def test_an_execution_written_before_the_count_existed_reads_as_never_republished() -> None:
    stored = _execution(0).model_dump(mode="python")
    del stored["republished"]
    assert AgentExecution.model_validate(stored).republished == 0

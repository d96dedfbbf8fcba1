"""The lifecycle table: every named transition, legal and illegal, and who may write fields."""

from __future__ import annotations

import ast
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tarsy.engine import transitions as t
from tarsy.errors import IllegalTransitionError
from tarsy.models import AgentExecution, ErrorInfo, ExecutionStatus, Session
from tarsy.persistence.store import firestore_fields

S = ExecutionStatus
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
ERROR = ErrorInfo(message="boom", code="x")
ALL = list(ExecutionStatus)


def execution(status: ExecutionStatus) -> AgentExecution:
    return AgentExecution(
        execution_id="e1", session_id="s1", stage=0, agent="a", strategy="react",
        provider="default", status=status, iteration=2, max_iterations=5,
    )  # fmt: skip


def session(status: ExecutionStatus) -> Session:
    return Session(session_id="s1", alert_type="t", alert_data="d", chain_id="c", status=status)


PROGRESS = t.ExecutionUpdate(iteration=3, consecutive_failures=0)

EXECUTION_MOVES: dict[str, tuple[Callable[[AgentExecution], object], set[ExecutionStatus]]] = {
    "complete": (lambda e: t.complete_execution(e, "done", NOW, progress=PROGRESS), {S.ACTIVE}),
    "fail": (lambda e: t.fail_execution(e, ERROR, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "pause": (lambda e: t.pause_execution(e, ERROR, progress=PROGRESS), {S.ACTIVE}),
    "resume": (lambda e: t.resume_execution(e, 3, NOW), {S.PAUSED}),
    "cancel": (lambda e: t.cancel_execution(e, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "time out": (lambda e: t.time_out_execution(e, ERROR, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "dead-letter": (
        lambda e: t.dead_letter_execution(e, ERROR, NOW),
        {S.PENDING, S.ACTIVE, S.PAUSED},
    ),
}

SESSION_MOVES: dict[str, tuple[Callable[[Session], object], set[ExecutionStatus]]] = {
    "start": (lambda s: t.start_stage_of_session(s, 0, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "complete": (lambda s: t.complete_session(s, NOW, final_analysis="a"), {S.ACTIVE}),
    "fail": (lambda s: t.fail_session(s, ERROR, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "pause": (lambda s: t.pause_session(s, ERROR), {S.ACTIVE}),
    "resume": (lambda s: t.resume_session(s, NOW), {S.PAUSED}),
    "request cancel": (t.request_cancel, {S.PENDING, S.ACTIVE, S.PAUSED}),
    "cancel": (lambda s: t.cancel_session(s, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "time out": (lambda s: t.time_out_session(s, ERROR, NOW), {S.PENDING, S.ACTIVE, S.PAUSED}),
    "dead-letter": (
        lambda s: t.dead_letter_session(s, ERROR, NOW),
        {S.PENDING, S.ACTIVE, S.PAUSED},
    ),
}


@pytest.mark.parametrize("current", ALL)
@pytest.mark.parametrize("move", list(EXECUTION_MOVES))
def test_execution_transition_table(move: str, current: ExecutionStatus) -> None:
    apply, legal_from = EXECUTION_MOVES[move]
    if current in legal_from:
        assert isinstance(apply(execution(current)), t.ExecutionUpdate)
    else:
        with pytest.raises(IllegalTransitionError) as refused:
            apply(execution(current))
        assert refused.value.current == current.value


@pytest.mark.parametrize("current", ALL)
@pytest.mark.parametrize("move", list(SESSION_MOVES))
def test_session_transition_table(move: str, current: ExecutionStatus) -> None:
    apply, legal_from = SESSION_MOVES[move]
    if current in legal_from:
        assert isinstance(apply(session(current)), t.SessionUpdate)
    else:
        with pytest.raises(IllegalTransitionError):
            apply(session(current))


def test_the_named_illegal_cases_are_refused() -> None:
    with pytest.raises(IllegalTransitionError, match="'cancelled' to 'completed'"):
        t.complete_execution(execution(S.CANCELLED), "late", NOW, progress=PROGRESS)
    with pytest.raises(IllegalTransitionError, match="'completed' to 'resumed'"):
        t.resume_session(session(S.COMPLETED), NOW)
    with pytest.raises(IllegalTransitionError):
        t.fail_session(session(S.ACTIVE), ERROR, NOW, status=S.COMPLETED)
    with pytest.raises(IllegalTransitionError):
        t.end_stage(S.ACTIVE, NOW)


def test_updates_write_exactly_the_fields_they_set() -> None:
    resumed = t.resume_execution(execution(S.PAUSED), 3, NOW)
    # ``error`` is set to None on purpose: it is written (cleared), not left alone.
    assert firestore_fields(resumed) == {
        "status": "active", "max_iterations": 8, "error": None, "due_at": NOW,
    }  # fmt: skip
    cancelled = firestore_fields(t.cancel_execution(execution(S.ACTIVE), NOW))
    assert cancelled == {
        "status": "cancelled", "completed_at": NOW, "lease_owner": None, "lease_until": None,
        "due_at": None,
    }  # fmt: skip
    retry = t.count_iteration(execution(S.ACTIVE), failed_attempt=True, next_due=NOW)
    assert firestore_fields(retry) == {"consecutive_failures": 1, "due_at": NOW}
    failed = firestore_fields(t.fail_session(session(S.ACTIVE), ERROR, NOW, status=S.TIMED_OUT))
    assert failed == {
        "status": "timed_out", "error": ERROR.model_dump(), "completed_at": NOW, "due_at": None,
        "retention_due": NOW,
    }  # fmt: skip


def test_every_way_out_clears_the_due_time() -> None:
    """A finished or paused record is never due: the sweeper must not re-publish it."""
    done = [
        t.complete_execution(execution(S.ACTIVE), "a", NOW, progress=t.ExecutionUpdate()),
        t.fail_execution(execution(S.ACTIVE), ERROR, NOW),
        t.pause_execution(execution(S.ACTIVE), ERROR, progress=t.ExecutionUpdate()),
        t.cancel_execution(execution(S.ACTIVE), NOW),
        t.time_out_execution(execution(S.ACTIVE), ERROR, NOW),
    ]
    for update in done[1:]:
        assert "due_at" in update.written() and update.due_at is None
    ended = [
        t.complete_session(session(S.ACTIVE), NOW),
        t.fail_session(session(S.ACTIVE), ERROR, NOW),
        t.cancel_session(session(S.ACTIVE), NOW),
        t.time_out_session(session(S.ACTIVE), ERROR, NOW),
        t.dead_letter_session(session(S.ACTIVE), ERROR, NOW),
        t.start_stage_of_session(session(S.PENDING), 0, NOW),
    ]
    for ending in ended:
        assert "due_at" in ending.written() and ending.due_at is None


# ─── no Firestore field names outside the store ───────────────────────────────

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "tarsy"
STORE_METHODS = {"update_session", "update_execution", "update_stage", "start_stage",
                 "commit_step", "write_progress"}  # fmt: skip
FIELD_NAMES = {"status", "completed_at", "lease_owner", "lease_until", "error", "final_analysis",
               "cancel_requested", "current_stage", "executive_summary"}  # fmt: skip


def _raw_field_dicts(path: Path) -> list[int]:
    """Lines where a dict literal keyed by a Firestore field name is passed to the store."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in STORE_METHODS:
            continue
        for argument in node.args:
            if isinstance(argument, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value in FIELD_NAMES for k in argument.keys
            ):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_store_passes_raw_field_dicts() -> None:
    offenders = {
        str(path.relative_to(LIBRARY)): lines
        for path in LIBRARY.rglob("*.py")
        if path.parent.name != "persistence" and (lines := _raw_field_dicts(path))
    }
    assert offenders == {}


def test_the_store_methods_take_typed_updates_only() -> None:
    import inspect

    from tarsy.persistence.store import Store

    for name in ("update_session", "update_execution", "update_stage"):
        annotation = list(inspect.signature(getattr(Store, name)).parameters.values())[-1]
        assert annotation.annotation in {"SessionUpdate", "ExecutionUpdate", "StageUpdate"}


def test_the_field_dict_check_finds_an_offender(tmp_path: Path) -> None:
    offender = tmp_path / "offender.py"
    offender.write_text(
        "async def f(store):\n"
        "    await store.update_session('s', {'status': 'completed'})\n"
        "    await store.update_session('s', update)\n",
        encoding="utf-8",
    )
    assert _raw_field_dicts(offender) == [2]


def test_every_way_a_session_ends_marks_it_for_the_retention_pass() -> None:
    ended = [
        t.complete_session(session(S.ACTIVE), NOW),
        t.fail_session(session(S.ACTIVE), ERROR, NOW),
        t.cancel_session(session(S.ACTIVE), NOW),
        t.time_out_session(session(S.PAUSED), ERROR, NOW),
        t.dead_letter_session(session(S.ACTIVE), ERROR, NOW),
        t.keep_until_answered(session(S.COMPLETED), NOW),
    ]
    assert [update.retention_due for update in ended] == [NOW] * len(ended)
    with pytest.raises(IllegalTransitionError):
        t.keep_until_answered(session(S.ACTIVE), NOW)

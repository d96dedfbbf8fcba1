"""``tarsy eval --resume``: which runs of an earlier report are kept, and how they are scored."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tarsy_dev.cli import _parser
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.cli import _earlier_runs
from tarsy_dev.evals.harness import EvalOptions, EvalProblem, RunResult
from tarsy_dev.evals.report import EvalReport, build_report, write_report
from tarsy_dev.evals.resume import kept_runs, run_key
from tarsy_dev.evals.scorer import score_run
from tarsy_dev.evals.subjects import ModelUnderTest
from tests.unit.evals.runs import standin_run

LOCAL_15B = "local: qwen2.5-coder-1.5b-instruct"


def _scenarios() -> list[Scenario]:
    return [load_scenario("oom-killed"), load_scenario("crashloop-bad-configmap")]


def _local(label: str = LOCAL_15B) -> list[ModelUnderTest]:
    return [ModelUnderTest(name="local", scripted=False, label=label)]


def _run(scenario: Scenario, attempt: int, *, status: str = "completed") -> RunResult:
    observation = standin_run(scenario).model_copy(
        update={"model": "local", "attempt": attempt, "status": status}
    )
    # A score as an older scorer might have written it: failed, whatever the run said.
    stale = score_run(scenario, observation.model_copy(update={"final_analysis": ""}))
    return RunResult(observation=observation, score=stale)


def _report(results: list[RunResult], label: str = LOCAL_15B) -> EvalReport:
    return build_report(
        results,
        _local(label),
        _scenarios(),
        duration_s=1200.0,
        repeat=3,
        priced_as="each model's own",
    )


def test_the_runs_an_earlier_report_holds_are_kept_and_scored_by_todays_scorer() -> None:
    oom, crashloop = _scenarios()
    previous = _report([_run(oom, 1), _run(crashloop, 1), _run(oom, 2)])
    kept = kept_runs(previous, _local(), _scenarios(), repeat=3)
    assert sorted(run_key(r) for r in kept) == [
        ("local", "crashloop-bad-configmap", 1),
        ("local", "oom-killed", 1),
        ("local", "oom-killed", 2),
    ]
    assert previous.models[0].passed == 0
    assert all(r.score.passed for r in kept)


def test_a_run_that_never_reached_an_end_or_lies_outside_this_evaluation_is_made_again() -> None:
    oom, crashloop = _scenarios()
    previous = _report([_run(oom, 1, status="error"), _run(crashloop, 3), _run(oom, 2)])
    kept = kept_runs(previous, _local(), [oom], repeat=2)
    assert [run_key(r) for r in kept] == [("local", "oom-killed", 2)]


def test_a_report_of_other_weights_behind_the_same_name_is_refused() -> None:
    oom, _ = _scenarios()
    previous = _report([_run(oom, 1)], label="local: qwen2.5-coder-0.5b-instruct")
    refused = re.escape("measured local as 'local: qwen2.5-coder-0.5b")
    with pytest.raises(EvalProblem, match=refused):
        kept_runs(previous, _local(), _scenarios(), repeat=3)


def test_kept_runs_are_skipped_and_the_rest_still_run() -> None:
    oom, crashloop = _scenarios()
    kept = kept_runs(_report([_run(oom, 1)]), _local(), _scenarios(), repeat=1)
    options = EvalOptions(
        root=Path("."),
        state_dir=Path("state"),
        scenarios=[oom.name, crashloop.name],
        models=_local(),
        skip=frozenset(run_key(r) for r in kept),
    )
    [model] = options.models
    assert not options.to_run(model, oom.name, 1)
    assert options.to_run(model, crashloop.name, 1) and options.to_run(model, oom.name, 2)


def _args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["eval", *argv])


def test_resume_reads_the_report_in_out_and_says_when_there_is_none(tmp_path: Path) -> None:
    oom, _ = _scenarios()
    out = tmp_path / "eval"
    with pytest.raises(EvalProblem, match="no earlier report at"):
        _earlier_runs(_args("--resume", "--out", str(out)), _local(), _scenarios())
    write_report(_report([_run(oom, 1)]), out)
    kept, earlier_s = _earlier_runs(_args("--resume", "--out", str(out)), _local(), _scenarios())
    assert [run_key(r) for r in kept] == [("local", "oom-killed", 1)] and earlier_s == 1200.0
    assert _earlier_runs(_args("--out", str(out)), _local(), _scenarios()) == ([], 0.0)
    (out / "results.json").write_text("{}")
    with pytest.raises(EvalProblem, match="is not a report tarsy eval wrote"):
        _earlier_runs(_args("--resume", "--out", str(out)), _local(), _scenarios())

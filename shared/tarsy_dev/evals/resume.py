"""Going on from an evaluation that stopped: which of its runs count, re-scored.

Design constraint: a real model on a CPU takes minutes per run, so the runs an
evaluation asks for may take longer than anyone keeps a machine quiet. The
report is rewritten after every run (:mod:`tarsy_dev.evals.cli`), and
``tarsy eval --resume`` keeps the runs it already holds and makes only the
missing ones. A kept run is the same measurement as a new one: same model
(its label names the weights), same scenario, same round, and it is scored
again by today's scorer, so every run in one report is scored the same way.
Everything here is pure; reading the file is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence

from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.harness import EvalProblem, RunResult
from tarsy_dev.evals.report import EvalReport
from tarsy_dev.evals.scorer import score_run
from tarsy_dev.evals.subjects import ModelUnderTest

RunKey = tuple[str, str, int]
"""A run's place in an evaluation: (model, scenario, round)."""


def run_key(result: RunResult) -> RunKey:
    """Where a run stands in its evaluation."""
    o = result.observation
    return (o.model, o.scenario, o.attempt)


def kept_runs(
    previous: EvalReport,
    models: Sequence[ModelUnderTest],
    scenarios: Sequence[Scenario],
    repeat: int,
) -> list[RunResult]:
    """The earlier report's runs that this evaluation would make, scored again.

    A run of a model the earlier report names with another label (other
    weights behind ``local``, another config) is not the same measurement, so
    it is refused rather than mixed in. A run that never reached an end
    (no session read) is made again.

    Raises:
        EvalProblem: A model of this evaluation was measured as something else.
    """
    labels = {m.model: m.label for m in previous.models}
    for model in models:
        earlier = labels.get(model.name)
        if earlier is not None and earlier != model.label:
            raise EvalProblem(
                f"--resume: the earlier report measured {model.name} as {earlier!r}, "
                f"this evaluation runs {model.label!r}; use another --out"
            )
    wanted = {m.name for m in models}
    by_name = {s.name: s for s in scenarios}
    kept: dict[RunKey, RunResult] = {}
    for result in previous.runs:
        name, scenario, attempt = run_key(result)
        if name not in wanted or scenario not in by_name or attempt > repeat:
            continue
        if result.observation.status == "error":
            continue
        score = score_run(by_name[scenario], result.observation).model_copy(
            update={"judge": result.score.judge, "judge_error": result.score.judge_error}
        )
        kept[run_key(result)] = RunResult(observation=result.observation, score=score)
    return list(kept.values())

"""``tarsy eval`` end to end: the scripted models through the whole local pipeline.

The real functions, Pub/Sub push, the Firestore emulator and the switchable demo
cluster over MCP: the stand-in must pass and the sloppy model fail on the same
scenarios (the scorer discriminates), one of them with a tool that times out
mid-investigation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tarsy.settings import Settings
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.evals.harness import EvalOptions, RunResult, run_evaluation
from tarsy_dev.evals.report import build_report
from tarsy_dev.evals.subjects import resolve_models
from tarsy_dev.fakes.fake_gemini import STAND_IN_LABEL
from tarsy_dev.fakes.sloppy import SLOPPY_LABEL

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["crashloop-bad-configmap", "invoice-red-herring", "media-evictions-flaky-api"]
METRICS_SCENARIOS = ["cpu-throttling-latency", "canary-5xx-by-version", "memory-leak-toward-oom"]


class Evaluation:
    """One evaluation of both scripted models on all six scenarios: one stack, started once."""

    def __init__(self, state_dir: Path) -> None:
        self.settings = Settings()
        self.models = resolve_models(["standin", "sloppy"], self.settings)
        self.seen: list[RunResult] = []
        options = EvalOptions(
            root=ROOT, state_dir=state_dir, scenarios=SCENARIOS + METRICS_SCENARIOS,
            models=self.models,
        )  # fmt: skip
        self.results = run_evaluation(options, self.settings, on_result=self.seen.append)

    def of(self, scenarios: list[str]) -> list[RunResult]:
        """The runs of ``scenarios``, in the order they ran."""
        return [r for r in self.results if r.observation.scenario in scenarios]


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    return Evaluation(tmp_path_factory.mktemp("eval") / "state")


def test_the_standin_passes_and_the_sloppy_model_fails_through_the_pipeline(
    evaluation: Evaluation,
) -> None:
    settings, models = evaluation.settings, evaluation.models
    assert evaluation.seen == evaluation.results
    results = evaluation.of(SCENARIOS)
    assert [(r.observation.scenario, r.observation.model) for r in results] == [
        (name, model) for name in SCENARIOS for model in ("standin", "sloppy")
    ]
    for result in results:
        observation, score = result.observation, result.score
        # The pipeline ran every session to the end; only the scorer tells them apart.
        assert observation.status == "completed", observation.error
        assert observation.input_tokens > 0 and observation.cost > 0
        assert observation.latency_s is not None and observation.latency_s > 0
        # Time inside the (fake) model, read from the interaction records the steps wrote.
        assert observation.model_s is not None and 0 < observation.model_s < observation.latency_s
        # Turns and cut replies from the same records; invalid calls from the timeline.
        assert observation.turns is not None and observation.turns >= 2  # and the summary
        assert (observation.cut_replies, observation.invalid_calls) == (0, 0)
        assert not observation.answered_without_tools
        label = STAND_IN_LABEL if observation.model == "standin" else SLOPPY_LABEL
        assert observation.final_analysis.startswith(label)
        assert observation.executive_summary.startswith(label)
        scenario = load_scenario(observation.scenario)
        if observation.model == "standin":
            assert score.passed, score.reasons
            assert score.fix_proposed, score.fixes  # its playbooks here propose the fix
            # Every playbook call went through MCP to the demo cluster (the calls gathered
            # before the model are the session's too, and counted apart). A scenario's
            # injected fault is met once, by whichever call comes first: since evidence
            # first, often the gather step's.
            own = [c for c in observation.tool_calls if not c.gathered]
            assert [c.tool for c in own] == [s.tool for s in scenario.playbook.steps]
            failing = {s.tool for s in scenario.playbook.steps if s.fails}
            assert failing <= {c.tool for c in observation.tool_calls if c.is_error}
        else:
            assert not score.passed
            # Its own calls are irrelevant; the needed evidence may still have been gathered
            # before it answered (those calls are the session's own), so no tool recall here.
            assert score.forbidden[0].found
            assert not score.fix_proposed
    timed_out = [
        c
        for r in results
        if r.observation.model == "standin"
        and r.observation.scenario == "media-evictions-flaky-api"
        for c in r.observation.tool_calls
        if c.is_error and c.tool == "events_list"
    ]
    assert len(timed_out) == 1  # the scenario's one injected timeout, met once

    report = build_report(
        results, models, [load_scenario(n) for n in SCENARIOS], duration_s=1, repeat=1,
        priced_as=settings.default_model,
    )  # fmt: skip
    assert report.harness_ok
    assert [(m.model, m.pass_rate) for m in report.models] == [("standin", 100.0), ("sloppy", 0.0)]
    assert [(m.fix_proposed, m.cut_replies) for m in report.models] == [(3, 0), (0, 0)]


def test_the_metrics_scenarios_pass_for_the_standin_and_fail_for_the_sloppy_model(
    evaluation: Evaluation,
) -> None:
    """The real Prometheus and prometheus-mcp-server answer the metrics tool calls."""
    results = evaluation.of(METRICS_SCENARIOS)
    assert len(results) == 2 * len(METRICS_SCENARIOS)
    for result in results:
        observation, score = result.observation, result.score
        assert observation.status == "completed", observation.error
        scenario = load_scenario(observation.scenario)
        if observation.model == "standin":
            assert score.passed, (observation.scenario, score.reasons)
            assert score.fix_proposed, score.fixes
            # Every playbook call answered, the metrics ones from the backfilled history
            # (the calls gathered before the model are the session's too, counted apart).
            own = [c for c in observation.tool_calls if not c.gathered]
            assert [(c.tool, c.is_error) for c in own] == [
                (s.tool, s.fails) for s in scenario.playbook.steps
            ]
        else:
            assert not score.passed, observation.scenario
            assert score.forbidden[0].found
            assert not score.fix_proposed

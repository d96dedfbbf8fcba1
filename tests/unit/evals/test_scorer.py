"""The fact-based scorer: the stand-in passes every scenario, the sloppy model fails every one."""

from __future__ import annotations

import pytest

from tarsy_dev.demo_cluster import load_scenario, scenario_names
from tarsy_dev.evals.observation import RunObservation, ToolCallRecord
from tarsy_dev.evals.scorer import score_run
from tests.unit.evals.runs import sloppy_run, standin_run


@pytest.mark.parametrize("name", scenario_names())
def test_the_standin_passes(name: str) -> None:
    scenario = load_scenario(name)
    score = score_run(scenario, standin_run(scenario))
    assert score.passed, score.reasons
    assert score.reasons == []
    assert score.findings_found == score.tool_recall == 1.0
    assert score.tool_precision == 1.0
    assert all(f.sentence for f in score.findings)
    assert all(t.by for t in score.tools)


@pytest.mark.parametrize("name", scenario_names())
def test_the_sloppy_model_fails_on_every_count(name: str) -> None:
    scenario = load_scenario(name)
    score = score_run(scenario, sloppy_run(scenario))
    assert not score.passed
    # It draws the scenario's first forbidden conclusion, states no finding, fetches no evidence.
    assert score.forbidden[0].found
    assert score.forbidden[0].sentence == scenario.expected.forbidden[0].claim
    assert not any(f.found for f in score.findings)
    assert score.tool_recall == 0.0
    assert score.tool_calls == 3
    assert score.relevant_calls == 0
    assert f"forbidden conclusion: {scenario.expected.forbidden[0].claim}" in score.reasons


def test_a_failed_call_fetches_no_evidence() -> None:
    scenario = load_scenario("media-evictions-flaky-api")
    run = standin_run(scenario)
    gave_up = run.model_copy(
        update={"tool_calls": [c for i, c in enumerate(run.tool_calls) if i != 3]}
    )  # the retry of the timed-out events query is gone
    score = score_run(scenario, gave_up)
    assert not score.passed
    assert score.failed_calls == 1
    assert score.reasons == [
        "evidence not fetched: the events (the eviction messages), fetched successfully "
        "despite the timeout"
    ]


def test_an_unfinished_session_fails_whatever_it_wrote() -> None:
    scenario = load_scenario("oom-killed")
    paused = standin_run(scenario).model_copy(update={"status": "paused"})
    score = score_run(scenario, paused)
    assert not score.passed
    assert score.reasons == ["the session did not complete"]


def test_findings_are_matched_tolerantly_and_relevance_counts_any_needed_call() -> None:
    scenario = load_scenario("crashloop-bad-configmap")
    analysis = (
        "The pods crash because someone edited PAYMENTS-API-CONFIG: its Database-Host now names "
        "payments_db_primary, which has no Service. The database is not down."
    )
    run = RunObservation(
        scenario=scenario.name,
        model="a-model",
        status="completed",
        final_analysis=analysis,
        tool_calls=[
            ToolCallRecord(
                tool="pods_log",
                arguments={"namespace": "Checkout", "name": "payments-api-7d9f8b6c5-x2k4q"},
            ),
            ToolCallRecord(
                tool="resources_get",
                arguments={"apiVersion": "v1", "kind": "configmap", "name": "payments-api-config"},
            ),
            ToolCallRecord(tool="namespaces_list"),
        ],
    )
    score = score_run(scenario, run)
    assert score.passed, score.reasons
    assert score.relevant_calls == 2
    assert score.tool_precision == pytest.approx(2 / 3)
    assert score.tools[1].by == (
        "resources_get(apiVersion=v1, kind=configmap, name=payments-api-config)"
    )


def test_detections_alone_are_scored_by_the_same_matchers_one_finding_at_a_time() -> None:
    scenario = load_scenario("crashloop-bad-configmap")
    analysis = (
        "The pods crash because someone edited PAYMENTS-API-CONFIG: its Database-Host now names "
        "payments_db_primary, which has no Service."
    )
    # The same words, one detection each: the matcher must not join two detections.
    detections = [
        "Someone edited PAYMENTS-API-CONFIG: its Database-Host now names payments_db_primary.",
        "payments_db_primary has no Service.",
    ]
    run = RunObservation(
        scenario=scenario.name, model="m", status="completed", final_analysis=analysis,
        detections=detections,
    )  # fmt: skip
    score = score_run(scenario, run)
    stated = [f.found for f in score.findings]
    alone = [f.found for f in score.detection_findings]
    assert len(alone) == len(stated) and any(alone)
    assert score.detections_found == sum(alone) / len(alone)
    silent = score_run(scenario, run.model_copy(update={"detections": []}))
    assert not any(f.found for f in silent.detection_findings)
    assert silent.detections_found == 0.0

"""The scorer on answers written by hand the way a real model might write them.

Near misses must fail (the right pod with the wrong cause) and a right answer in
other words must pass, so the scorer's verdicts on unscripted answers can be trusted.
"""

from __future__ import annotations

from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.evals.observation import RunObservation, ToolCallRecord
from tarsy_dev.evals.scorer import score_run

SCENARIO = load_scenario("crashloop-bad-configmap")
POD = "payments-api-7d9f8b6c5-x2k4q"
EVIDENCE = [
    ToolCallRecord(tool="pods_log", arguments={"namespace": "checkout", "name": POD}),
    ToolCallRecord(
        tool="resources_get",
        arguments={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "namespace": "checkout",
            "name": "payments-api-config",
        },
    ),
]


def run(analysis: str) -> RunObservation:
    return RunObservation(
        scenario=SCENARIO.name, model="hand-written", status="completed",
        final_analysis=analysis, tool_calls=EVIDENCE,
    )  # fmt: skip


def test_the_right_pod_with_an_oom_cause_fails_on_the_forbidden_conclusion() -> None:
    score = score_run(
        SCENARIO,
        run(f"Pod {POD} in checkout is crash looping because it is OOMKilled: its memory limit "
            "is too low for the payments-api container. Raise the limit."),
    )  # fmt: skip
    assert not score.passed
    assert score.forbidden[1].found
    assert not any(f.found for f in score.findings)


def test_the_right_pod_with_a_plausible_but_wrong_cause_fails_on_missing_findings() -> None:
    score = score_run(
        SCENARIO,
        run(f"Pod {POD} crash loops after the 07:55 rollout: the new image tag of payments-api "
            "fails its readiness probe. Roll back the Deployment to the previous ReplicaSet."),
    )  # fmt: skip
    assert not score.passed
    assert not any(f.found for f in score.forbidden)
    assert [f.found for f in score.findings] == [False, False, False]


def test_the_right_cause_in_other_words_passes() -> None:
    score = score_run(
        SCENARIO,
        run("Someone ran kubectl edit on the payments-api-config config map shortly before the "
            "restart, and the database host variable there now points at payments-db-primary, "
            "which is not a service in the namespace, so every new pod fails the DNS lookup and "
            "exits. Put the host back to payments-db and restart the pods."),
    )  # fmt: skip
    assert score.passed, score.reasons


def test_naming_the_config_map_but_not_the_wrong_host_fails() -> None:
    score = score_run(
        SCENARIO,
        run("The payments-api-config ConfigMap was edited and the pods now fail at start. "
            "Restore the previous ConfigMap."),
    )  # fmt: skip
    assert not score.passed
    assert [f.found for f in score.findings] == [True, False, False]

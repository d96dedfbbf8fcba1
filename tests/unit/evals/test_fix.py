"""The remedy: each scenario names the fix a reviewer accepts; the scorer reports whether a run
proposed it, apart from passing."""

from __future__ import annotations

import pytest

from tarsy_dev.demo_cluster import load_scenario, scenario_names
from tarsy_dev.demo_cluster.facts import Fix, find
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.scorer import score_run
from tests.unit.evals.runs import sloppy_run, standin_run

DIAGNOSIS = (
    "The payments-api-config ConfigMap was edited: DATABASE_HOST names payments-db-primary, "
    "a Service that does not exist."
)


def analysed(scenario: Scenario, analysis: str) -> bool:
    run = standin_run(scenario).model_copy(update={"final_analysis": analysis})
    return score_run(scenario, run).fix_proposed


@pytest.mark.parametrize("name", scenario_names())
def test_every_scenario_names_the_fix_a_reviewer_accepts(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.expected.fix
    assert all(part.found_in(part.accept) for part in scenario.expected.fix)


@pytest.mark.parametrize("name", scenario_names())
def test_no_narration_of_the_incident_reads_as_a_proposed_fix(name: str) -> None:
    scenario = load_scenario(name)
    if scenario.expected.fix[0].accept.startswith("No action"):
        pytest.skip("the fix is the decision a finding states")
    narration = " ".join(
        [
            *(f.fact for f in scenario.expected.findings),
            *(f.claim for f in scenario.expected.forbidden),
        ]
    )
    assert not any(part.found_in(narration) for part in scenario.expected.fix)


@pytest.mark.parametrize(
    "remedy",
    [
        "Restore DATABASE_HOST to payments-db.checkout.svc.cluster.local and restart the pods.",
        "Revert the kubectl edit of payments-api-config.",
        "The fix: roll back the ConfigMap to its previous version.",
        "Set DATABASE_HOST back to the existing Service, payments-db.checkout.",
        "DATABASE_HOST should be restored to its previous value.",
    ],
)
def test_the_scorer_recognizes_a_proposed_fix_in_other_words(remedy: str) -> None:
    assert analysed(load_scenario("crashloop-bad-configmap"), f"{DIAGNOSIS}\n\n{remedy}")


@pytest.mark.parametrize(
    "remedy",
    [
        "",  # the right diagnosis, no remedy
        "Create the missing Service payments-db-primary in namespace checkout.",
        "Restart the payments-api Deployment.",
        "DATABASE_HOST was changed at 07:54 and the pods restarted.",
    ],
)
def test_the_scorer_reports_a_missing_or_wrong_fix(remedy: str) -> None:
    assert not analysed(load_scenario("crashloop-bad-configmap"), f"{DIAGNOSIS}\n\n{remedy}")


def test_a_missing_fix_does_not_fail_a_run_that_states_the_findings() -> None:
    scenario = load_scenario("crashloop-bad-configmap")
    run = standin_run(scenario).model_copy(update={"final_analysis": DIAGNOSIS})
    score = score_run(scenario, run)
    assert score.passed and not score.fix_proposed
    assert [f.found for f in score.fixes] == [False]


def test_two_causes_need_both_remedies() -> None:
    scenario = load_scenario("ledger-two-causes")
    consumer = (
        "Point the ExternalSecret ledger-kafka-credentials back at the production credentials."
    )
    api = "Fix ledger-api's memory request to 1600Mi."
    assert not analysed(scenario, consumer)
    assert not analysed(scenario, api)
    assert analysed(scenario, f"{consumer}\n{api}")


def test_a_term_may_list_alternatives() -> None:
    fix = Fix(accept="Raise the quota.", match=[["raise|be raised", "quota"]])
    assert fix.found_in("The quota must be raised to 24Gi.")
    assert fix.found_in("Raise the quota.")
    assert not fix.found_in("The quota was raised last week.")
    assert find("roll back the release", [["roll back|rollback", "release"]])


def test_a_scenario_whose_fix_misses_its_own_words_does_not_load() -> None:
    scenario = load_scenario("oom-killed")
    data = scenario.model_dump(mode="json", by_alias=True)
    data["expected"]["fix"] = {"accept": "Scale the node pool.", "match": ["memory limit"]}
    with pytest.raises(ValueError, match="fixes whose own patterns miss them"):
        Scenario.model_validate(data)


@pytest.mark.parametrize("name", scenario_names())
def test_the_standins_reference_analysis_proposes_the_scenarios_fix(name: str) -> None:
    # The stand-in writes each scenario's own reference answer: a fix the scorer does not
    # recognize there is a matcher that misses the remedy as a reviewer would write it.
    scenario = load_scenario(name)
    assert score_run(scenario, standin_run(scenario)).fix_proposed


@pytest.mark.parametrize("name", scenario_names())
def test_the_sloppy_model_proposes_no_fix(name: str) -> None:
    scenario = load_scenario(name)
    assert not score_run(scenario, sloppy_run(scenario)).fix_proposed


def test_a_verb_group_proposes_and_never_narrates() -> None:
    fix = Fix(accept="Restore the ConfigMap.", match=[["{restore}", "configmap"]])
    for proposal in ("Restore the ConfigMap.", "The ConfigMap should be restored.",
                     "Fix it by rolling back the ConfigMap."):  # fmt: skip
        assert fix.found_in(proposal), proposal
    assert not fix.found_in("The ConfigMap was restored from a backup last week.")


def test_an_unknown_verb_group_is_refused_when_the_scenario_loads() -> None:
    with pytest.raises(ValueError, match="unknown verb group"):
        Fix(accept="Mend the ConfigMap.", match=[["{mend}", "configmap"]])

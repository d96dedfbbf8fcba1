"""A deliberately careless scripted model, to prove that the evaluation scorer discriminates.

``tarsy eval --model sloppy`` investigates each demo-cluster scenario the way a
bad investigator would: it calls tools that have nothing to do with the alert
(the namespaces, kube-system, the monitoring events...) and concludes with the
scenario's first forbidden conclusion, a plausible but wrong root cause. The
fact-based scorer must fail it wherever the stand-in passes. Every text it
writes starts with :data:`SLOPPY_LABEL`; it is never presented as a model.
"""

from __future__ import annotations

from typing import Any

from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.demo_cluster.models import PlaybookStep, Scenario
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeReply
from tarsy_dev.fakes.standin import ScriptedInvestigator

SLOPPY_LABEL = "[scripted sloppy model — deliberately wrong, not a real LLM]"

# Calls that look busy and show nothing about any scenario's incident.
IRRELEVANT_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("namespaces_list", {}),
    ("pods_list_in_namespace", {"namespace": "kube-system"}),
    ("events_list", {"namespace": "monitoring"}),
    ("resources_list", {"apiVersion": "v1", "kind": "Node"}),
    ("pods_log", {"namespace": "kube-system", "name": "coredns-5d78c9869d-7hx2p"}),
    ("pods_top", {"namespace": "monitoring", "all_namespaces": False}),
)
CALLS_PER_INVESTIGATION = 3


def irrelevant_steps(
    scenario: Scenario, count: int = CALLS_PER_INVESTIGATION
) -> list[PlaybookStep]:
    """The first ``count`` calls that fetch nothing about the scenario's incident.

    Args:
        scenario: The incident being (badly) investigated.
        count: How many calls to make.

    Returns:
        The calls, as playbook steps.
    """
    steps: list[PlaybookStep] = []
    for tool, arguments in IRRELEVANT_CALLS:
        if scenario.is_relevant_call(tool, arguments):
            continue
        steps.append(
            PlaybookStep(
                thought="Looking around the cluster before reading anything the alert names.",
                tool=tool,
                arguments=arguments,
            )
        )
        if len(steps) == count:
            break
    return steps


def wrong_analysis(scenario: Scenario) -> str:
    """A confident analysis that draws the scenario's first forbidden conclusion."""
    claim = scenario.expected.forbidden[0].claim
    return (
        "## Root cause\n"
        f"{claim}\n\n"
        "## Evidence\n"
        "- The cluster's namespaces and the kube-system pods were listed.\n\n"
        "## Remediation\n"
        "1. Apply the fix above and watch whether the alert clears."
    )


class SloppyModel(ScriptedInvestigator):
    """Calls irrelevant tools, then concludes with the scenario's first forbidden conclusion."""

    def __init__(self, scenario: Scenario | str) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        claim = self.scenario.expected.forbidden[0].claim
        super().__init__(
            tag="sloppy",
            label=SLOPPY_LABEL,
            steps=irrelevant_steps(self.scenario),
            analysis=wrong_analysis(self.scenario),
            summary=claim,
            plain=lambda call: _plain(call, claim),
        )


def _plain(call: FakeCall, claim: str) -> FakeReply:
    return FakeReply(text=f"{SLOPPY_LABEL}\n\n{claim}")

"""The demo's scripted stand-in model: its executive summary is whole sentences."""

from __future__ import annotations

import pytest

from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.demo_cluster.loader import scenario_names
from tarsy_dev.fakes.fake_gemini import STAND_IN_LABEL, FakeCall
from tarsy_dev.fakes.standin import ScenarioStandIn, first_paragraph


def test_first_paragraph_skips_headings_and_unwraps() -> None:
    text = "## Root cause\nThe ConfigMap was\nedited at 07:54.\n\n## Evidence\n- a\n"
    assert first_paragraph(text) == "The ConfigMap was edited at 07:54."


@pytest.mark.parametrize("name", scenario_names())
def test_summary_is_the_whole_first_paragraph_of_the_analysis(name: str) -> None:
    scenario = load_scenario(name)
    call = FakeCall(
        model="gemini-2.5-flash",
        method="streamGenerateContent",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        body={
            "contents": [
                {"role": "user", "parts": [{"text": "<<<BEGIN ANALYSIS>>>\n...\n"}]},
            ]
        },
    )
    reply = ScenarioStandIn(scenario)(call)
    assert reply.text is not None
    assert reply.text.startswith(f"{STAND_IN_LABEL} {scenario.title}: ")
    summary = reply.text.removeprefix(f"{STAND_IN_LABEL} {scenario.title}: ")
    assert summary == first_paragraph(scenario.playbook.analysis)
    assert summary.endswith((".", ")", "`")), summary
    assert "\n" not in summary

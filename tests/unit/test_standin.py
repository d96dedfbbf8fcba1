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
                {
                    "role": "user",
                    "parts": [
                        {
                            "text": f"<<<BEGIN ANALYSIS>>>\n{STAND_IN_LABEL}\n\n"
                            f"{scenario.playbook.analysis}\n<<<END ANALYSIS>>>"
                        }
                    ],
                },
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


def call_with(text: str) -> FakeCall:
    return FakeCall(
        model="gemini-2.5-flash",
        method="streamGenerateContent",
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        body={"contents": [{"role": "user", "parts": [{"text": text}]}]},
    )


def test_the_summary_of_another_alert_restates_that_alert_not_the_scenario() -> None:
    scenario = load_scenario("crashloop-bad-configmap")
    analysis = (
        f"{STAND_IN_LABEL}\n\n## Root cause analysis\n\nNo model was configured, so this "
        "stand-in only restates the alert it was given:\n\n> alert_type: HighLatency\n"
        "> p99 latency 2.3 s on checkout"
    )
    reply = ScenarioStandIn(scenario)(
        call_with(f"<<<BEGIN ANALYSIS>>>\n{analysis}\n<<<END ANALYSIS>>>")
    )
    assert reply.text.startswith(STAND_IN_LABEL)
    assert "> alert_type: HighLatency" in reply.text and "p99 latency 2.3 s" in reply.text
    assert scenario.title not in reply.text
    assert first_paragraph(scenario.playbook.analysis) not in reply.text


def test_the_chat_answer_quotes_the_question_and_what_the_session_found() -> None:
    prompt = (
        "Alert type: DiskFull\n\n"
        "<<<BEGIN ALERT DATA>>>\ndisk 97% on db-1\n<<<END ALERT DATA>>>\n\n"
        "Executive summary:\n"
        "<<<BEGIN SUMMARY>>>\nThe WAL volume of db-1 is full.\n<<<END SUMMARY>>>"
        "\n\nThe engineer asks:\n<<<BEGIN QUESTION>>>\nCan I delete old WAL files?\n"
        "<<<END QUESTION>>>"
    )
    scenario = load_scenario("crashloop-bad-configmap")
    standin = ScenarioStandIn(scenario)
    reply = standin(call_with(prompt))
    assert reply.text.startswith(STAND_IN_LABEL)
    assert "\u201cCan I delete old WAL files?\u201d" in reply.text
    assert "DiskFull alert" in reply.text and "The WAL volume of db-1 is full." in reply.text
    assert "cannot answer" in reply.text
    assert not reply.tool_calls
    assert scenario.title not in reply.text

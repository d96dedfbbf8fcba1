"""Observations of scripted runs, built without a stack (what the pipeline would record)."""

from __future__ import annotations

from tarsy_dev.demo_cluster.models import PlaybookStep, Scenario
from tarsy_dev.evals.observation import RunObservation, ToolCallRecord
from tarsy_dev.fakes.sloppy import irrelevant_steps, wrong_analysis


def calls(steps: list[PlaybookStep]) -> list[ToolCallRecord]:
    return [ToolCallRecord(tool=s.tool, arguments=s.arguments, is_error=s.fails) for s in steps]


def standin_run(scenario: Scenario) -> RunObservation:
    return RunObservation(
        scenario=scenario.name,
        model="standin",
        status="completed",
        final_analysis=scenario.playbook.analysis,
        tool_calls=calls(scenario.playbook.steps),
        latency_s=2.0,
    )


def sloppy_run(scenario: Scenario) -> RunObservation:
    return RunObservation(
        scenario=scenario.name,
        model="sloppy",
        status="completed",
        final_analysis=wrong_analysis(scenario),
        tool_calls=calls(irrelevant_steps(scenario)),
        latency_s=1.0,
    )

"""The report: HolmesGPT-shaped tables, harness verdict, JSON and Markdown files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tarsy.agent.scoring import parse_judge_reply
from tarsy.settings import Settings
from tarsy_dev.cli import _parser
from tarsy_dev.demo_cluster import load_scenario
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.cli import judge_named
from tarsy_dev.evals.harness import RunResult
from tarsy_dev.evals.report import (
    behaviour,
    build_report,
    evidence_figures,
    model_share,
    percentile,
    to_markdown,
    write_report,
)
from tarsy_dev.evals.scorer import score_run
from tarsy_dev.evals.subjects import HARNESS_NOTE, ModelUnderTest, resolve_models
from tests.unit.evals.runs import sloppy_run, standin_run

NAMES = ["crashloop-bad-configmap", "invoice-red-herring"]


def scenarios() -> list[Scenario]:
    return [load_scenario(name) for name in NAMES]


def scripted_results(*, sloppy_cheats: bool = False) -> list[RunResult]:
    results = []
    for scenario in scenarios():
        good = standin_run(scenario)
        bad = standin_run(scenario) if sloppy_cheats else sloppy_run(scenario)
        bad = bad.model_copy(update={"model": "sloppy", "input_tokens": 100, "cost": 0.01})
        for observation in (good, bad):
            results.append(
                RunResult(observation=observation, score=score_run(scenario, observation))
            )
    return results


def test_percentile() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(n) for n in range(1, 101)], 95) == pytest.approx(95.05)


def test_scripted_models_report_the_harness_verdict() -> None:
    models = resolve_models([], Settings())
    report = build_report(
        scripted_results(),
        models,
        scenarios(),
        duration_s=61.0,
        repeat=1,
        priced_as="gemini-2.5-flash",
    )
    assert report.harness_ok and report.note == HARNESS_NOTE
    standin, sloppy = report.models
    assert (standin.pass_rate, standin.passed, standin.runs) == (100.0, 2, 2)
    assert (sloppy.pass_rate, sloppy.passed) == (0.0, 0)
    assert sloppy.avg_input_tokens == 100 and sloppy.total_cost == pytest.approx(0.02)
    assert sloppy.tool_precision == 0.0 and standin.tool_precision == 1.0
    assert standin.latency_p50_s == 2.0
    [row, _] = report.scenarios
    assert row.cells["standin"].passed == 1 and row.cells["sloppy"].passed == 0
    assert any(r.startswith("forbidden conclusion") for r in row.cells["sloppy"].reasons)

    markdown = to_markdown(report)
    assert "> **Harness check, not a model benchmark.**" in markdown
    assert "The scripted models scored as they must: the harness discriminates." in markdown
    assert (
        "| Model | Pass rate | Passed | Fix proposed | Avg cost | Total cost | p50 latency |"
        in markdown
    )
    assert "| standin (scripted) | 100% | 2/2 | 2/2 |" in markdown
    assert (
        "| crashloop-bad-configmap | easy | crashloop, config-change | ✅ 1/1 | ❌ 0/1 |"
        in markdown
    )
    assert "- **sloppy** on `invoice-red-herring` (run 1, completed):" in markdown


def test_a_sloppy_pass_breaks_the_harness() -> None:
    models = resolve_models([], Settings())
    report = build_report(
        scripted_results(sloppy_cheats=True), models, scenarios(), duration_s=1, repeat=1,
        priced_as="gemini-2.5-flash",
    )  # fmt: skip
    assert not report.harness_ok
    assert report.expectation_failures == [
        f"sloppy passed {name}: the scorer let it through" for name in NAMES
    ]
    assert "the harness is broken" in to_markdown(report)


def test_a_real_model_report_has_no_harness_note_and_shows_the_judge(tmp_path: Path) -> None:
    model = ModelUnderTest(name="gemini-2.5-pro", scripted=False, label="gemini-2.5-pro")
    scenario = load_scenario("oom-killed")
    observation = standin_run(scenario).model_copy(update={"model": "gemini-2.5-pro"})
    verdict = parse_judge_reply(
        json.dumps(
            {
                "score": 64,
                "categories": {
                    "logical_flow": {"score": 70, "reason": "ok"},
                    "consistency": {"score": 80, "reason": "ok"},
                    "tool_relevance": {"score": 40, "reason": "listed every namespace first"},
                    "synthesis_quality": {"score": 66, "reason": "ok"},
                },
                "missing_tools": ["deployment_history"],
            }
        )
    )
    score = score_run(scenario, observation).model_copy(update={"judge": verdict})
    report = build_report(
        [RunResult(observation=observation, score=score)], [model], [scenario],
        duration_s=300, repeat=1, priced_as="each model's own",
    )  # fmt: skip
    assert report.note is None and report.harness_ok
    assert report.models[0].judge_avg == 64
    markdown = to_markdown(report)
    assert "Harness check" not in markdown
    assert (
        "| gemini-2.5-pro | oom-killed | 64 | "
        "tool_relevance (40: listed every namespace first) | deployment_history |" in markdown
    )
    unjudged = score.model_copy(update={"judge": None, "judge_error": "JudgeReplyError: no JSON"})
    failed_judge = build_report(
        [RunResult(observation=observation, score=unjudged)], [model], [scenario],
        duration_s=300, repeat=1, priced_as="each model's own",
    )  # fmt: skip
    assert failed_judge.models[0].judge_avg is None and failed_judge.models[0].pass_rate == 100
    assert "- gemini-2.5-pro on `oom-killed`: JudgeReplyError: no JSON" in to_markdown(failed_judge)
    json_path, md_path = write_report(report, tmp_path / "out")
    assert json.loads(json_path.read_text())["models"][0]["judge_avg"] == 64
    assert json.loads(json_path.read_text())["runs"][0]["score"]["passed"] is True
    assert md_path.read_text() == markdown


def _args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["eval", *argv])


def test_the_judge_is_a_setting_of_its_own_and_never_silently_the_model_under_test() -> None:
    real = [ModelUnderTest(name="local", scripted=False, label="local: qwen")]
    assert judge_named(_args("--model", "local"), real).startswith("none (no --judge-model")
    assert judge_named(_args("--no-judge"), real) == "off (--no-judge)"
    named = _args("--model", "local", "--judge-model", "gemini-2.5-pro")
    assert judge_named(named, real) == "gemini-2.5-pro"
    assert judge_named(_args(), resolve_models(["standin"], Settings())).startswith("none")


def test_the_report_names_the_judge() -> None:
    report = build_report(
        scripted_results(),
        resolve_models([], Settings()),
        scenarios(),
        duration_s=1.0,
        repeat=1,
        priced_as="gemini-2.5-flash",
        judge="gemini-2.5-pro",
    )
    assert report.judge == "gemini-2.5-pro"
    assert "LLM judge: gemini-2.5-pro." in to_markdown(report)
    assert json.loads(report.model_dump_json())["judge"] == "gemini-2.5-pro"


def test_a_report_written_while_the_evaluation_runs_says_how_many_runs_are_done() -> None:
    results = scripted_results()
    partial = build_report(
        results[:1], resolve_models([], Settings()), scenarios(),
        duration_s=60, repeat=3, priced_as="gemini-2.5-pro", planned_runs=12,
    )  # fmt: skip
    assert "**In progress: 1 of 12 runs done.**" in to_markdown(partial)
    final = build_report(
        results, resolve_models([], Settings()), scenarios(),
        duration_s=60, repeat=1, priced_as="gemini-2.5-pro",
    )  # fmt: skip
    assert final.planned_runs is None and "In progress" not in to_markdown(final)


def test_the_model_share_is_the_time_inside_the_model_over_the_wall_time_of_timed_runs() -> None:
    [standin, _, other, _] = [r.observation for r in scripted_results()]
    timed = [
        standin.model_copy(update={"latency_s": 100.0, "model_s": 90.0}),
        other.model_copy(update={"latency_s": 300.0, "model_s": 290.0}),
        other.model_copy(update={"latency_s": None, "model_s": None}),  # did not finish
    ]
    assert model_share(timed) == 0.95
    assert model_share([standin.model_copy(update={"model_s": None})]) is None


def test_the_summary_shows_beside_the_pass_rate_how_many_runs_proposed_the_fix() -> None:
    results = scripted_results()
    [standin_crash, sloppy_crash, standin_invoice, sloppy_invoice] = results
    silent = standin_invoice.observation.model_copy(
        update={"final_analysis": "invoice-api 2.3.0 (revision 19) fails on vat_rate."}
    )  # the right diagnosis, and no remedy: it passes the findings, proposes nothing
    scenario = load_scenario("invoice-red-herring")
    runs = [
        standin_crash,
        sloppy_crash,
        RunResult(observation=silent, score=score_run(scenario, silent)),
        sloppy_invoice,
    ]
    report = build_report(
        runs, resolve_models([], Settings()), scenarios(), duration_s=1, repeat=1,
        priced_as="gemini-2.5-flash",
    )  # fmt: skip
    standin, sloppy = report.models
    assert (standin.fix_proposed, sloppy.fix_proposed) == (1, 0)
    assert "| standin (scripted) | 100% | 2/2 | 1/2 |" in to_markdown(report)  # still passes


def test_behaviour_figures_add_up_over_runs_and_average_turns_over_recorded_runs() -> None:
    [standin, _, other, _] = [r.observation for r in scripted_results()]
    runs = [
        standin.model_copy(update={"turns": 6, "cut_replies": 1, "invalid_calls": 2,
                                   "model_tool_calls": 3}),
        other.model_copy(update={"turns": 3, "cut_replies": 0, "invalid_calls": 1,
                                 "model_tool_calls": 0}),
        other.model_copy(update={"turns": None, "cut_replies": None, "model_tool_calls": 0,
                                 "final_analysis": ""}),  # records unread, no analysis
    ]  # fmt: skip
    assert behaviour(runs) == {
        "avg_turns": 4.5,
        "invalid_calls": 3,
        "answers_without_tools": 1,
        "cut_replies": 1,
    }
    assert behaviour([runs[2]]) == {
        "avg_turns": None, "invalid_calls": 0, "answers_without_tools": 0, "cut_replies": None,
    }  # fmt: skip


def test_the_summary_table_ends_with_turns_invalid_calls_tool_less_answers_and_cut_replies() -> (
    None
):
    results = [
        r.model_copy(
            update={"observation": r.observation.model_copy(update={"turns": 5, "cut_replies": 2})}
        )
        for r in scripted_results()
    ]
    report = build_report(
        results, resolve_models([], Settings()), scenarios(), duration_s=1, repeat=1,
        priced_as="gemini-2.5-flash",
    )  # fmt: skip
    markdown = to_markdown(report)
    assert "| Judge | Avg turns | Invalid calls | Answers without tools | Cut replies |" in markdown
    standin_row = next(line for line in markdown.splitlines() if line.startswith("| standin"))
    assert standin_row.endswith("| - | 5.0 | 0 | 0/2 | 4 |")


def test_evidence_figures_take_the_medians_and_the_mean_brief_in_tokens() -> None:
    [standin, _, other, _] = [r.observation for r in scripted_results()]
    runs = [
        standin.model_copy(update={"gather_s": 2.0, "brief_chars": 7000, "first_model_call_s": 9}),
        other.model_copy(update={"gather_s": 4.0, "brief_chars": 14000, "first_model_call_s": 3}),
        other.model_copy(update={"gather_s": None, "brief_chars": None}),  # nothing gathered
    ]
    assert evidence_figures(runs) == {
        "gather_p50_s": 3.0,
        "brief_tokens": 3000,  # 10,500 characters at 3.5 a token
        "first_model_call_p50_s": 6.0,
    }
    assert evidence_figures([runs[2]]) == {
        "gather_p50_s": None, "brief_tokens": None, "first_model_call_p50_s": None,
    }  # fmt: skip


def test_the_report_counts_the_findings_stated_over_those_expected() -> None:
    report = build_report(
        scripted_results(), resolve_models([], Settings()), scenarios(), duration_s=1, repeat=1,
        priced_as="gemini-2.5-flash",
    )  # fmt: skip
    standin, sloppy = report.models
    expected = sum(len(s.expected.findings) for s in scenarios())
    assert (standin.findings_stated, standin.findings_expected) == (expected, expected)
    assert sloppy.findings_stated < expected
    assert f"| standin (scripted) | {expected}/{expected} |" in to_markdown(report)

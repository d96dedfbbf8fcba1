"""The evaluation report: per-model summary and per-scenario results, as tables, JSON and Markdown.

The shape follows HolmesGPT's published benchmark tables, so results can be put
side by side: one row per model (pass rate, runs, average and total cost,
latency p50/p95, tokens) and one row per scenario with a pass/fail cell per
model. Scripted models are flagged, with the plain statement that they measure
the harness, not a model, and whether they scored as they must.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.table import Table

from tarsy.evidence.brief import CHARS_PER_TOKEN
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.harness import RunResult
from tarsy_dev.evals.observation import RunObservation
from tarsy_dev.evals.subjects import HARNESS_NOTE, ModelUnderTest

PASS, FAIL, NONE = "✅", "❌", "-"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class ModelSummary(BaseModel):
    """One model over all its runs."""

    model: str
    label: str
    scripted: bool
    expected: str | None = Field(description="A scripted model's required outcome.")
    runs: int
    passed: int
    pass_rate: float = Field(description="Percent of runs passed.")
    avg_input_tokens: float
    avg_output_tokens: float
    avg_thinking_tokens: float
    total_tokens: int
    avg_cost: float
    total_cost: float
    latency_p50_s: float
    latency_p95_s: float
    avg_tool_calls: float
    tool_recall: float = Field(description="Mean share of the needed evidence fetched.")
    tool_precision: float = Field(description="Mean share of the calls that were relevant.")
    judge_avg: float | None = Field(default=None, description="Mean LLM-judge score, if judged.")
    model_share: float | None = Field(
        default=None, description="Share of the runs' wall time spent inside the model."
    )
    fix_proposed: int = Field(
        default=0, description="Runs whose analysis proposed the scenario's fix (not pass/fail)."
    )
    avg_turns: float | None = Field(
        default=None, description="Mean model calls per run, over the runs whose records were read."
    )
    invalid_calls: int = Field(
        default=0, description="Replies that broke the action format, and unusable tool calls."
    )
    answers_without_tools: int = Field(
        default=0, description="Runs that ended in an analysis without the model calling a tool."
    )
    cut_replies: int | None = Field(
        default=None, description="Replies cut at the output-token limit (None: unread)."
    )
    findings_stated: int = Field(default=0, description="Expected findings stated, over all runs.")
    findings_expected: int = Field(default=0, description="Expected findings, over all runs.")
    gather_p50_s: float | None = Field(
        default=None, description="Median time of the gather step (evidence first)."
    )
    brief_tokens: float | None = Field(
        default=None, description="Mean size of the opening's findings and evidence (tokens, est.)."
    )
    first_model_call_p50_s: float | None = Field(
        default=None, description="Median time from ingest to the first model call."
    )
    forbidden_runs: int = Field(default=0, description="Runs that drew a forbidden conclusion.")
    detections_stated: int = Field(
        default=0, description="Expected findings the detections alone state, over all runs."
    )
    first_call_prompt_tokens_p50: float | None = Field(
        default=None, description="Median prompt tokens of the first model call."
    )
    first_call_prompt_tokens_max: int | None = Field(
        default=None, description="The largest first-call prompt."
    )
    avg_tokens: float = Field(
        default=0.0, description="Mean tokens per investigation (input, output and thinking)."
    )
    avg_prompt_read_s: float | None = Field(
        default=None, description="Mean seconds the server spent reading prompts per run."
    )
    compact_runs: int = Field(default=0, description="Runs that took the compact path.")
    follow_ups: int = Field(default=0, description="Compact runs that asked for the follow-up.")


class ScenarioCell(BaseModel):
    """One model on one scenario."""

    passed: int
    runs: int
    reasons: list[str] = Field(default_factory=list, description="Why runs failed (distinct).")


class ScenarioRow(BaseModel):
    """One scenario, a cell per model."""

    scenario: str
    title: str
    difficulty: str
    tags: list[str]
    cells: dict[str, ScenarioCell]


class EvalReport(BaseModel):
    """Everything an evaluation measured."""

    created_at: datetime
    duration_s: float
    repeat: int
    priced_as: str = Field(description="The model whose prices the scripted runs' costs use.")
    judge: str = Field(
        default="none", description="Who judged the real models' runs, or why no one did."
    )
    note: str | None = Field(default=None, description="Set when scripted models ran.")
    planned_runs: int | None = Field(
        default=None, description="Set while the evaluation runs: the runs it will make in all."
    )
    expectation_failures: list[str] = Field(
        default_factory=list, description="Scripted models that did not score as they must."
    )
    models: list[ModelSummary]
    scenarios: list[ScenarioRow]
    runs: list[RunResult]

    @property
    def harness_ok(self) -> bool:
        """Whether every scripted model scored as it must."""
        return not self.expectation_failures


def _summary(model: ModelUnderTest, runs: list[RunResult]) -> ModelSummary:
    count = len(runs) or 1
    observations = [r.observation for r in runs]
    latencies = [o.latency_s for o in observations if o.latency_s is not None]
    judged = [r.score.judge.score for r in runs if r.score.judge is not None]
    passed = sum(r.score.passed for r in runs)
    return ModelSummary(
        model=model.name,
        label=model.label,
        scripted=model.scripted,
        expected=model.expected,
        runs=len(runs),
        passed=passed,
        pass_rate=round(100 * passed / count, 1),
        avg_input_tokens=round(sum(o.input_tokens for o in observations) / count, 1),
        avg_output_tokens=round(sum(o.output_tokens for o in observations) / count, 1),
        avg_thinking_tokens=round(sum(o.thinking_tokens for o in observations) / count, 1),
        total_tokens=sum(
            o.input_tokens + o.output_tokens + o.thinking_tokens for o in observations
        ),
        avg_cost=round(sum(o.cost for o in observations) / count, 6),
        total_cost=round(sum(o.cost for o in observations), 6),
        latency_p50_s=round(percentile(latencies, 50), 2),
        latency_p95_s=round(percentile(latencies, 95), 2),
        avg_tool_calls=round(sum(len(o.tool_calls) for o in observations) / count, 1),
        tool_recall=round(sum(r.score.tool_recall for r in runs) / count, 3),
        tool_precision=round(sum(r.score.tool_precision for r in runs) / count, 3),
        judge_avg=round(statistics.fmean(judged), 1) if judged else None,
        model_share=model_share(observations),
        fix_proposed=sum(r.score.fix_proposed for r in runs),
        findings_stated=sum(sum(f.found for f in r.score.findings) for r in runs),
        findings_expected=sum(len(r.score.findings) for r in runs),
        forbidden_runs=sum(any(f.found for f in r.score.forbidden) for r in runs),
        detections_stated=sum(sum(f.found for f in r.score.detection_findings) for r in runs),
        avg_tokens=round(
            sum(o.input_tokens + o.output_tokens + o.thinking_tokens for o in observations) / count,
            1,
        ),
        compact_runs=sum(o.compact for o in observations),
        follow_ups=sum(o.follow_up for o in observations),
        **behaviour(observations),
        **evidence_figures(observations),
        **prompt_figures(observations),
    )


def prompt_figures(observations: Sequence[RunObservation]) -> dict[str, Any]:
    """The first call's prompt (median, largest) and the time spent reading prompts."""
    firsts = [o.first_call_prompt_tokens for o in observations if o.first_call_prompt_tokens]
    reads = [o.prompt_read_s for o in observations if o.prompt_read_s is not None]
    return {
        "first_call_prompt_tokens_p50": round(percentile(firsts, 50)) if firsts else None,
        "first_call_prompt_tokens_max": max(firsts) if firsts else None,
        "avg_prompt_read_s": round(statistics.fmean(reads), 1) if reads else None,
    }


def evidence_figures(observations: Sequence[RunObservation]) -> dict[str, Any]:
    """The gather step's median time and brief size, and the time to the first model call."""
    gathered = [o.gather_s for o in observations if o.gather_s is not None]
    briefs = [o.brief_chars for o in observations if o.brief_chars is not None]
    firsts = [o.first_model_call_s for o in observations if o.first_model_call_s is not None]
    return {
        "gather_p50_s": round(percentile(gathered, 50), 2) if gathered else None,
        "brief_tokens": (round(statistics.fmean(briefs) / CHARS_PER_TOKEN) if briefs else None),
        "first_model_call_p50_s": round(percentile(firsts, 50), 2) if firsts else None,
    }


def behaviour(observations: Sequence[RunObservation]) -> dict[str, Any]:
    """How the model behaved over its runs: turns, invalid calls, tool-less answers, cut replies.

    Turns and cut replies come from the interaction records, which may be
    unreadable for a run: they average and add up over the runs that have them.
    """
    recorded = [o for o in observations if o.turns is not None]
    cut = [o.cut_replies for o in observations if o.cut_replies is not None]
    return {
        "avg_turns": (
            round(sum(o.turns or 0 for o in recorded) / len(recorded), 1) if recorded else None
        ),
        "invalid_calls": sum(o.invalid_calls for o in observations),
        "answers_without_tools": sum(o.answered_without_tools for o in observations),
        "cut_replies": sum(cut) if cut else None,
    }


def model_share(observations: Sequence[RunObservation]) -> float | None:
    """The share of the completed runs' wall time spent inside the model (None: unmeasured)."""
    timed = [o for o in observations if o.model_s is not None and o.latency_s]
    if not timed:
        return None
    return round(sum(o.model_s or 0.0 for o in timed) / sum(o.latency_s or 0.0 for o in timed), 3)


def build_report(
    results: Sequence[RunResult],
    models: Sequence[ModelUnderTest],
    scenarios: Sequence[Scenario],
    *,
    duration_s: float,
    repeat: int,
    priced_as: str,
    judge: str = "none",
    planned_runs: int | None = None,
) -> EvalReport:
    """Aggregate the runs into the report.

    Args:
        results: Every run.
        models: The models, in the order to show them.
        scenarios: The scenarios, in the order to show them.
        duration_s: Wall time of the whole evaluation.
        repeat: Runs per scenario and model.
        priced_as: The model whose price the scripted runs' costs use.
        judge: The LLM judge's model, or why there was none.
        planned_runs: While the evaluation still runs, how many runs it makes in all
            (the report is then partial and says so).

    Returns:
        The report.
    """
    by_model = {m.name: [r for r in results if r.observation.model == m.name] for m in models}
    rows: list[ScenarioRow] = []
    failures: list[str] = []
    for scenario in scenarios:
        cells: dict[str, ScenarioCell] = {}
        for model in models:
            runs = [r for r in by_model[model.name] if r.observation.scenario == scenario.name]
            reasons = list(dict.fromkeys(reason for r in runs for reason in r.score.reasons))
            cell = ScenarioCell(
                passed=sum(r.score.passed for r in runs), runs=len(runs), reasons=reasons
            )
            cells[model.name] = cell
            if model.expected == "pass" and cell.passed < cell.runs:
                failures.append(f"{model.name} failed {scenario.name}: {'; '.join(reasons)}")
            if model.expected == "fail" and cell.passed:
                failures.append(f"{model.name} passed {scenario.name}: the scorer let it through")
        rows.append(
            ScenarioRow(
                scenario=scenario.name,
                title=scenario.title,
                difficulty=scenario.difficulty,
                tags=scenario.tags,
                cells=cells,
            )
        )
    return EvalReport(
        created_at=datetime.now(UTC),
        duration_s=round(duration_s, 1),
        repeat=repeat,
        priced_as=priced_as,
        judge=judge,
        note=HARNESS_NOTE if any(m.scripted for m in models) else None,
        planned_runs=planned_runs,
        expectation_failures=failures,
        models=[_summary(m, by_model[m.name]) for m in models],
        scenarios=rows,
        runs=list(results),
    )


# ─── rendering ────────────────────────────────────────────────────────────────


def _cell(cell: ScenarioCell) -> str:
    if not cell.runs:
        return NONE
    mark = PASS if cell.passed == cell.runs else FAIL
    return f"{mark} {cell.passed}/{cell.runs}"


def _summary_rows(report: EvalReport) -> list[list[str]]:
    rows = []
    for m in report.models:
        rows.append(
            [
                m.label,
                f"{m.pass_rate:.0f}%",
                f"{m.passed}/{m.runs}",
                f"{m.fix_proposed}/{m.runs}",
                f"${m.avg_cost:.4f}",
                f"${m.total_cost:.4f}",
                f"{m.latency_p50_s:.1f}s",
                f"{m.latency_p95_s:.1f}s",
                NONE if m.model_share is None else f"{m.model_share:.0%}",
                f"{m.avg_input_tokens:,.0f}",
                f"{m.avg_output_tokens:,.0f}",
                f"{m.avg_thinking_tokens:,.0f}",
                f"{m.avg_tool_calls:.1f}",
                f"{m.tool_precision:.0%}",
                NONE if m.judge_avg is None else f"{m.judge_avg:.0f}",
                NONE if m.avg_turns is None else f"{m.avg_turns:.1f}",
                str(m.invalid_calls),
                f"{m.answers_without_tools}/{m.runs}",
                NONE if m.cut_replies is None else str(m.cut_replies),
            ]
        )
    return rows


SUMMARY_HEADERS = [
    "Model", "Pass rate", "Passed", "Fix proposed", "Avg cost", "Total cost", "p50 latency",
    "p95 latency", "Model share",
    "Avg input tokens", "Avg output tokens", "Avg thinking tokens", "Avg tool calls",
    "Tool precision", "Judge", "Avg turns", "Invalid calls", "Answers without tools",
    "Cut replies",
]  # fmt: skip


def _seconds(value: float | None) -> str:
    return NONE if value is None else f"{value:.1f}s"


def _tokens(value: float | None) -> str:
    return NONE if value is None else f"{value:,.0f}"


def _first_call(m: ModelSummary) -> str:
    if m.first_call_prompt_tokens_p50 is None:
        return NONE
    return f"{m.first_call_prompt_tokens_p50:,.0f} ({m.first_call_prompt_tokens_max or 0:,})"


def _stated(facts: Sequence[Any]) -> str:
    return f"{sum(f.found for f in facts)}/{len(facts)}"


def _run_rows(report: EvalReport) -> list[str]:
    """Every real model's run on one line: what it stated, what the detections stated, its costs."""
    runs = [r for r in report.runs if not _scripted(report, r.observation.model)]
    if not runs:
        return []
    lines = [
        "",
        "## Runs",
        "",
        "| Model | Scenario | Run | Result | Findings | Fix | Forbidden | Detections alone "
        "| Tokens in / out | First-call prompt | Ingest to completed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        o, score = run.observation, run.score
        first = NONE if o.first_call_prompt_tokens is None else f"{o.first_call_prompt_tokens:,}"
        lines.append(
            f"| {o.model} | {o.scenario} | {o.attempt} | {PASS if score.passed else FAIL} | "
            f"{_stated(score.findings)} | {'yes' if score.fix_proposed else 'no'} | "
            f"{sum(f.found for f in score.forbidden)} | {_stated(score.detection_findings)} | "
            f"{o.input_tokens:,} / {o.output_tokens:,} | {first} | {_seconds(o.latency_s)} |"
        )
    return lines


def _scripted(report: EvalReport, model: str) -> bool:
    return any(m.scripted for m in report.models if m.model == model)


def to_markdown(report: EvalReport) -> str:
    """The report as Markdown: summary, per-scenario table, failures."""
    lines = [f"# tarsy evaluation, {report.created_at:%Y-%m-%d %H:%M} UTC", ""]
    if report.note:
        lines += [f"> **Harness check, not a model benchmark.** {report.note}", ""]
        verdict = (
            "The scripted models scored as they must: the harness discriminates."
            if report.harness_ok
            else "**The scripted models did not score as they must: the harness is broken.**"
        )
        lines += [verdict, ""]
        lines += [f"- {failure}" for failure in report.expectation_failures]
        if report.expectation_failures:
            lines.append("")
    scenarios = len(report.scenarios)
    if report.planned_runs is not None:
        lines += [
            f"**In progress: {len(report.runs)} of {report.planned_runs} runs done.**",
            "",
        ]
    lines += [
        f"{scenarios} scenarios, {report.repeat} run(s) each per model, "
        f"{report.duration_s:.0f}s in all; costs at {report.priced_as} prices.",
        "",
        f"LLM judge: {report.judge}.",
        "",
        "## Model summary",
        "",
        "| " + " | ".join(SUMMARY_HEADERS) + " |",
        "|" + "---|" * len(SUMMARY_HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _summary_rows(report)]
    lines += [
        "",
        "## Evidence first",
        "",
        "Detections alone: the scenario's finding matchers over the automatic checks' texts, "
        "what a model could copy without reading anything else.",
        "",
        "| Model | Findings stated | Detections alone | Forbidden | Gather p50 "
        "| Brief (tokens, est.) | Ingest to first model call p50 | First-call prompt p50 (max) "
        "| Tokens per run | Prompt reading per run | Compact path (follow-ups) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m.label} | {m.findings_stated}/{m.findings_expected} | "
        f"{m.detections_stated}/{m.findings_expected} | {m.forbidden_runs}/{m.runs} | "
        f"{_seconds(m.gather_p50_s)} | {_tokens(m.brief_tokens)} | "
        f"{_seconds(m.first_model_call_p50_s)} | {_first_call(m)} | "
        f"{_tokens(m.avg_tokens)} | {_seconds(m.avg_prompt_read_s)} | "
        f"{m.compact_runs}/{m.runs} ({m.follow_ups}) |"
        for m in report.models
    ]
    lines += _run_rows(report)
    labels = [m.label for m in report.models]
    lines += [
        "",
        "## Results per scenario",
        "",
        "| Scenario | Difficulty | Challenge | " + " | ".join(labels) + " |",
        "|" + "---|" * (3 + len(labels)),
    ]
    for row in report.scenarios:
        cells = [_cell(row.cells[m.model]) for m in report.models]
        lines.append(
            f"| {row.scenario} | {row.difficulty} | {', '.join(row.tags)} | "
            + " | ".join(cells)
            + " |"
        )
    failed = [r for r in report.runs if not r.score.passed]
    if failed:
        lines += ["", "## Why runs failed", ""]
        for run in failed:
            o = run.observation
            lines.append(f"- **{o.model}** on `{o.scenario}` (run {o.attempt}, {o.status}):")
            lines += [f"  - {reason}" for reason in run.score.reasons]
            if o.error:
                lines.append(f"  - error: {o.error}")
    judged = [r for r in report.runs if r.score.judge is not None]
    unjudged = [r for r in report.runs if r.score.judge_error]
    if unjudged:
        lines += ["", "## LLM judge failures (the runs' scores stand without it)", ""]
        lines += [
            f"- {r.observation.model} on `{r.observation.scenario}`: {r.score.judge_error}"
            for r in unjudged
        ]
    if judged:
        lines += [
            "",
            "## LLM judge",
            "",
            "| Model | Scenario | Score | Weakest category | Missing tools |",
        ]
        lines.append("|---|---|---|---|---|")
        for run in judged:
            judge = run.score.judge
            assert judge is not None
            categories = judge.categories.model_dump()
            weakest = min(categories, key=lambda k: categories[k]["score"])
            worst = f"{weakest} ({categories[weakest]['score']}: {categories[weakest]['reason']})"
            missing = ", ".join(t.name for t in judge.missing_tools) or NONE
            lines.append(
                f"| {run.observation.model} | {run.observation.scenario} | {judge.score} | "
                f"{worst} | {missing} |"
            )
    return "\n".join(lines) + "\n"


def summary_table(report: EvalReport) -> Table:
    """The per-model summary as a rich table."""
    table = Table(title="Model summary", title_justify="left")
    for header in SUMMARY_HEADERS:
        table.add_column(header, justify="left" if header == "Model" else "right")
    for row in _summary_rows(report):
        table.add_row(*row)
    return table


def scenario_table(report: EvalReport) -> Table:
    """The per-scenario results as a rich table."""
    table = Table(title="Results per scenario", title_justify="left")
    table.add_column("Scenario")
    table.add_column("Difficulty")
    table.add_column("Challenge")
    for model in report.models:
        table.add_column(model.label, justify="center")
    for row in report.scenarios:
        table.add_row(
            row.scenario,
            row.difficulty,
            ", ".join(row.tags),
            *(_cell(row.cells[m.model]) for m in report.models),
        )
    return table


def write_report(report: EvalReport, out_dir: Path) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.md`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "results.json"
    md_path = out_dir / "results.md"
    json_path.write_text(report.model_dump_json(indent=2) + "\n")
    md_path.write_text(to_markdown(report))
    return json_path, md_path

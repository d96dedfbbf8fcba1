"""``tarsy eval``: its arguments, and the command itself.

Only :mod:`argparse` is imported at the top: ``tarsy`` builds its parser on
every invocation, and the harness (the local stack, the SDKs) loads only when
an evaluation runs.
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from tarsy_dev.demo_cluster.models import Scenario
    from tarsy_dev.evals.harness import RunResult
    from tarsy_dev.evals.subjects import ModelUnderTest

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_OUT = ".local/eval"
WIDE = 200


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tarsy eval``."""
    parser.add_argument(
        "-k",
        dest="patterns",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only scenarios whose name contains PATTERN or matches it as a glob (repeatable)",
    )
    parser.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        metavar="NAME",
        help="standin, sloppy (scripted), local (make local-model) or a Gemini model such as "
        "gemini-2.5-pro (repeatable; "
        "default: TARSY_DEFAULT_MODEL with GEMINI_API_KEY or TARSY_VERTEX_PROJECT set, "
        "else standin and sloppy)",
    )
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per scenario")
    parser.add_argument(
        "--config",
        help="YAML config to evaluate with (providers, agents); default: TARSY_CONFIG_PATH",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"where results.json and results.md go ({DEFAULT_OUT})"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on from --out's results.json: keep its runs of the same models (re-scored) "
        "and make only the missing ones (a long evaluation on a CPU, stopped and started again)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="give up on a run after S seconds"
    )
    parser.add_argument(
        "--no-judge", action="store_true", help="skip the LLM judge on real models' runs"
    )
    parser.add_argument(
        "--judge-model",
        help="the LLM judge's Gemini model, a setting of its own (default: no judge; the "
        "model under test never grades itself unless named here)",
    )
    parser.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="exit 1 when a real model's pass rate is below PCT percent",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--draft-from",
        metavar="SESSION",
        help="instead of evaluating: write a DRAFT scenario from a session whose analysis "
        "people corrected (its alert, its recorded tool answers, the corrected cause as the "
        "expected finding), for a person to review",
    )
    parser.add_argument(
        "--draft-out",
        metavar="FILE",
        help="where the draft goes (default .local/eval/drafts/draft-SESSION.yaml)",
    )
    parser.add_argument("--root", default=".", help="repository root (holds functions/)")


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def scenario_list() -> Table:
    """The bundled scenarios as a table."""
    from tarsy_dev.demo_cluster import load_scenario, scenario_names

    table = Table(title="Demo-cluster scenarios", title_justify="left")
    for column in ("Scenario", "Difficulty", "Challenge", "Title"):
        table.add_column(column)
    for name in scenario_names():
        scenario = load_scenario(name)
        table.add_row(name, scenario.difficulty, ", ".join(scenario.tags), scenario.title)
    return table


def judge_named(args: argparse.Namespace, models: Sequence[ModelUnderTest]) -> str:
    """How the report names the judge: its model, or why the runs were not judged."""
    if all(m.scripted for m in models):
        return "none (scripted models are scored by the scorer alone)"
    if args.no_judge:
        return "off (--no-judge)"
    if args.judge_model is None:
        return "none (no --judge-model given; the model under test never grades itself)"
    return str(args.judge_model)


def _earlier_runs(
    args: argparse.Namespace, models: Sequence[ModelUnderTest], scenarios: Sequence[Scenario]
) -> tuple[list[RunResult], float]:
    """With ``--resume``: the runs --out's report already holds, and the time they took.

    Raises:
        EvalProblem: There is no report to go on from, or it measured other models.
    """
    if not args.resume:
        return [], 0.0
    from tarsy_dev.evals.harness import EvalProblem
    from tarsy_dev.evals.report import EvalReport
    from tarsy_dev.evals.resume import kept_runs

    path = Path(args.out) / "results.json"
    try:
        previous = EvalReport.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise EvalProblem(f"--resume: no earlier report at {path}") from None
    except ValueError as e:
        raise EvalProblem(f"--resume: {path} is not a report tarsy eval wrote ({e})") from None
    kept = kept_runs(previous, models, scenarios, args.repeat)
    return kept, previous.duration_s


def run(args: argparse.Namespace, console: Console, errors: Console) -> int:
    """Run ``tarsy eval``; return the exit code.

    Exit codes: 0 the evaluation ran (and the scripted models scored as they
    must); 1 a scripted model did not (the harness or the scorer is broken), or
    a real model scored under ``--fail-under``; 2 a usage error.
    """
    if args.list:
        console.print(scenario_list())
        return EXIT_OK
    from tarsy.settings import get_settings
    from tarsy_dev.demo_cluster import load_scenario
    from tarsy_dev.evals.harness import (
        EvalOptions,
        EvalProblem,
        check_config,
        run_evaluation,
        select_scenarios,
    )
    from tarsy_dev.evals.report import build_report, scenario_table, summary_table, write_report
    from tarsy_dev.evals.resume import run_key
    from tarsy_dev.evals.subjects import HARNESS_NOTE, LOCAL, resolve_models
    from tarsy_dev.localstack import local_model

    settings = get_settings()
    if args.repeat < 1:
        errors.print("tarsy eval: --repeat must be at least 1", style="red", markup=False)
        return EXIT_USAGE
    local = None
    try:
        models = resolve_models(args.models, settings)
        if any(m.name == LOCAL for m in models):
            local = local_model.start(Path(args.root).resolve(), say=errors.print)
            models = [
                m.model_copy(update={"label": f"local: {local.model}"}) if m.name == LOCAL else m
                for m in models
            ]
        scenarios = select_scenarios(args.patterns)
        given = args.config or settings.config_path
        config_path = Path(given).resolve() if given else None
        check_config(config_path)
        scenario_specs = [load_scenario(name) for name in scenarios]
        kept, earlier_s = _earlier_runs(args, models, scenario_specs)
    except (ValueError, EvalProblem, local_model.Unavailable) as e:
        errors.print(f"tarsy eval: {e}", style="red", markup=False, highlight=False)
        return EXIT_USAGE
    options = EvalOptions(
        root=Path(args.root).resolve(),
        state_dir=Path(args.out).resolve() / "state",
        scenarios=scenarios,
        models=models,
        repeat=args.repeat,
        config_path=config_path,
        run_timeout=args.timeout,
        judge=not args.no_judge,
        judge_model=args.judge_model,
        local_model=local,
        skip=frozenset(run_key(r) for r in kept),
    )
    errors.print(
        f"evaluating {len(scenarios)} scenarios x {len(models)} models "
        f"({', '.join(m.label for m in models)}) x {args.repeat} run(s)"
        + (f", {len(kept)} kept from {Path(args.out) / 'results.json'}" if kept else ""),
        markup=False,
    )
    if any(m.scripted for m in models):
        errors.print(HARNESS_NOTE, style="yellow", markup=False)

    priced_as = settings.default_model if any(m.scripted for m in models) else "each model's own"
    done: list[RunResult] = list(kept)

    def report_run(result: RunResult) -> None:
        # The report so far is rewritten after every run: a long evaluation (a real model
        # on a CPU) stopped early leaves what it measured.
        done.append(result)
        partial = build_report(
            done,
            models,
            scenario_specs,
            duration_s=earlier_s + time.monotonic() - started,
            repeat=args.repeat,
            priced_as=priced_as,
            judge=judge_named(args, models),
            planned_runs=len(scenarios) * len(models) * args.repeat,
        )
        write_report(partial, Path(args.out))
        o, score = result.observation, result.score
        mark = "[green]PASS[/]" if score.passed else "[red]FAIL[/]"
        latency = f"{o.latency_s:.1f}s" if o.latency_s is not None else o.status
        why = f"  {score.reasons[0]}" if score.reasons else ""
        errors.print(f"{mark} {o.model:<10} {o.scenario:<28} {latency:>7}{why}", highlight=False)

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    started = time.monotonic()
    try:
        results = run_evaluation(
            options,
            settings,
            progress=lambda message: errors.print(message, style="dim", markup=False),
            on_result=report_run,
        )
    finally:
        signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
    report = build_report(
        [*kept, *results],
        models,
        scenario_specs,
        duration_s=earlier_s + time.monotonic() - started,
        repeat=args.repeat,
        priced_as=priced_as,
        judge=judge_named(args, models),
    )
    json_path, md_path = write_report(report, Path(args.out))
    # Piped or captured, the tables keep their columns rather than wrapping at 80.
    tables = console if console.is_terminal else Console(file=console.file, width=WIDE)
    tables.print(summary_table(report))
    tables.print(scenario_table(report))
    if report.note:
        console.print(f"[yellow]Harness check, not a model benchmark:[/] {report.note}")
    for failure in report.expectation_failures:
        console.print(f"[red]harness broken:[/] {failure}", highlight=False)
    console.print(f"written: {json_path} and {md_path} ({report.duration_s:.0f}s)")
    below = [
        m
        for m in report.models
        if not m.scripted and args.fail_under is not None and m.pass_rate < args.fail_under
    ]
    for m in below:
        console.print(f"[red]{m.model}: pass rate {m.pass_rate:.0f}% < {args.fail_under:g}%[/]")
    return EXIT_FAILED if report.expectation_failures or below else EXIT_OK

"""Running scenarios through the whole local pipeline, one investigation at a time.

For each group of models (the scripted ones share one stack; each real model
gets its own, since the model is fixed when the functions start) the harness
serves a switchable demo cluster over the Kubernetes API, writes a config whose
``kubernetes`` MCP server is the real kubernetes-mcp-server on it, and starts
the local stack (Firestore and Pub/Sub emulators, the ingest, api, step and
dead-letter functions). A scripted model is a
:class:`~tarsy_dev.fakes.fake_gemini.FakeGemini` in this process whose responder
is set per run. Each run switches the cluster to its scenario (which
also restarts the scenario's fault counts), submits the scenario's alert over
HTTP, polls the session until it ends, and scores it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml
from google.cloud import firestore
from pydantic import BaseModel, Field

from tarsy.config import load_config
from tarsy.errors import ApiError, ConfigError
from tarsy.models import LLMInteraction
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy_dev.client import LocalSignIn, SessionView, TarsyClient
from tarsy_dev.demo_cluster import TOOL_NAMES, load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import PROMETHEUS_TOOL_NAMES, Scenario
from tarsy_dev.evals.judging import judge_session
from tarsy_dev.evals.observation import (
    RecordFigures,
    RunObservation,
    first_model_call_s,
    observe,
    record_figures,
)
from tarsy_dev.evals.scorer import RunScore, score_run
from tarsy_dev.evals.subjects import LOCAL, ModelUnderTest
from tarsy_dev.fakes.fake_gemini import FakeGemini
from tarsy_dev.localstack import prometheus, prometheus_mcp
from tarsy_dev.localstack.kubernetes_mcp import ensure_installed, server_config
from tarsy_dev.localstack.local_model import LocalModel, local_config
from tarsy_dev.localstack.processes import ProcessInfo, stop
from tarsy_dev.localstack.stack import (
    Stack,
    StackOptions,
    read_user_config,
    start_kube_api,
    start_stack,
    stop_stack,
    with_kubernetes,
)

# The demo cluster answers in milliseconds; a short call timeout keeps a simulated hang short.
EVAL_CALL_TIMEOUT_S = 3.0
RUN_TIMEOUT_S = 300.0
POLL_INTERVAL_S = 0.25
JUDGE_TOOLS = tuple(f"kubernetes.{tool}" for tool in TOOL_NAMES) + tuple(
    f"prometheus.{tool}" for tool in PROMETHEUS_TOOL_NAMES
)

Progress = Callable[[str], None]


class EvalProblem(Exception):
    """An input of the evaluation is unusable (found before anything starts)."""


class RunResult(BaseModel):
    """One run: what it produced and how it scored."""

    observation: RunObservation
    score: RunScore


class EvalOptions(BaseModel):
    """What to run, and where to keep state and logs."""

    root: Path = Field(description="Repository root (holds functions/).")
    state_dir: Path = Field(description="Stacks' state and logs go under it.")
    scenarios: list[str] = Field(min_length=1)
    models: list[ModelUnderTest] = Field(min_length=1)
    repeat: int = Field(default=1, ge=1)
    config_path: Path | None = Field(default=None, description="The user's config, if any.")
    run_timeout: float = Field(default=RUN_TIMEOUT_S, gt=0)
    judge: bool = Field(default=True, description="Score real models' runs with the LLM judge.")
    # A setting of its own: never the model under test unless named so. None: no judge.
    judge_model: str | None = Field(default=None, description="The judge's Gemini model.")
    # The running local model, when ``local`` is among the models.
    local_model: LocalModel | None = None
    # Runs an earlier report already holds (``--resume``): (model, scenario, round).
    skip: frozenset[tuple[str, str, int]] = frozenset()

    def to_run(self, model: ModelUnderTest, scenario: str, attempt: int) -> bool:
        """Whether this run is still to be made."""
        return (model.name, scenario, attempt) not in self.skip


def select_scenarios(patterns: Sequence[str]) -> list[str]:
    """The bundled scenarios whose names match any pattern (all of them with none).

    A pattern is a substring (``-k quota``) or a glob (``-k 'cart-*'``).

    Raises:
        EvalProblem: A pattern matches nothing.
    """
    names = scenario_names()
    if not patterns:
        return names
    chosen: list[str] = []
    for pattern in patterns:
        hits = [n for n in names if pattern in n or fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise EvalProblem(f"-k {pattern!r} matches no scenario; scenarios: {', '.join(names)}")
        chosen += hits
    return [n for n in names if n in set(chosen)]


def check_config(path: Path | None) -> None:
    """Load the user's config as the functions will.

    Raises:
        EvalProblem: It is missing or invalid.
    """
    if path is None:
        return
    if not path.is_file():
        raise EvalProblem(f"config {path}: no such file")
    try:
        load_config(Settings(TARSY_CONFIG_PATH=str(path)))
    except ConfigError as e:
        raise EvalProblem(f"config {path}: {e}") from e


class DemoCluster:
    """A switchable demo cluster served over the Kubernetes API by its own process."""

    def __init__(self, info: ProcessInfo, kubeconfig: Path) -> None:
        self.info = info
        self.base_url = info.url
        self.kubeconfig = kubeconfig

    def switch(self, scenario: str) -> None:
        """Serve ``scenario`` from now on (its fault counts restart)."""
        response = httpx.post(f"{self.base_url}/scenario", json={"scenario": scenario}, timeout=30)
        response.raise_for_status()


@contextlib.contextmanager
def demo_cluster(state_dir: Path, first: str) -> Iterator[DemoCluster]:
    """Serve a switchable demo cluster; stop its process group on the way out."""
    kubeconfig = state_dir / "demo-cluster" / "kubeconfig"
    info = start_kube_api(first, kubeconfig, state_dir / "logs", switchable=True)
    try:
        yield DemoCluster(info, kubeconfig)
    finally:
        stop(info)


def eval_config(
    user_config: dict[str, Any],
    binary: Path,
    cluster: DemoCluster,
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The user's config with ``kubernetes`` on the demo cluster, and a short call timeout.

    ``metrics``, when given, is the ``prometheus`` entry: prometheus-mcp-server on the
    Prometheus holding every scenario's history (one for the whole evaluation: the
    scenarios' windows never overlap, so nothing switches with the cluster).
    """
    server = server_config(
        binary, cluster.kubeconfig, "kubernetes-mcp-server on the demo cluster (evaluation)"
    )
    config = with_kubernetes(user_config, server)
    if metrics is not None:
        config["mcp_servers"]["prometheus"] = {**metrics, "call_timeout": EVAL_CALL_TIMEOUT_S}
    config["mcp_servers"]["kubernetes"]["call_timeout"] = EVAL_CALL_TIMEOUT_S
    # One attempt: a scenario's faults (a hang, an error) are what the investigation must
    # cope with; the executor's retries would absorb them (tests/integration/test_mcp_retries.py).
    config["mcp_servers"]["kubernetes"]["retry"] = {"max_attempts": 1}
    # The evaluation swaps the cluster under the server between runs; a warm
    # kubernetes-mcp-server would answer from the previous scenario's cached discovery.
    config["mcp_servers"]["kubernetes"]["keep_warm"] = False
    return config


RecordReader = Callable[[str], RecordFigures | None]
EMULATOR_HOST = "FIRESTORE_EMULATOR_HOST"


def records_on(stack: Stack) -> RecordReader:
    """What a session of ``stack`` recorded of its model calls: time inside, turns, cut replies.

    The api shows no interaction records, so they are read from the stack's
    Firestore emulator, as the step function wrote them (None if unreadable).
    """

    async def read(session_id: str) -> RecordFigures:
        store = Store(firestore.AsyncClient(project=stack.project_id))
        interactions: list[LLMInteraction] = []
        for execution in await store.list_executions(session_id):
            interactions += await store.list_llm_interactions(execution.execution_id)
        return record_figures(interactions)

    def figures(session_id: str) -> RecordFigures | None:
        previous = os.environ.get(EMULATOR_HOST)
        os.environ[EMULATOR_HOST] = stack.firestore_host
        try:
            return asyncio.run(read(session_id))
        except Exception:  # a measurement, never a reason to fail the run
            return None
        finally:
            if previous is None:
                os.environ.pop(EMULATOR_HOST, None)
            else:
                os.environ[EMULATOR_HOST] = previous

    return figures


def run_once(
    client: TarsyClient,
    scenario: Scenario,
    model: ModelUnderTest,
    attempt: int,
    *,
    timeout: float,
    records: RecordReader = lambda _: None,
) -> tuple[RunObservation, SessionView | None]:
    """Submit the scenario's alert, wait for the session to end, and observe it."""
    try:
        submitted = client.submit(scenario.alert.model_dump(mode="json"))
    except ApiError as e:
        failed = RunObservation(
            scenario=scenario.name,
            model=model.name,
            attempt=attempt,
            status="error",
            error=f"submit failed: {e}",
        )
        return failed, None
    problem: str | None = None
    try:
        for _ in client.watch(submitted.session_id, poll_interval=POLL_INTERVAL_S, timeout=timeout):
            pass
    except ApiError as e:
        problem = str(e)
        with contextlib.suppress(ApiError):
            client.cancel(submitted.session_id)
    view = client.session(submitted.session_id)
    observation = observe(view, scenario=scenario.name, model=model.name, attempt=attempt)
    figures = records(submitted.session_id)
    if figures is not None:
        observation = observation.model_copy(
            update={
                "model_s": figures.model_s,
                "turns": figures.turns,
                "cut_replies": figures.cut_replies,
                "first_model_call_s": first_model_call_s(view.session, figures.first_call_at),
                "first_call_prompt_tokens": figures.first_call_prompt_tokens,
                "prompt_read_s": figures.prompt_read_s,
            }
        )
    if problem is not None:
        observation = observation.model_copy(update={"error": problem})
    return observation, view


def _groups(models: Sequence[ModelUnderTest]) -> list[list[ModelUnderTest]]:
    scripted = [m for m in models if m.scripted]
    return ([scripted] if scripted else []) + [[m] for m in models if not m.scripted]


def run_evaluation(
    options: EvalOptions,
    settings: Settings,
    *,
    progress: Progress = lambda _: None,
    on_result: Callable[[RunResult], None] = lambda _: None,
) -> list[RunResult]:
    """Run every (scenario, model, attempt) and score it; stop everything started, always.

    Args:
        options: Scenarios, models, repetitions, config.
        settings: The environment (real-model credentials).
        progress: Told what is being started or stopped.
        on_result: Called with each result as soon as it is scored.

    Returns:
        The results, in run order.
    """
    check_config(options.config_path)
    user_config = read_user_config(options.config_path)
    scenarios = [load_scenario(name) for name in options.scenarios]
    binary = ensure_installed(options.root, progress)
    metrics_binary = prometheus_mcp.ensure_installed(options.root, progress)
    results: list[RunResult] = []
    for index, group in enumerate(_groups(options.models)):
        if not any(
            options.to_run(m, s.name, a)
            for m in group
            for s in scenarios
            for a in range(1, options.repeat + 1)
        ):
            continue  # every run of this group was kept from an earlier report
        state_dir = options.state_dir / f"stack-{index}"
        with contextlib.ExitStack() as cleanup:
            cluster = cleanup.enter_context(demo_cluster(state_dir, scenarios[0].name))
            served = prometheus.serve_scenario_metrics(
                options.root, state_dir, state_dir / "logs", progress
            )
            cleanup.callback(stop, served)
            metrics = prometheus_mcp.server_config(
                metrics_binary, served.url, "prometheus-mcp-server on the demo cluster's metrics"
            )
            config_path = state_dir / "eval-config.yaml"
            config_path.write_text(
                yaml.safe_dump(eval_config(user_config, binary, cluster, metrics))
            )
            fake: FakeGemini | None = None
            if group[0].scripted:
                fake = cleanup.enter_context(FakeGemini())
            local = options.local_model if group[0].name == LOCAL else None
            if local is not None:
                config = eval_config(local_config(local, user_config), binary, cluster, metrics)
                config_path.write_text(yaml.safe_dump(config))
            stack_options = StackOptions(
                root=options.root,
                state_dir=state_dir,
                config_path=config_path,
                gemini_base_url=fake.url if fake is not None else None,
                # Memory off: a run recalling an earlier run of its scenario would not stand alone.
                function_env={"TARSY_MEMORY_RECALL": "0"}
                if fake is not None or local is not None
                else {"TARSY_MEMORY_RECALL": "0", "TARSY_DEFAULT_MODEL": group[0].name},
                model_label=local.label if local is not None else None,
            )
            names = ", ".join(m.name for m in group)
            progress(f"starting the local stack for {names}")
            stack: Stack = start_stack(stack_options, settings, progress=progress)
            cleanup.callback(stop_stack, stack, state_dir, progress)
            client = cleanup.enter_context(
                TarsyClient(
                    ingest_url=stack.ingest_url,
                    api_url=stack.api_url,
                    api_key=stack.api_key,
                    signin=LocalSignIn(stack.signin_key_pem, stack.user),
                )
            )
            # Round by round (every scenario once, then again): a run stopped early still
            # covers every scenario, and a slow real model's report fills in evenly.
            for attempt in range(1, options.repeat + 1):
                for scenario in scenarios:
                    for model in group:
                        if not options.to_run(model, scenario.name, attempt):
                            continue
                        cluster.switch(scenario.name)
                        if fake is not None:
                            fake.reset()
                            fake.responder = model.responder(scenario)
                        observation, view = run_once(
                            client,
                            scenario,
                            model,
                            attempt,
                            timeout=options.run_timeout,
                            records=records_on(stack),
                        )
                        score = score_run(scenario, observation)
                        judge = options.judge_model if options.judge else None
                        if not model.scripted and judge is not None and view is not None:
                            score = _judged(score, view, judge, settings)
                        result = RunResult(observation=observation, score=score)
                        results.append(result)
                        on_result(result)
    return results


def _judged(score: RunScore, view: SessionView, model: str, settings: Settings) -> RunScore:
    """The score with the LLM judge's verdict, or the reason it has none (never raises)."""
    try:
        verdict = judge_session(view, model=model, settings=settings, available_tools=JUDGE_TOOLS)
    except Exception as e:  # a judge failure never fails the run
        return score.model_copy(update={"judge_error": f"{type(e).__name__}: {e}"})
    return score.model_copy(update={"judge": verdict})

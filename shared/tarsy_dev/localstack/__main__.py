"""``python -m tarsy_dev.localstack up|down|demo``: the local stack behind ``make up/down/demo``.

``up`` and ``demo`` check their inputs (the alert file, the config named by
``--config`` or ``TARSY_CONFIG_PATH``) before starting anything; ``down`` and
the end of ``demo`` say what they stop as they stop it, and finish even when
Ctrl-C is pressed again meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from tarsy.errors import ApiError
from tarsy.settings import Settings, get_settings
from tarsy.web.links import list_url, session_url
from tarsy_dev.cli import StoppedWatching, consoles, watch_session
from tarsy_dev.client import LocalSignIn, TarsyClient
from tarsy_dev.demo_cluster.loader import DEFAULT_SCENARIO, scenario_names
from tarsy_dev.localstack.kubernetes_mcp import KubernetesMcpUnavailable
from tarsy_dev.localstack.processes import is_running
from tarsy_dev.localstack.stack import (
    Stack,
    StackOptions,
    has_real_model,
    iap_env,
    load_stack,
    read_user_config,
    restart_reason,
    start_stack,
    stop_stack,
)

DEMO_TIMEOUT_S = 300.0
LOCAL_DEMO_TIMEOUT_S = 1800.0
SWEEP_INTERVAL_S = 60.0  # as the Cloud Scheduler job in infra/
EXIT_USAGE, EXIT_INTERRUPTED = 2, 130
# soft_wrap: a message (an error, a path) stays on one line whatever the width.
console = Console(stderr=True, soft_wrap=True)


class InputProblem(Exception):
    """An input of ``up`` or ``demo`` is unusable; found before anything starts."""


def config_path(args: argparse.Namespace, settings: Settings) -> Path | None:
    """The user's config: ``--config`` (``make up CONFIG=...``), else ``TARSY_CONFIG_PATH``."""
    given = args.config or settings.config_path
    return Path(given).resolve() if given else None


def check_config(path: Path | None) -> None:
    """Load the config as the functions will, so a bad one fails before the stack starts.

    Raises:
        InputProblem: The file is missing, not YAML, or not a valid config.
    """
    if path is None:
        return
    from tarsy.config import load_config
    from tarsy.errors import ConfigError

    if not path.is_file():
        raise InputProblem(f"config {path}: no such file")
    try:
        load_config(Settings(TARSY_CONFIG_PATH=str(path)))
    except ConfigError as e:
        raise InputProblem(f"config {path}: {e}") from e


def _options(args: argparse.Namespace) -> StackOptions:
    return StackOptions(
        root=Path(args.root).resolve(),
        state_dir=Path(args.state_dir).resolve(),
        config_path=config_path(args, get_settings()),
        scenario=args.scenario or None,
        sweep_interval=SWEEP_INTERVAL_S,
    )


def _banner(stack: Stack) -> None:
    console.print(f"[bold]pages[/]   {list_url(stack.signin_url)}  (signed in as {stack.user})")
    console.print(f"[bold]ingest[/]  {stack.ingest_url}/alerts  (API key: {stack.api_key})")
    console.print(
        f"[bold]api[/]     {stack.signin_url}/sessions/<id>  (signed in; "
        f"tarsy --user EMAIL signs in as anyone)"
    )
    if iap := iap_env(stack.signin_url, stack.iap_key_file):
        console.print(
            "[bold]iap[/]     the CLI as through IAP: "
            + escape(" ".join(f"{name}={value}" for name, value in iap.items()))
            + " tarsy list"
        )
    console.print(f"[bold]model[/]   {stack.model}")
    if stack.config_path:
        console.print(f"[bold]config[/]  {stack.config_path}")
    demo = next((p for p in stack.processes if p.name == "demo-cluster"), None)
    if demo is not None and stack.kubeconfig:
        console.print(
            f"[bold]mcp[/]     kubernetes → kubernetes-mcp-server (read-only, stdio) on the "
            f"demo cluster's Kubernetes API at {demo.url}"
        )
        console.print(f"[bold]kubectl[/] {escape(kubectl_line(stack.kubeconfig))}")
    if stack.prometheus_url:
        console.print(
            f"[bold]mcp[/]     prometheus → prometheus-mcp-server (read-only, stdio) on the "
            f"scenarios' metrics: PromQL at {stack.prometheus_url}/api/v1/query"
        )
    console.print(
        f"[bold]firestore[/] {stack.firestore_host} (project {stack.project_id}); "
        f"pubsub {stack.pubsub_host}"
    )


def kubectl_line(kubeconfig: str) -> str:
    """A command a user can paste to look at the demo cluster while the stack runs."""
    return f"kubectl --kubeconfig {kubeconfig} get pods -A"


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _say(message: str) -> None:
    console.print(message, markup=False, highlight=False)


def running_stack(state_dir: Path) -> Stack | None:
    """The stack recorded in ``state_dir`` if every one of its processes still runs."""
    existing = load_stack(state_dir)
    if existing is None or not all(is_running(p.pid) for p in existing.processes):
        return None
    return existing


def _start(options: StackOptions) -> Stack:
    existing = load_stack(options.state_dir)
    if existing is not None:
        stopped = stop_stack(existing, options.state_dir, _say)
        if stopped:
            console.print(
                f"[yellow]stopped the previous stack ({', '.join(stopped)}); its sessions were "
                "in its emulator and are gone[/]"
            )
        # The same key as before: scripts and open pages that hold it keep working.
        options = options.model_copy(update={"api_key": existing.api_key})
    settings = get_settings()
    if not has_real_model(settings) and options.model_label is None:
        console.print(
            "[bold yellow]No GEMINI_API_KEY or TARSY_VERTEX_PROJECT set: LLM calls go to a "
            "scripted stand-in, not a real model.[/]"
        )
    with console.status("starting the local stack…") as status:
        try:
            stack = start_stack(options, settings, progress=lambda m: status.update(m))
        except KubernetesMcpUnavailable as e:
            raise InputProblem(str(e)) from e
    return stack


def _checked_options(args: argparse.Namespace) -> StackOptions:
    """The stack's options, its config checked (raises InputProblem).

    With ``--model local`` the local model is obtained and started first (see
    :mod:`tarsy_dev.localstack.local_model`), and the config the functions load is
    the user's with every provider pointed at it.
    """
    options = _options(args)
    check_config(options.config_path)
    if getattr(args, "model", None) == "local":
        options = _with_local_model(options)
        check_config(options.config_path)
    return options


def _with_local_model(options: StackOptions) -> StackOptions:
    from tarsy_dev.localstack import local_model

    try:
        local = local_model.start(options.root, say=_say)
    except local_model.Unavailable as e:
        raise InputProblem(f"local model unavailable: {e}") from e
    config = local_model.local_config(local, read_user_config(options.config_path))
    path = options.state_dir / "local-model-config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return options.model_copy(update={"config_path": path, "model_label": local.label})


def _up(args: argparse.Namespace) -> int:
    try:
        options = _checked_options(args)
    except InputProblem as e:
        console.print(f"up: {e}", style="red", markup=False)
        return EXIT_USAGE
    env_file = Path(args.state_dir) / "stack.env"
    running = running_stack(options.state_dir)
    reason = restart_reason(running, options.config_path) if running is not None else None
    if running is not None and reason is None:
        # A second `make up` keeps the stack, its sessions, its key and its configuration.
        console.print(
            "[green]the local stack is already up[/]: kept as it is, with its sessions and "
            f"{running.config_path or 'the built-in configuration only'}"
        )
        console.print("[dim]to start afresh (sessions lost): make down && make up[/]")
        _banner(running)
    else:
        if reason is not None:
            console.print(f"[yellow]restarting the local stack: {escape(reason)}[/]")
        try:
            _banner(_start(options))
        except InputProblem as e:
            console.print(f"up: {e}", style="red", markup=False)
            return 1
    console.print(f"[green]stack is up[/]; URLs and the API key are in {env_file}")
    console.print(
        f"load them into your shell: set -a; . {env_file}; set +a   ·   "
        "try: .venv/bin/tarsy submit shared/tarsy_dev/samples/pod-crashloop.json --watch   ·   "
        "stop: make down"
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    stack = load_stack(state_dir)
    if stack is None:
        console.print("no local stack recorded; nothing to stop")
        return 0
    console.print(f"stopping the local stack recorded in {state_dir / 'stack.json'}")
    stopped = stop_stack(stack, state_dir, _say)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def demo_alert(path: str | None, scenario: str | None) -> dict[str, Any]:
    """The alert the demo submits: a file, the scenario's alert, or the bundled sample.

    Raises:
        InputProblem: The file is missing, a directory, unreadable, not JSON, or
            not a JSON object.
    """
    if path:
        return _alert_file(Path(path))
    if scenario:
        from tarsy_dev.demo_cluster import load_scenario

        alert: dict[str, Any] = load_scenario(scenario).alert.model_dump(mode="json")
        return alert
    sample = resources.files("tarsy_dev.samples").joinpath("pod-crashloop.json")
    bundled: dict[str, Any] = json.loads(sample.read_text())
    return bundled


def _alert_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except IsADirectoryError as e:
        raise InputProblem(f"alert {path}: a directory, not an alert file") from e
    except FileNotFoundError as e:
        raise InputProblem(f"alert {path}: no such file") from e
    except (OSError, UnicodeDecodeError) as e:
        raise InputProblem(f"alert {path}: cannot read ({e})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputProblem(f"alert {path}: not JSON ({e})") from e
    if not isinstance(data, dict):
        raise InputProblem(f"alert {path}: a JSON object with alert_type and data is expected")
    return data


def _demo(args: argparse.Namespace) -> int:
    try:
        alert = demo_alert(args.alert, args.scenario)
        options = _checked_options(args)
    except InputProblem as e:
        console.print(f"demo: {e}", style="red", markup=False)
        return EXIT_USAGE
    if (running := running_stack(options.state_dir)) is not None:
        # A demo starts and stops its own stack: over a running `make up` it would stop
        # that one and lose its sessions. Refuse, and say how to use the running one.
        console.print(
            "demo: a stack started by `make up` is running, with its sessions; the demo "
            "would stop it and lose them. Use it: "
            ".venv/bin/tarsy submit shared/tarsy_dev/samples/pod-crashloop.json --watch "
            f"(pages: {list_url(running.signin_url or running.api_url)}), "
            "or stop it first: make down",
            style="red",
            markup=False,
        )
        return EXIT_USAGE
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
    stack: Stack | None = None
    try:
        stack = _start(options)
        _banner(stack)
        # Full lines when redirected (make demo > file), wrapped to the terminal otherwise.
        out, _errors = consoles()
        with TarsyClient(
            ingest_url=stack.ingest_url,
            api_url=stack.api_url,
            api_key=stack.api_key,
            signin=LocalSignIn(stack.signin_key_pem, stack.user),
        ) as client:
            submitted = client.submit(alert)
            console.print(
                f"submitted [bold]{alert.get('alert_type')}[/] alert → {submitted.session_id}"
            )
            console.print(
                f"[bold]watch it in a browser[/] "
                f"{session_url(stack.signin_url, submitted.session_id)}"
                f"  (signed in as {stack.user}; the page lives while the demo runs)"
            )
            # The watch prints every timeline event, the final analysis among them.
            # A CPU model takes minutes where a hosted one takes seconds.
            timeout = DEMO_TIMEOUT_S if options.model_label is None else LOCAL_DEMO_TIMEOUT_S
            status = watch_session(client, submitted.session_id, out, timeout=timeout)
        again = f"make up SCENARIO={options.scenario}" if options.scenario else "make up"
        if stack.kubeconfig:
            console.print(
                f"look at the incident yourself: `{again}` keeps the same demo cluster running, "
                f"then {kubectl_line(stack.kubeconfig)}",
                markup=False,
            )
        hold_the_page(session_url(stack.signin_url, submitted.session_id), again)
        return status
    except (ApiError, InputProblem) as e:
        console.print(f"demo failed: {e}", style="red", markup=False)
        if stack is not None:
            console.print(f"logs: {options.state_dir / 'logs'}")
        return 1
    except (KeyboardInterrupt, StoppedWatching):
        # The demo's session lives in the demo's stack: it ends with it.
        console.print("[yellow]interrupted; stopping the stack[/]")
        return EXIT_INTERRUPTED
    finally:
        if stack is not None:
            shutdown(stack, options.state_dir)
        signal.signal(signal.SIGTERM, previous_sigterm or signal.SIG_DFL)


def interactive() -> bool:
    """Whether someone at a terminal runs the demo (stdin is one)."""
    return sys.stdin.isatty()


def wait_for_enter() -> None:
    """Block until the person presses Enter (Ctrl-C raises, as anywhere in the demo)."""
    sys.stdin.readline()


def hold_the_page(url: str, again: str) -> None:
    """Keep the stack, and so the session's page, up until the person is done with it.

    Design constraint: the demo's session lives in the demo's emulators, so its
    page dies with the stack. At a terminal the demo waits for Enter before it
    stops; redirected or in CI it stops at once and says the link goes with it.
    """
    if not interactive():
        console.print(
            f"stopping the demo's stack: its page goes with it ({again} keeps one up)",
            markup=False,
        )
        return
    console.print(
        f"[bold]the page stays up while you look:[/] {url}\n"
        "press Enter (or Ctrl-C) to stop the stack",
        highlight=False,
    )
    with contextlib.suppress(KeyboardInterrupt, EOFError):
        wait_for_enter()


def shutdown(stack: Stack, state_dir: Path) -> list[str]:
    """Stop the demo's stack, saying what it stops; a second Ctrl-C does not cut it short."""
    stopped = stop_stack(stack, state_dir, _say)
    console.print(f"[dim]stopped {len(stopped)} processes: {', '.join(stopped)}[/]")
    return stopped


def main(argv: list[str] | None = None) -> int:
    """Run one of up, down, demo."""
    parser = argparse.ArgumentParser(prog="python -m tarsy_dev.localstack")
    parser.add_argument("--root", default=".", help="repository root (holds functions/)")
    parser.add_argument("--state-dir", default=".local", help="state, env file and logs")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "demo"):
        command = commands.add_parser(name)
        command.add_argument(
            "--config",
            help="YAML config adding agents, chains and MCP servers (default: TARSY_CONFIG_PATH)",
        )
        command.add_argument(
            "--scenario",
            default=DEFAULT_SCENARIO,
            choices=scenario_names(),
            help="demo-cluster incident served over the Kubernetes API to kubernetes-mcp-server "
            f"({DEFAULT_SCENARIO})",
        )
        command.add_argument(
            "--model",
            choices=["local"],
            help="run on the local model (make local-model) instead of Gemini or the stand-in",
        )
    commands.choices["demo"].add_argument("--alert", help="alert JSON (default: bundled sample)")
    commands.add_parser("down")
    args = parser.parse_args(argv)
    handlers = {"up": _up, "down": _down, "demo": _demo}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:  # what was started is stopped by then
        console.print("[yellow]interrupted[/]")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

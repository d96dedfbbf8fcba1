"""``python -m tarsy.localstack up|down|demo``: the local stack behind ``make up/down/demo``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from tarsy.cli import watch_session
from tarsy.client import TarsyClient
from tarsy.errors import ApiError
from tarsy.localstack.stack import (
    Stack,
    StackOptions,
    has_real_model,
    load_stack,
    start_stack,
    stop_stack,
)
from tarsy.mcp.demo_cluster.loader import DEFAULT_SCENARIO, scenario_names
from tarsy.settings import get_settings

DEMO_TIMEOUT_S = 300.0
SWEEP_INTERVAL_S = 60.0  # as the Cloud Scheduler job in infra/
console = Console(stderr=True)


def _options(args: argparse.Namespace) -> StackOptions:
    return StackOptions(
        root=Path(args.root).resolve(),
        state_dir=Path(args.state_dir).resolve(),
        config_path=Path(args.config).resolve() if args.config else None,
        scenario=args.scenario or None,
        sweep_interval=SWEEP_INTERVAL_S,
    )


def _banner(stack: Stack) -> None:
    console.print(f"[bold]ingest[/]  {stack.ingest_url}/alerts")
    console.print(f"[bold]api[/]     {stack.api_url}/sessions/<id>")
    console.print(f"[bold]model[/]   {stack.model}")
    demo = next((p for p in stack.processes if p.name == "demo-cluster"), None)
    if demo is not None:
        console.print(f"[bold]mcp[/]     kubernetes → demo cluster at {demo.url}")
    console.print(
        f"[bold]firestore[/] {stack.firestore_host} (project {stack.project_id}); "
        f"pubsub {stack.pubsub_host}"
    )


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _start(args: argparse.Namespace) -> Stack:
    options = _options(args)
    existing = load_stack(options.state_dir)
    if existing is not None:
        stopped = stop_stack(existing, options.state_dir)
        if stopped:
            console.print(f"[yellow]stopped a previous stack: {', '.join(stopped)}[/]")
    settings = get_settings()
    if not has_real_model(settings):
        console.print(
            "[bold yellow]No GEMINI_API_KEY or TARSY_VERTEX_PROJECT set: LLM calls go to a "
            "scripted stand-in, not a real model.[/]"
        )
    with console.status("starting the local stack…") as status:
        stack = start_stack(options, settings, progress=lambda m: status.update(m))
    return stack


def _up(args: argparse.Namespace) -> int:
    stack = _start(args)
    _banner(stack)
    env_file = Path(args.state_dir) / "stack.env"
    console.print(f"[green]stack is up[/]; URLs and the API key are in {env_file}")
    console.print("try: .venv/bin/tarsy submit <alert.json> --watch   ·   stop: make down")
    return 0


def _down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    stack = load_stack(state_dir)
    if stack is None:
        console.print("no local stack recorded; nothing to stop")
        return 0
    stopped = stop_stack(stack, state_dir)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def demo_alert(path: str | None, scenario: str | None) -> dict[str, Any]:
    """The alert the demo submits: a file, the scenario's alert, or the bundled sample."""
    if path:
        data: dict[str, Any] = json.loads(Path(path).read_text())
        return data
    if scenario:
        from tarsy.mcp.demo_cluster import load_scenario

        alert: dict[str, Any] = load_scenario(scenario).alert.model_dump(mode="json")
        return alert
    sample = resources.files("tarsy.samples").joinpath("pod-crashloop.json")
    bundled: dict[str, Any] = json.loads(sample.read_text())
    return bundled


def _demo(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _raise_interrupt)
    stack: Stack | None = None
    try:
        stack = _start(args)
        _banner(stack)
        alert = demo_alert(args.alert, args.scenario)
        out = Console()
        with TarsyClient(
            ingest_url=stack.ingest_url, api_url=stack.api_url, api_key=stack.api_key
        ) as client:
            submitted = client.submit(alert)
            console.print(
                f"submitted [bold]{alert['alert_type']}[/] alert → {submitted.session_id}"
            )
            # The watch prints every timeline event, the final analysis among them.
            return watch_session(client, submitted.session_id, out, timeout=DEMO_TIMEOUT_S)
    except ApiError as e:
        console.print(f"[red]demo failed: {e}[/]")
        if stack is not None:
            console.print(f"logs: {Path(args.state_dir) / 'logs'}")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    finally:
        if stack is not None:
            stopped = stop_stack(stack, Path(args.state_dir))
            console.print(f"[dim]stopped {len(stopped)} processes: {', '.join(stopped)}[/]")


def main(argv: list[str] | None = None) -> int:
    """Run one of up, down, demo."""
    parser = argparse.ArgumentParser(prog="python -m tarsy.localstack")
    parser.add_argument("--root", default=".", help="repository root (holds functions/)")
    parser.add_argument("--state-dir", default=".local", help="state, env file and logs")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "demo"):
        command = commands.add_parser(name)
        command.add_argument("--config", help="YAML config adding agents and chains")
        command.add_argument(
            "--scenario",
            default=DEFAULT_SCENARIO,
            choices=scenario_names(),
            help=f"demo-cluster incident served as the kubernetes MCP server ({DEFAULT_SCENARIO})",
        )
    commands.choices["demo"].add_argument("--alert", help="alert JSON (default: bundled sample)")
    commands.add_parser("down")
    args = parser.parse_args(argv)
    handlers = {"up": _up, "down": _down, "demo": _demo}
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

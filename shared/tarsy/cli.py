"""The ``tarsy`` command: submit an alert, watch a session live, show a session.

Base URLs and the API key come from flags, else the environment
(``TARSY_INGEST_URL``, ``TARSY_API_URL``, ``TARSY_API_KEY``), else the
``.local/stack.env`` that ``make up`` writes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel

from tarsy.client import SessionView, TarsyClient
from tarsy.errors import ApiError
from tarsy.models import ExecutionStatus
from tarsy.settings import ClientSettings

# Exit codes: 0 completed / ok, 1 the session ended badly, 2 usage or HTTP error.
EXIT_OK, EXIT_SESSION_FAILED, EXIT_ERROR = 0, 1, 2

_EVENT_STYLE = {
    "llm_thinking": "dim italic",
    "llm_response": "white",
    "llm_tool_call": "cyan",
    "mcp_tool_call": "cyan",
    "mcp_tool_summary": "blue",
    "final_analysis": "bold green",
    "user_question": "magenta",
    "executive_summary": "bold yellow",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tarsy", description=__doc__.splitlines()[0])
    parser.add_argument("--ingest-url", help="ingest function base URL [TARSY_INGEST_URL]")
    parser.add_argument("--api-url", help="api function base URL [TARSY_API_URL]")
    parser.add_argument("--api-key", help="API key [TARSY_API_KEY]")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser("submit", help="submit an alert; prints the session id")
    submit.add_argument("file", help="alert JSON file, or - for stdin")
    submit.add_argument("--watch", action="store_true", help="then watch it to the end")
    watch = commands.add_parser("watch", help="follow a session's timeline until it ends")
    watch.add_argument("session_id")
    watch.add_argument("--timeout", type=float, default=None, help="give up after N seconds")
    watch.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")
    chat = commands.add_parser("chat", help="ask a follow-up question on a finished session")
    chat.add_argument("session_id")
    chat.add_argument("question")
    chat.add_argument("--timeout", type=float, default=300.0, help="give up after N seconds")
    cancel = commands.add_parser("cancel", help="stop a running session")
    cancel.add_argument("session_id")
    resume = commands.add_parser("resume", help="continue a session paused at max_iterations")
    resume.add_argument("session_id")
    resume.add_argument("--iterations", type=int, default=None, help="extra iterations")
    resume.add_argument("--watch", action="store_true", help="then watch it to the end")
    show = commands.add_parser("show", help="print a session")
    show.add_argument("session_id")
    show.add_argument("--json", action="store_true", help="the raw API response")
    return parser


def _client(args: argparse.Namespace) -> TarsyClient:
    settings = ClientSettings()
    key = args.api_key or (settings.api_key.get_secret_value() if settings.api_key else None)
    return TarsyClient(
        ingest_url=args.ingest_url or settings.ingest_url,
        api_url=args.api_url or settings.api_url,
        api_key=key,
    )


def _read_alert(file: str) -> bytes:
    data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    try:
        json.loads(data)
    except json.JSONDecodeError as e:
        raise ApiError(f"{file}: not JSON ({e})") from e
    return data


def print_event(console: Console, event: dict[str, Any]) -> None:
    """Print one timeline event."""
    kind = str(event.get("type", "?"))
    style = _EVENT_STYLE.get(kind, "white")
    where = f"stage {event.get('stage')} · {event.get('agent')}"
    console.print(f"[{style}]● {kind}[/] [dim]{where}[/]")
    content = str(event.get("content", ""))
    if kind in ("final_analysis", "executive_summary"):
        console.print(Panel(Markdown(content), border_style="green"))
    elif content:
        # Model and tool text is not Rich markup: "[/data]" must print as written.
        text = content if len(content) < 2000 else content[:2000] + " …"
        console.print(text, style=style, markup=False)


def _new_events(view: SessionView, seen: dict[str, int]) -> list[dict[str, Any]]:
    """Events not printed yet: each execution's timeline only grows (deterministic ids)."""
    fresh: list[dict[str, Any]] = []
    for execution in view.executions:
        events = execution.get("timeline", [])
        done = seen.get(execution["execution_id"], 0)
        fresh.extend(events[done:])
        seen[execution["execution_id"]] = len(events)
    fresh.sort(key=lambda e: str(e.get("created_at")))
    return fresh


def print_outcome(console: Console, view: SessionView) -> int:
    """Print how the session ended; return the exit code."""
    session = view.session
    tokens = session.get("tokens", {})
    status = view.status
    colour = "green" if status is ExecutionStatus.COMPLETED else "red"
    console.print(
        f"[bold {colour}]session {session['session_id']} {status.value}[/] "
        f"[dim]tokens in/out/thinking: {tokens.get('input_tokens', 0)}/"
        f"{tokens.get('output_tokens', 0)}/{tokens.get('thinking_tokens', 0)}[/]"
    )
    if status is ExecutionStatus.PAUSED:
        console.print(f"paused at max_iterations: [bold]tarsy resume {session['session_id']}[/]")
        return EXIT_OK
    if session.get("error"):
        console.print(f"[red]error: {session['error'].get('message')}[/]", markup=True)
    return EXIT_OK if status is ExecutionStatus.COMPLETED else EXIT_SESSION_FAILED


def watch_session(
    client: TarsyClient,
    session_id: str,
    console: Console,
    *,
    timeout: float | None = None,
    interval: float = 0.5,
) -> int:
    """Print the timeline as it grows, with a spinner, until the session ends."""
    seen: dict[str, int] = {}
    view: SessionView | None = None
    with console.status(f"waiting for session {session_id}…") as spinner:
        for view in client.watch(session_id, poll_interval=interval, timeout=timeout):
            for event in _new_events(view, seen):
                print_event(console, event)
            stage = view.session.get("current_stage")
            spinner.update(
                f"session {session_id}: {view.status.value}"
                + (f", stage {stage}" if stage is not None else "")
            )
    assert view is not None
    return print_outcome(console, view)


def chat_session(
    client: TarsyClient, session_id: str, question: str, console: Console, timeout: float
) -> int:
    """Ask, then print the chat's timeline until its execution ends."""
    execution_id = client.chat(session_id, question)
    deadline = time.monotonic() + timeout
    printed = 0
    with console.status("the assistant is working…"):
        while True:
            view = client.session(session_id)
            execution = next(e for e in view.executions if e["execution_id"] == execution_id)
            events = execution["timeline"]
            for event in events[printed:]:
                print_event(console, {**event, "stage": "chat", "agent": execution["agent"]})
            printed = len(events)
            status = ExecutionStatus(execution["status"])
            if status.is_terminal:
                return EXIT_OK if status is ExecutionStatus.COMPLETED else EXIT_SESSION_FAILED
            if time.monotonic() > deadline:
                raise ApiError(f"no answer after {timeout:.0f}s")
            time.sleep(0.5)


def show_session(view: SessionView, console: Console) -> int:
    """Print a whole session once."""
    session = view.session
    console.print(
        f"[bold]session[/] {session['session_id']}  [bold]alert[/] {session['alert_type']}  "
        f"[bold]chain[/] {session['chain_id']}  [bold]status[/] {session['status']}"
    )
    for event in _new_events(view, {}):
        print_event(console, event)
    if session.get("final_analysis") and not any(
        e.get("type") == "final_analysis" for e in view.timeline
    ):
        console.print(Panel(Markdown(session["final_analysis"]), title="final analysis"))
    return print_outcome(console, view) if view.is_finished else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    args = _parser().parse_args(argv)
    console = Console(stderr=False)
    errors = Console(stderr=True)
    try:
        with _client(args) as client:
            if args.command == "submit":
                submitted = client.submit(_read_alert(args.file))
                print(submitted.session_id, flush=True)
                errors.print(f"[dim]status: {submitted.status_url}[/]")
                if args.watch:
                    return watch_session(client, submitted.session_id, console)
                return EXIT_OK
            if args.command == "watch":
                return watch_session(
                    client,
                    args.session_id,
                    console,
                    timeout=args.timeout,
                    interval=args.interval,
                )
            if args.command == "chat":
                return chat_session(client, args.session_id, args.question, console, args.timeout)
            if args.command == "cancel":
                client.cancel(args.session_id)
                errors.print(f"cancel requested for {args.session_id}")
                return EXIT_OK
            if args.command == "resume":
                client.resume(args.session_id, args.iterations)
                errors.print(f"resumed {args.session_id}")
                return watch_session(client, args.session_id, console) if args.watch else EXIT_OK
            view = client.session(args.session_id)
            if args.json:
                print(view.model_dump_json(indent=2))
                return EXIT_OK
            return show_session(view, console)
    except ApiError as e:
        errors.print(f"[red]tarsy: {e}[/]")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130

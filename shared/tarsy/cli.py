"""The ``tarsy`` command: submit an alert, watch a session live, show a session.

Base URLs and the API key come from flags (before or after the subcommand),
else the environment (``TARSY_INGEST_URL``, ``TARSY_API_URL``,
``TARSY_API_KEY``), else the ``.local/stack.env`` that ``make up`` writes. A
flag given empty (``--api-key ""``) is a usage error, never a silent fallback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from markdown_it import MarkdownIt
from rich import box
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tarsy.client import SessionView, TarsyClient
from tarsy.errors import ApiError
from tarsy.evals.cli import add_arguments as add_eval_arguments
from tarsy.evals.cli import run as run_eval
from tarsy.models import ExecutionStatus
from tarsy.session_list import DEFAULT_LIMIT, MAX_LIMIT, SessionPage
from tarsy.settings import ClientSettings

if TYPE_CHECKING:
    from tarsy.replay import ExecutionReplay, LiveModel, ReplayReport

# Exit codes: 0 completed / ok (also when stdout's reader went away, as in
# `tarsy show ID | head -1`), 1 the session ended badly, 2 usage or HTTP error.
EXIT_OK, EXIT_SESSION_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

# The stage numbers the api gives executions that belong to no stage
# (tarsy.chains.SUMMARY_STAGE and CHAT_STAGE), and how the timeline names them.
STAGE_LABELS = {-1: "executive summary", -2: "chat"}

# The native alert sources `tarsy submit --source` replays to (POST /alerts/{source}).
SOURCES = ("alertmanager", "grafana", "pagerduty", "sns")

# The connection flags: (flag, environment variable it overrides).
CONNECTION_FLAGS = (
    ("--ingest-url", "TARSY_INGEST_URL"),
    ("--api-url", "TARSY_API_URL"),
    ("--api-key", "TARSY_API_KEY"),
)

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


class UsageError(Exception):
    """The command line or its input is wrong (exit 2, as argparse's own usage errors)."""


class StdoutClosed(Exception):
    """Whoever read stdout went away (``tarsy show ID | head -1``)."""


class _Console(Console):
    """A Console that reports a closed pipe instead of exiting 1 as Rich does."""

    def on_broken_pipe(self) -> None:
        """Stop writing, and let ``main`` end quietly."""
        self.quiet = True
        _silence(self.file)
        raise StdoutClosed


class LiteralMarkdown(Markdown):
    """Markdown with HTML off: ``<<<BEGIN ALERT DATA>>>`` or ``<pod>`` print as written.

    Rich parses with HTML on and drops the HTML it finds, so an analysis quoting
    the prompt's ``<<<BEGIN ALERT DATA>>>`` marker showed as ``<<>>``.
    """

    def __init__(self, markup: str) -> None:
        super().__init__(markup)
        parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
        self.parsed = parser.parse(markup)


def _silence(stream: IO[str]) -> None:
    """Point ``stream``'s descriptor at /dev/null, so later writes and the flush at exit are quiet.

    Args:
        stream: The closed stream (stdout); one without a descriptor is left alone.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def consoles() -> tuple[Console, Console]:
    """The stdout console for the timeline, and the stderr console for errors.

    Error lines never wrap (Rich would cut them at 80 columns when stderr is not
    a terminal), so they stay whole in logs and for grep; nor do timeline lines
    when stdout is a pipe or a file (panels still take the console's width).

    Returns:
        ``(console, errors)``.
    """
    console = _Console(stderr=False)
    console.soft_wrap = not console.is_terminal
    return console, _Console(stderr=True, soft_wrap=True)


def _connection_options(*, after_command: bool) -> argparse.ArgumentParser:
    """The connection flags, for the top-level parser and for every subcommand.

    Args:
        after_command: For a subcommand: the flags default to "not given", so that
            a flag given before the subcommand is not reset by the subparser.

    Returns:
        A parent parser holding the flags.
    """
    default = argparse.SUPPRESS if after_command else None
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection (before or after the subcommand)")
    helps = {
        "--ingest-url": "ingest function base URL",
        "--api-url": "api function base URL",
        "--api-key": "API key (not empty)",
    }
    for flag, variable in CONNECTION_FLAGS:
        group.add_argument(flag, default=default, help=f"{helps[flag]} [{variable}]")
    return parent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tarsy",
        description=__doc__.splitlines()[0],
        parents=[_connection_options(after_command=False)],
    )
    common = [_connection_options(after_command=True)]
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, parents=common)

    submit = command("submit", "submit an alert; prints the session id")
    submit.add_argument("file", help="alert JSON file, or - for stdin")
    submit.add_argument("--watch", action="store_true", help="then watch it to the end")
    submit.add_argument(
        "--source",
        choices=SOURCES,
        help="FILE is a saved webhook body of this sender: replay it to /alerts/SOURCE",
    )
    watch = command("watch", "follow a session's timeline until it ends")
    watch.add_argument("session_id")
    watch.add_argument("--timeout", type=float, default=None, help="give up after N seconds")
    watch.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")
    chat = command("chat", "ask a follow-up question on a finished session")
    chat.add_argument("session_id")
    chat.add_argument("question")
    chat.add_argument("--timeout", type=float, default=300.0, help="give up after N seconds")
    cancel = command("cancel", "stop a running session")
    cancel.add_argument("session_id")
    resume = command("resume", "continue a session paused at max_iterations")
    resume.add_argument("session_id")
    resume.add_argument("--iterations", type=int, default=None, help="extra iterations")
    resume.add_argument("--watch", action="store_true", help="then watch it to the end")
    show = command("show", "print a session")
    show.add_argument("session_id")
    show.add_argument("--json", action="store_true", help="the raw API response")
    listing = command("list", "list sessions, newest first, one page at a time")
    listing.add_argument("--status", choices=[status.value for status in ExecutionStatus])
    listing.add_argument("--alert-type", help="only this alert type")
    listing.add_argument("--source", help="only alerts from this source (api, alertmanager, ...)")
    when = "an ISO 8601 time (2025-01-31T08:00Z) or an age (30m, 2h, 7d)"
    listing.add_argument("--since", help=f"created at or after: {when}")
    listing.add_argument("--until", help=f"created before: {when}")
    listing.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"rows (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    )
    listing.add_argument("--cursor", help="the page after the one that printed this cursor")
    listing.add_argument("--json", action="store_true", help="the raw API response")
    replay = command(
        "replay",
        "re-run a finished session from its records through the current strategies, parser and "
        "prompts (no model, no tools); exit 1 if anything differs",
    )
    replay.add_argument("session_id")
    replay.add_argument(
        "--model",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="reason with a live model (the configured one, or NAME) on the recorded tool results",
    )
    replay.add_argument("--config", help="the configuration to replay with [TARSY_CONFIG_PATH]")
    replay.add_argument("--json", action="store_true", help="the whole report as JSON")
    evaluate = commands.add_parser(
        "eval",
        help="run demo-cluster scenarios through the local stack and score them",
        description="Run demo-cluster scenarios through the local stack (emulators, functions, "
        "Pub/Sub) with a model, score every run against the scenario's expected facts, and "
        "write results.json and results.md.",
    )
    add_eval_arguments(evaluate)
    return parser


def _flag(args: argparse.Namespace, flag: str, variable: str) -> str | None:
    """A connection flag's value, None when not given.

    Raises:
        UsageError: The flag was given empty (the usual cause: an unset shell
            variable, ``--api-key "$KEY"``); falling back to the environment or
            ``.local/stack.env`` then would talk to another place with another key.
    """
    value: str | None = getattr(args, flag.removeprefix("--").replace("-", "_"), None)
    if value is not None and not value.strip():
        raise UsageError(f"{flag} is empty; give a value, or leave it out to use {variable}")
    return value


class Connection(NamedTuple):
    """Where the CLI sends its requests, and with which key."""

    ingest_url: str | None
    api_url: str | None
    api_key: str | None


def connection(args: argparse.Namespace, settings: ClientSettings) -> Connection:
    """The ingest URL, api URL and API key: flags, else environment, else ``.local/stack.env``.

    Args:
        args: The parsed command line.
        settings: The environment and ``.local/stack.env``.

    Returns:
        The URLs and key.

    Raises:
        UsageError: A flag was given empty.
    """
    ingest_url, api_url, api_key = (_flag(args, *pair) for pair in CONNECTION_FLAGS)
    if api_key is None and settings.api_key is not None:
        api_key = settings.api_key.get_secret_value()
    return Connection(
        ingest_url=settings.ingest_url if ingest_url is None else ingest_url,
        api_url=settings.api_url if api_url is None else api_url,
        api_key=api_key,
    )


def _client(args: argparse.Namespace) -> TarsyClient:
    where = connection(args, ClientSettings())
    return TarsyClient(ingest_url=where.ingest_url, api_url=where.api_url, api_key=where.api_key)


def read_alert(file: str) -> bytes:
    """Read the alert to submit: a JSON file, or stdin for ``-``.

    Args:
        file: A path, or ``-``.

    Returns:
        The bytes as read (sent unchanged).

    Raises:
        UsageError: No such file, a directory, unreadable, empty, or not JSON.
    """
    where = "stdin" if file == "-" else file
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except IsADirectoryError as e:
        raise UsageError(f"{file}: is a directory, not an alert file") from e
    except FileNotFoundError as e:
        raise UsageError(f"{file}: no such file") from e
    except OSError as e:
        raise UsageError(f"{where}: cannot read ({e.strerror or e})") from e
    if not data.strip():
        raise UsageError("no alert on stdin" if file == "-" else f"{file}: empty, no alert")
    try:
        json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{where}: not JSON ({e})") from e
    return data


_AGE = re.compile(r"^(\d+)\s*([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(flag: str, text: str, now: datetime) -> datetime:
    """A ``--since``/``--until`` value: an ISO 8601 time (UTC unless it says) or an age.

    Args:
        flag: The flag, for the error message.
        text: ``2025-01-31T08:00Z``, ``2025-01-31``, or an age such as ``30m``, ``2h``, ``7d``.
        now: What an age counts back from.

    Returns:
        The time, timezone-aware.

    Raises:
        UsageError: Neither a time nor an age.
    """
    age = _AGE.match(text.strip())
    if age:
        return now - timedelta(seconds=int(age[1]) * _SECONDS[age[2]])
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: give a time (2025-01-31T08:00Z) or an age (30m, 2h, 7d)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def short_span(span: timedelta, units: int = 2) -> str:
    """A span in its largest ``units`` units: ``42s``, ``3m 05s``, ``2h 10m``, ``3d 4h``; ``3d``.

    Args:
        span: The span (a negative one counts as zero).
        units: How many units to show, largest first.

    Returns:
        The span, short.
    """
    seconds = max(0, int(span.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    shown = [f"{parts[0][0]}{parts[0][1]}"]
    shown += [f"{value:02d}{unit}" for value, unit in parts[1:units]]
    return " ".join(shown)


_STATUS_STYLE = {
    ExecutionStatus.COMPLETED: "green",
    ExecutionStatus.FAILED: "red",
    ExecutionStatus.TIMED_OUT: "red",
    ExecutionStatus.CANCELLED: "yellow",
    ExecutionStatus.PAUSED: "magenta",
}


def print_sessions(console: Console, page: SessionPage, now: datetime) -> None:
    """One page of sessions as a table: status, age, alert type, duration, cost, score.

    Args:
        console: Where to print.
        page: The page.
        now: What ages count from.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("session", no_wrap=True, overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("alert type", overflow="fold")
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    for row in page.sessions:
        duration = row.duration
        table.add_row(
            Text(row.session_id),
            Text(row.status.value, style=_STATUS_STYLE.get(row.status, "cyan")),
            Text(short_span(now - row.created_at, units=1)),
            Text(row.alert_type),
            Text("-" if duration is None else short_span(duration)),
            Text(f"${row.cost:.4f}"),
            Text("-" if row.score is None else f"{row.score:g}"),
        )
    console.print(table)


def clock() -> datetime:
    """Now, for ages and relative times (tests pin it)."""
    return datetime.now(UTC)


def list_sessions(
    client: TarsyClient, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    """Print one page of sessions (or the raw page with ``--json``); say how to get the next."""
    now = clock()
    page = client.list_sessions(
        status=args.status,
        alert_type=args.alert_type,
        source=args.source,
        since=None if args.since is None else parse_when("--since", args.since, now),
        until=None if args.until is None else parse_when("--until", args.until, now),
        limit=args.limit,
        cursor=args.cursor,
    )
    if args.json:
        print(page.model_dump_json(indent=2))
        return EXIT_OK
    if not page.sessions:
        errors.print("no sessions match", style="dim", markup=False)
        return EXIT_OK
    print_sessions(console, page, now)
    if page.next_cursor is not None:
        errors.print(f"more: add --cursor {page.next_cursor}", style="dim", markup=False)
    return EXIT_OK


REPLAY_SHOWN_DIFFERENCES = 8  # per execution; --json has them all


def _replay_label(execution: ExecutionReplay) -> str:
    return f"{stage_label(execution.stage)} · {execution.agent} ({execution.strategy})"


def print_replay(console: Console, report: ReplayReport) -> None:
    """What the replay found, execution by execution: identical, or the first differences.

    Args:
        console: Where to print.
        report: The replay.
    """
    how = (
        "recorded replies and tool results; no model or tool was called"
        if report.mode == "recorded"
        else f"live model {report.model or '(as configured)'} on the recorded tool results"
    )
    console.print(f"[bold]replay[/] of session {escape(report.session_id)} [dim]({how})[/]")
    for execution in report.executions:
        steps = f"{execution.replayed_steps} of {execution.recorded_steps} steps"
        label = escape(_replay_label(execution))
        if execution.identical:
            console.print(f"[green]✓[/] {label}: {steps}, identical")
            continue
        ending = execution.recorded_status.value
        if execution.replayed_status is not execution.recorded_status:
            ending += f" → {execution.replayed_status.value}"
        count = len(execution.differences)
        console.print(f"[red]✗[/] {label}: {steps}, {ending}, {count} difference(s)")
        for difference in execution.differences[:REPLAY_SHOWN_DIFFERENCES]:
            console.print(f"    {difference.describe()}", markup=False, highlight=False)
        if count > REPLAY_SHOWN_DIFFERENCES:
            console.print(f"    … and {count - REPLAY_SHOWN_DIFFERENCES} more (--json shows all)")
    for execution_id, reason in report.skipped.items():
        console.print(f"[dim]- {escape(execution_id)}: not replayed ({escape(reason)})[/]")
    if report.identical:
        console.print("[bold green]no difference from the recording[/]")
    else:
        changed = sum(1 for e in report.executions if not e.identical)
        console.print(
            f"[bold red]{report.difference_count} difference(s) in {changed} execution(s)[/]"
        )


async def _replay(session_id: str, config_path: str | None, model: str | None) -> ReplayReport:
    """Read the session's records, then replay them (no I/O after the read)."""
    # Imported here: the replay loads the step engine, which no other command needs.
    from tarsy.config import load_config
    from tarsy.llm import get_provider
    from tarsy.replay import LiveModel, RecordingSource, load_recording, replay
    from tarsy.settings import Settings

    settings = Settings()
    if config_path is not None:
        settings = settings.model_copy(update={"config_path": config_path})
    config = load_config(settings)
    live: LiveModel | None = None
    if model is not None:
        live = LiveModel(provider=lambda c: get_provider(c, settings), model=model or None)
    recording = await load_recording(RecordingSource().store(), session_id, config)
    return await replay(recording, config, live)


def replay_session(args: argparse.Namespace, console: Console) -> int:
    """``tarsy replay``: exit 0 when nothing differs from the recording, 1 when something does."""
    from google.api_core.exceptions import GoogleAPIError

    from tarsy.errors import ConfigError

    try:
        report = asyncio.run(_replay(args.session_id, args.config, args.model))
    except (LookupError, ConfigError) as e:
        raise UsageError(str(e)) from e
    except GoogleAPIError as e:
        raise UsageError(f"cannot read the session from Firestore: {e}") from e
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print_replay(console, report)
    return EXIT_OK if report.identical else EXIT_SESSION_FAILED


def stage_label(stage: object) -> str:
    """How the timeline names an execution's stage: ``stage 0``, ``executive summary``, ``chat``.

    Args:
        stage: The event's ``stage``: an index, a sentinel, or already a label.

    Returns:
        The label.
    """
    if isinstance(stage, int) and stage in STAGE_LABELS:
        return STAGE_LABELS[stage]
    if isinstance(stage, str) and not stage.lstrip("-").isdigit():
        return stage
    return f"stage {stage}"


def print_event(console: Console, event: dict[str, Any]) -> None:
    """Print one timeline event."""
    kind = str(event.get("type", "?"))
    style = _EVENT_STYLE.get(kind, "white")
    where = f"{stage_label(event.get('stage'))} · {event.get('agent')}"
    console.print(f"[{style}]● {kind}[/] [dim]{escape(where)}[/]")
    content = str(event.get("content", ""))
    if kind in ("final_analysis", "executive_summary"):
        console.print(Panel(LiteralMarkdown(content), border_style="green"))
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
        message = str(session["error"].get("message"))
        console.print(f"error: {message}", style="red", markup=False, soft_wrap=True)
    for line in score_lines(session):
        console.print(line, markup=False, soft_wrap=True)
    return EXIT_OK if status is ExecutionStatus.COMPLETED else EXIT_SESSION_FAILED


def score_lines(session: dict[str, Any]) -> list[str]:
    """The judge's verdict on a session as printed lines (none when it was not scored)."""
    if session.get("score_error"):
        return [f"score: none ({session['score_error']})"]
    if session.get("score") is None:
        return []
    lines = [f"score: {session['score']}/100"]
    report = session.get("score_report") or {}
    for name, category in (report.get("categories") or {}).items():
        lines.append(f"  {name}: {category.get('score')} - {category.get('reason', '')}")
    missing = [str(tool.get("name")) for tool in report.get("missing_tools") or []]
    if missing:
        lines.append(f"  missing tools: {', '.join(missing)}")
    return lines


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
                print_event(console, {**event, "stage": -2, "agent": execution["agent"]})
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
    if session.get("resolved_at"):
        console.print(f"[bold]resolved by its source[/] {session['resolved_at']}")
    for event in _new_events(view, {}):
        print_event(console, event)
    if session.get("final_analysis") and not any(
        e.get("type") == "final_analysis" for e in view.timeline
    ):
        console.print(Panel(LiteralMarkdown(session["final_analysis"]), title="final analysis"))
    return print_outcome(console, view) if view.is_finished else EXIT_OK


def submit_source(client: TarsyClient, source: str, body: bytes, errors: Console) -> int:
    """Replay a saved webhook body; print one ``outcome session fingerprint`` line per alert.

    Args:
        client: The client.
        source: The sender whose route takes the body.
        body: The body, sent unchanged.
        errors: Where reasons and the SNS subscription state go.

    Returns:
        The exit code.
    """
    answer = client.submit_source(source, body)
    if answer.subscription is not None:
        errors.print(f"SNS subscription {answer.subscription}: {answer.topic_arn}", markup=False)
    for alert in answer.alerts:
        print(f"{alert.outcome}\t{alert.session_id or '-'}\t{alert.fingerprint}", flush=True)
        if alert.reason:
            errors.print(f"  {alert.reason}", style="dim", markup=False)
    return EXIT_OK


def _run(args: argparse.Namespace, console: Console, errors: Console) -> int:
    """Run the parsed command; return the exit code."""
    if args.command == "eval":
        return run_eval(args, console, errors)
    if args.command == "replay":
        return replay_session(args, console)
    if args.command == "submit" and args.source is not None:
        if args.watch:
            raise UsageError("--watch with --source: a notification may start several sessions")
        body = read_alert(args.file)
        with _client(args) as client:
            return submit_source(client, args.source, body, errors)
    if args.command == "submit":
        alert = read_alert(args.file)
        with _client(args) as client:
            submitted = client.submit(alert)
            print(submitted.session_id, flush=True)
            errors.print(f"status: {submitted.status_url}", style="dim", markup=False)
            if args.watch:
                return watch_session(client, submitted.session_id, console)
            return EXIT_OK
    with _client(args) as client:
        if args.command == "watch":
            return watch_session(
                client, args.session_id, console, timeout=args.timeout, interval=args.interval
            )
        if args.command == "chat":
            return chat_session(client, args.session_id, args.question, console, args.timeout)
        if args.command == "cancel":
            client.cancel(args.session_id)
            errors.print(f"cancel requested for {args.session_id}", markup=False)
            return EXIT_OK
        if args.command == "resume":
            client.resume(args.session_id, args.iterations)
            errors.print(f"resumed {args.session_id}", markup=False)
            return watch_session(client, args.session_id, console) if args.watch else EXIT_OK
        if args.command == "list":
            return list_sessions(client, args, console, errors)
        view = client.session(args.session_id)
        if args.json:
            print(view.model_dump_json(indent=2))
            return EXIT_OK
        return show_session(view, console)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    args = _parser().parse_args(argv)
    console, errors = consoles()
    try:
        code = _run(args, console, errors)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return code
    except (ApiError, UsageError) as e:
        errors.print(f"tarsy: {e}", style="red", markup=False, highlight=False)
        return EXIT_ERROR
    except (BrokenPipeError, StdoutClosed):
        # The reader has what it wanted (`| head -1`): stop as Unix tools do, with
        # no traceback and no "Exception ignored" when Python flushes stdout at exit.
        _silence(sys.stdout)
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

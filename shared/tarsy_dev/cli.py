"""The ``tarsy`` command: submit an alert, watch a session live, show a session.

A chat's answer is shown as it streams: the api's session view carries each
running execution's ``progress`` (the text of the LLM call so far), which a
live area redraws until the step commits the real timeline events.

Base URLs and the API key come from flags (before or after the subcommand),
else the environment (``TARSY_INGEST_URL``, ``TARSY_API_URL``,
``TARSY_API_KEY``), else the ``.local/stack.env`` that ``make up`` writes. A
flag given empty (``--api-key ""``) is a usage error, never a silent fallback.
With ``TARSY_IAP_AUDIENCE`` (IAP's OAuth client id) set, api requests carry an
identity token for it (:class:`tarsy_dev.client.IapIdentity`), as a deployed api
behind Identity-Aware Proxy requires.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, assert_never

from markdown_it import MarkdownIt
from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.segment import Segment
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tarsy.access.roles import RECORDED_ACTIONS
from tarsy.errors import ApiError
from tarsy.feedback import VERDICT_LABELS, FeedbackSummary, summarize
from tarsy.models import (
    VERDICTS,
    DetectionEvent,
    ExecutionStatus,
    ExecutiveSummaryEvent,
    Feedback,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    MCPToolSummaryEvent,
    RecalledSession,
    TimelineEvent,
    UserQuestionEvent,
    timeline_event,
)
from tarsy.money import format_usd, money_of
from tarsy.persistence.audit_log import DEFAULT_LIMIT as AUDIT_DEFAULT_LIMIT
from tarsy.persistence.audit_log import MAX_LIMIT as AUDIT_MAX_LIMIT
from tarsy.persistence.audit_log import AuditPage
from tarsy.persistence.session_list import DEFAULT_LIMIT, MAX_LIMIT, SessionPage
from tarsy_dev.client import IapIdentity, LocalSignIn, SessionView, TarsyClient
from tarsy_dev.client_settings import ClientSettings
from tarsy_dev.evals.cli import add_arguments as add_eval_arguments
from tarsy_dev.evals.cli import run as run_eval
from tarsy_dev.evals.draft import NotCorrected, draft_scenario, draft_yaml

if TYPE_CHECKING:
    from tarsy_dev.replay import ExecutionReplay, LiveModel, ReplayReport

# Exit codes: 0 completed / ok (also when stdout's reader went away, as in
# `tarsy show ID | head -1`), 1 the session ended badly, 2 usage or HTTP error.
EXIT_OK, EXIT_SESSION_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

# The stage numbers the api gives executions that belong to no stage
# (tarsy.engine.messages.SUMMARY_STAGE, CHAT_STAGE and SCORING_STAGE), and how the
# timeline names them.
STAGE_LABELS = {-1: "executive summary", -2: "chat", -3: "scoring"}
CHAT_STAGE = -2

# How the timeline names a sub-agent: the agents that messaged it, then its own name.
AGENT_PATH_SEPARATOR = " \u203a "  # a single right-pointing angle quotation mark

# ``tarsy feedback``'s summary reads at most this many pages of sessions by default.
FEEDBACK_PAGES = 10

# Where ``tarsy eval --draft-from`` writes drafts (never the scenarios folder).
DRAFTS_DIR = ".local/eval/drafts"

# The native alert sources `tarsy submit --source` replays to (POST /alerts/{source}).
SOURCES = ("alertmanager", "grafana", "pagerduty", "sns")

# The width of stdout when it is not a terminal: no line of the timeline, a table or a
# tree is that long, so none is wrapped or cut (Rich's default would be 80 columns).
PIPED_WIDTH = 10_000

# The connection flags: (flag, environment variable it overrides).
CONNECTION_FLAGS = (
    ("--ingest-url", "TARSY_INGEST_URL"),
    ("--api-url", "TARSY_API_URL"),
    ("--api-key", "TARSY_API_KEY"),
    ("--user", "TARSY_USER"),
)


def event_style(event: TimelineEvent) -> str:
    """The Rich style of an event's heading: one per event model (mypy checks every one)."""
    match event:
        case LLMThinkingEvent():
            return "dim italic"
        case LLMResponseEvent():
            return "white"
        case LLMToolCallEvent() | MCPToolCallEvent():
            return "cyan"
        case MCPToolSummaryEvent():
            return "blue"
        case FinalAnalysisEvent():
            return "bold green"
        case UserQuestionEvent():
            return "magenta"
        case ExecutiveSummaryEvent():
            return "bold yellow"
        case DetectionEvent():
            return "bold red"
        case _:
            assert_never(event)


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
    a terminal), so they stay whole in logs and for grep. On a terminal the
    timeline wraps to its width; piped or redirected, nothing is wrapped or cut:
    tables take the width their content needs and Markdown prints as written.

    Returns:
        ``(console, errors)``.
    """
    console = _Console(stderr=False)
    if not console.is_terminal:
        # Piped or redirected: lines as long as their content (tables, ids, JSON lines);
        # Markdown prints as written (print_markdown), so nothing is wrapped or cropped.
        console = _Console(stderr=False, width=PIPED_WIDTH, soft_wrap=True)
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
        "--api-key": "API key, for ingest (not empty)",
        "--user": "sign in to the local stack's api as this e-mail (its key signs for anyone)",
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
    chat = command(
        "chat",
        "ask a follow-up question on a finished session; the answer prints as it arrives",
    )
    chat.add_argument("session_id")
    chat.add_argument("question", nargs="?", help="the question (not with --watch)")
    chat.add_argument(
        "--watch",
        action="store_true",
        help="follow the chat that is answering now instead of asking",
    )
    chat.add_argument("--timeout", type=float, default=300.0, help="give up after N seconds")
    chat.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")
    cancel = command(
        "cancel", "stop a running session, or with --agent one running agent of a parallel stage"
    )
    cancel.add_argument("session_id")
    cancel.add_argument(
        "--agent",
        metavar="NAME|EID",
        help="only this agent: its name among the running agents, or its execution id",
    )
    resume = command("resume", "continue a session paused at max_iterations")
    resume.add_argument("session_id")
    resume.add_argument("--iterations", type=int, default=None, help="extra iterations")
    resume.add_argument("--watch", action="store_true", help="then watch it to the end")
    again = command(
        "again", "investigate a finished session's alert again, with today's configuration"
    )
    again.add_argument("session_id")
    again.add_argument("--watch", action="store_true", help="then watch the new session")
    when = "an ISO 8601 time (2025-01-31T08:00Z) or an age (30m, 2h, 7d)"
    feedback = command(
        "feedback",
        "mark a finished session's analysis right, partly_right or wrong (with --cause, the real "
        "root cause); without a session, count the feedback given and list recent corrections",
    )
    feedback.add_argument("session_id", nargs="?", help="the session to give feedback on")
    feedback.add_argument("verdict", nargs="?", choices=VERDICTS, help="what the analysis was")
    feedback.add_argument("--cause", help="the real root cause, in your words")
    feedback.add_argument(
        "--since", help=f"summary: feedback on sessions created at or after {when}"
    )
    feedback.add_argument(
        "--pages",
        type=int,
        default=FEEDBACK_PAGES,
        help=f"summary: read at most this many pages of {MAX_LIMIT} sessions",
    )
    feedback.add_argument("--json", action="store_true", help="summary: as JSON")
    show = command("show", "print a session")
    show.add_argument("session_id")
    show.add_argument("--json", action="store_true", help="the raw API response")
    listing = command("list", "list sessions, newest first, one page at a time")
    listing.add_argument("--status", choices=[status.value for status in ExecutionStatus])
    listing.add_argument("--alert-type", help="only this alert type")
    listing.add_argument("--source", help="only alerts from this source (api, alertmanager, ...)")
    listing.add_argument("--since", help=f"created at or after: {when}")
    listing.add_argument("--until", help=f"created before: {when}")
    listing.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"rows (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    )
    listing.add_argument("--cursor", help="the page after the one that printed this cursor")
    listing.add_argument("--actor", help="only sessions this e-mail acted on (cancel, chat, ...)")
    listing.add_argument(
        "--action", choices=RECORDED_ACTIONS, help="only sessions someone did this to"
    )
    listing.add_argument(
        "--verdict", choices=VERDICTS, help="only sessions whose feedback said this"
    )
    listing.add_argument("--json", action="store_true", help="the raw API response")
    audit = command(
        "audit", "the audit across sessions, newest first: who did what to which session (admin)"
    )
    audit.add_argument("--actor", help="only this e-mail's actions (any case)")
    audit.add_argument("--action", choices=RECORDED_ACTIONS, help="only this action")
    audit.add_argument("--since", help=f"at or after: {when}")
    audit.add_argument("--until", help=f"before: {when}")
    audit.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"rows (default {AUDIT_DEFAULT_LIMIT}, at most {AUDIT_MAX_LIMIT})",
    )
    audit.add_argument("--cursor", help="the page after the one that printed this cursor")
    audit.add_argument("--json", action="store_true", help="the raw API response")
    erase = command(
        "erase",
        "delete a finished session and all its records (admin); only the erasure's own "
        "audit record, with who and why, is kept",
    )
    erase.add_argument("session_id")
    erase.add_argument(
        "--reason", required=True, help="why (a person's request, a secret pasted by mistake)"
    )
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
        "write results.json and results.md. With --draft-from, write instead a draft "
        "scenario from a session people corrected, for a person to review.",
        parents=common,
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
    user: str | None = None
    signin_key: str | None = None
    ui_url: str | None = None


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
    ingest_url, api_url, api_key, user = (_flag(args, *pair) for pair in CONNECTION_FLAGS)
    if api_key is None and settings.api_key is not None:
        api_key = settings.api_key.get_secret_value()
    return Connection(
        ingest_url=settings.ingest_url if ingest_url is None else ingest_url,
        api_url=settings.api_url if api_url is None else api_url,
        api_key=api_key,
        user=settings.user if user is None else user,
        signin_key=settings.signin_key,
        ui_url=settings.ui_url,
    )


def _client(args: argparse.Namespace) -> TarsyClient:
    settings = ClientSettings()
    where = connection(args, settings)
    signin: LocalSignIn | IapIdentity | None = None
    if settings.iap_audience and where.api_url:
        # Through IAP: an identity token, never the local key (IAP would drop its header).
        given = settings.iap_token.get_secret_value() if settings.iap_token else None
        signin = IapIdentity(settings.iap_audience, where.api_url, token=given)
    elif where.signin_key and where.user:
        try:
            signin = LocalSignIn(Path(where.signin_key).read_bytes(), where.user)
        except OSError as e:
            raise UsageError(f"cannot read the local sign-in key {where.signin_key}: {e}") from e
    return TarsyClient(
        ingest_url=where.ingest_url,
        api_url=where.api_url,
        api_key=where.api_key,
        signin=signin,
        ui_url=where.ui_url,
    )


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
    """One page of sessions as a table: status, age, alert type, duration, cost, score, feedback.

    Args:
        console: Where to print.
        page: The page.
        now: What ages count from.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    # Ids are never cut: pasted into `tarsy show`, a cut id is a 404.
    longest = max((len(row.session_id) for row in page.sessions), default=7)
    table.add_column("session", min_width=longest, overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("alert type", overflow="fold")
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("feedback", no_wrap=True)
    for row in page.sessions:
        duration = row.duration
        table.add_row(
            Text(row.session_id),
            Text(row.status.value, style=_STATUS_STYLE.get(row.status, "cyan")),
            Text(short_span(now - row.created_at, units=1)),
            Text(row.alert_type),
            Text("-" if duration is None else short_span(duration)),
            Text(format_usd(row.cost)),
            Text("-" if row.score is None else f"{row.score:g}"),
            Text("-" if row.verdict is None else row.verdict),
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
        actor=args.actor,
        action=args.action,
        verdict=args.verdict,
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


def print_audit(console: Console, page: AuditPage) -> None:
    """One page of the audit as a table: when (UTC), who, their role, what, on which session.

    Design constraint: what people typed (a chat question, a cause, a reason) is
    shown as text, never as markup, and ids are never cut (pasted into
    ``tarsy show``, a cut id is a 404).
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    longest = max((len(entry.session_id or "-") for entry in page.entries), default=7)
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("actor", overflow="fold")
    table.add_column("role", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("session", min_width=longest, overflow="fold")
    table.add_column("detail", overflow="fold")
    for entry in page.entries:
        what = entry.detail
        if entry.target and entry.target != entry.session_id:
            what = f"{entry.target}: {what}" if what else entry.target
        table.add_row(
            Text(f"{entry.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}"),
            Text(entry.actor),
            Text(entry.role or "-"),
            Text(entry.action),
            Text(entry.session_id or "-"),
            Text(what or "-"),
        )
    console.print(table)


def audit_command(
    client: TarsyClient, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    """``tarsy audit``: one page of the audit (raw with ``--json``); how to get the next page."""
    now = clock()
    try:
        page = client.audit(
            actor=args.actor,
            action=args.action,
            since=None if args.since is None else parse_when("--since", args.since, now),
            until=None if args.until is None else parse_when("--until", args.until, now),
            limit=args.limit,
            cursor=args.cursor,
        )
    except ApiError as e:
        if e.status == 403:
            raise ApiError(f"{e} (reading the audit needs the admin role)", status=403) from e
        raise
    if args.json:
        print(page.model_dump_json(indent=2))
        return EXIT_OK
    if not page.entries:
        errors.print("no audit records match", style="dim", markup=False)
        return EXIT_OK
    print_audit(console, page)
    if page.next_cursor is not None:
        errors.print(f"more: add --cursor {page.next_cursor}", style="dim", markup=False)
    return EXIT_OK


def erase_session(client: TarsyClient, args: argparse.Namespace, errors: Console) -> int:
    """``tarsy erase SESSION --reason TEXT``: delete the session; say what to do when refused.

    Design constraint: the api refuses (409) a session something still runs for,
    since a running step would write its records again; the message says how to
    end it first rather than echoing the status code alone.
    """
    session_id: str = args.session_id
    reason = args.reason.strip()
    if not reason:
        raise UsageError("--reason is empty; say why the session is erased (it is audited)")
    try:
        client.erase(session_id, reason)
    except ApiError as e:
        if e.status == 409:
            raise ApiError(
                f"{session_id} is still running, so it is not erased: stop it with "
                f"`tarsy cancel {session_id}` (or let it finish), then erase it again. ({e})",
                status=409,
            ) from e
        if e.status == 403:
            raise ApiError(f"{e} (erasing a session needs the admin role)", status=403) from e
        raise
    errors.print(f"erased {session_id}; the erasure is audited with your reason", markup=False)
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
    from tarsy.llm.registry import get_provider
    from tarsy.settings import Settings
    from tarsy_dev.replay import LiveModel, RecordingSource, load_recording, replay

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


def print_markdown(console: Console, content: str, title: str | None = None) -> None:
    """Model Markdown: in a panel on a terminal (wrapped to it); as written when piped.

    Piped, a panel would take the pipe's width and wrap or cut the text in it;
    the Markdown itself reads well as plain text, and every line stays whole.
    """
    if console.is_terminal:
        console.print(Panel(LiteralMarkdown(content), border_style="green", title=title))
        return
    if title:
        console.print(f"── {title} ──", markup=False, highlight=False)
    console.print(content, markup=False, highlight=False, soft_wrap=True)


def _event_label(event: TimelineEvent) -> str:
    """The event's heading: its type, and for evidence first what gathered it or what it cites."""
    if isinstance(event, MCPToolCallEvent) and event.gathered:
        tool = f"{event.server_name}.{event.tool_name}"
        return f"gathered [{event.evidence_label or ''}] {tool} ({event.collector})"
    if isinstance(event, DetectionEvent):
        cites = ", ".join(event.evidence_labels)
        return f"detection {event.check}" + (f" [{cites}]" if cites else "")
    return event.type.value


def print_event(console: Console, event: dict[str, Any], told: set[str] | None = None) -> None:
    """Print one timeline event, whole.

    Args:
        console: Where to print.
        event: The event as the api serves it (read into its model), with its ``stage``
            and ``agent``.
        told: MCP servers already reported unavailable (each is reported once).
    """
    # When it was written is not printed (events come in the api's order): not read either.
    typed = timeline_event({k: v for k, v in event.items() if k != "created_at"})
    style = event_style(typed)
    where = f"{stage_label(event.get('stage'))} · {event.get('agent')}"
    label = _event_label(typed)
    console.print(f"[{style}]● {escape(label)}[/] [dim]{escape(where)}[/]")
    unavailable = typed.unavailable_servers or {}
    for server, reason in unavailable.items():
        if told is not None and server in told:
            continue
        console.print(
            f"⚠ MCP server {server} is unavailable: {reason}; the agent goes on without its tools",
            style="yellow", markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip
        if told is not None:
            told.add(server)
    content = typed.content
    if isinstance(typed, MCPToolCallEvent) and typed.gathered:
        # Evidence first gathers dozens of results: their headings say what was read, the
        # detections that follow say what it means, and `tarsy show --json` has them whole.
        lines = content.count("\n") + 1 if content else 0
        console.print(f"  ({len(content):,} characters, {lines:,} lines)", style="dim")
        return
    if isinstance(typed, FinalAnalysisEvent | ExecutiveSummaryEvent):
        print_markdown(console, content)
    elif content:
        # Model and tool text is not Rich markup: "[/data]" must print as written.
        console.print(content, style=style, markup=False, highlight=False)


def _new_events(view: SessionView, seen: dict[str, int]) -> list[dict[str, Any]]:
    """Events not printed yet: each execution's timeline only grows (deterministic ids).

    A sub-agent's events name it by its path (see :func:`agent_paths`).
    """
    paths = agent_paths(view.executions)
    fresh: list[dict[str, Any]] = []
    for execution in view.executions:
        events = execution.get("timeline", [])
        done = seen.get(execution["execution_id"], 0)
        path = paths.get(execution["execution_id"])
        fresh.extend(
            events[done:] if path is None else [{**e, "agent": path} for e in events[done:]]
        )
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
        f"{tokens.get('output_tokens', 0)}/{tokens.get('thinking_tokens', 0)} · "
        f"cost {format_usd(money_of(session.get('cost') or 0))}[/]"
    )
    if status is ExecutionStatus.PAUSED:
        console.print(f"paused at max_iterations: [bold]tarsy resume {session['session_id']}[/]")
        return EXIT_OK
    if session.get("completion_reason") == "budget":
        console.print("ended early: the session's token or cost budget is spent", style="yellow")
    if session.get("error"):
        message = str(session["error"].get("message"))
        console.print(f"error: {message}", style="red", markup=False, soft_wrap=True)
    for line in score_lines(session):
        console.print(line, markup=False, soft_wrap=True)
    if said := feedback_line(session):
        console.print(said, markup=False, soft_wrap=True)
    return EXIT_OK if status is ExecutionStatus.COMPLETED else EXIT_SESSION_FAILED


def runbook_line(session: dict[str, Any]) -> str | None:
    """Whether the session's runbook URL was fetched, or why not (None: no runbook URL)."""
    url = session.get("runbook_url")
    if not url:
        return None
    if session.get("runbook_text") is not None:
        return f"runbook: fetched from {url} ({len(session['runbook_text'])} characters)"
    reason = session.get("runbook_error")
    return f"runbook: not fetched from {url} ({reason}); the investigation goes on without it"


def routing_line(session: dict[str, Any]) -> str | None:
    """Why the session runs its chain (tarsy.config.routing); None for sessions without it."""
    routing = session.get("routing")
    if not isinstance(routing, dict):
        return None
    chain = session.get("chain_id")
    if routing.get("by") == "rule":
        return f"routed to {chain} by rule {routing.get('rule')}: {routing.get('reason')}"
    if routing.get("by") == "alert_type":
        return f"routed to {chain} by alert type: {routing.get('reason')}"
    if routing.get("by") == "source":
        return f"routed to {chain} by its source: {routing.get('reason')}"
    return f"routed to {chain} (the default chain): {routing.get('reason')}"


def score_lines(session: dict[str, Any]) -> list[str]:
    """The judge's verdict on a session as printed lines (none when it was not scored)."""
    if session.get("score_error"):
        reason = str(session["score_error"])
        # "not scored (stand-in model)" says it all; a judge's failure says why there is none.
        return [
            f"score: {reason}" if reason.startswith("not scored") else f"score: none ({reason})"
        ]
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


def recalled_line(session: dict[str, Any]) -> str | None:
    """The earlier sessions this one's investigation was told of (None: none)."""
    recalled = [RecalledSession.model_validate(r) for r in session.get("recalled") or []]
    if not recalled:
        return None
    said = [
        r.session_id + (f" ({VERDICT_LABELS[r.feedback.verdict]})" if r.feedback else "")
        for r in recalled
    ]
    return "recalls (history to verify): " + ", ".join(said)


def feedback_line(session: dict[str, Any]) -> str | None:
    """A responder's verdict on the session and the cause they wrote (None: no feedback)."""
    given = session.get("feedback")
    if not given:
        return None
    feedback = Feedback.model_validate(given)
    line = f"feedback: {VERDICT_LABELS[feedback.verdict]} (by {feedback.by})"
    return f"{line}; the real root cause: {feedback.root_cause}" if feedback.root_cause else line


class StoppedWatching(Exception):
    """Ctrl-C while watching: the watch stops, the session does not."""

    def __init__(self, session_id: str) -> None:
        """Remember which session goes on."""
        super().__init__(session_id)
        self.session_id = session_id


@contextmanager
def watching(session_id: str) -> Iterator[None]:
    """Turn Ctrl-C inside the block into :class:`StoppedWatching` for ``session_id``."""
    try:
        yield
    except KeyboardInterrupt:
        raise StoppedWatching(session_id) from None


def stopped_watching_message(session_id: str) -> str:
    """What Ctrl-C on a watch says: the investigation runs on in the cloud (or the stack)."""
    return (
        f"stopped watching; session {session_id} goes on. Follow it again: "
        f"tarsy watch {session_id}   stop it: tarsy cancel {session_id}"
    )


def audit_line(event: dict[str, Any]) -> str:
    """One action as ``tarsy show`` and ``tarsy watch`` print it: who, their role, what, when."""
    what = str(event.get("action", "")).replace("_", " ")
    if event.get("target"):
        what += f" {event['target']}"
    if event.get("detail"):
        what += f": {event['detail']!r}"
    role = event.get("role") or "no role"
    return f"{event.get('at', '')}  {event.get('actor', '?')} ({role}) {what}"


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
    told: set[str] = set()
    view: SessionView | None = None
    runbook_told = False
    audit_seen = 0
    with watching(session_id), console.status(f"waiting for session {session_id}…") as spinner:
        for view in client.watch(session_id, poll_interval=interval, timeout=timeout):
            if not runbook_told and (line := runbook_line(view.session)):
                console.print(line, style="dim", markup=False, soft_wrap=True)
                runbook_told = True
            for event in _new_events(view, seen):
                print_event(console, event, told)
            for action in view.audit[audit_seen:]:
                console.print(f"by {audit_line(action)}", style="bold", markup=False)
            audit_seen = len(view.audit)
            stage = view.session.get("current_stage")
            spinner.update(
                f"session {session_id}: {view.status.value}"
                + (f", stage {stage}" if stage is not None else "")
            )
    assert view is not None
    return print_outcome(console, view)


# ─── chat: the answer as it arrives ──────────────────────────────────────────


def streaming_text(progress: dict[str, Any] | None) -> Text | None:
    """What the live area shows of a call streaming now: its text, else its thinking.

    Args:
        progress: An execution's ``progress`` in the session view (None between calls).

    Returns:
        The answer so far, or (dim) the thinking before the answer starts; None
        when nothing has streamed yet.
    """
    if not progress:
        return None
    text = str(progress.get("text") or "")
    if text:
        return Text(text)
    thinking = str(progress.get("thinking") or "")
    return Text(thinking, style="dim italic") if thinking else None


class LiveAnswer:
    """The live area of ``tarsy chat``: the last lines of the streaming answer, then a spinner.

    Only the tail that fits the terminal is drawn: a live area taller than the
    screen cannot be redrawn in place.
    """

    def __init__(self) -> None:
        """Start with nothing streamed."""
        self.progress: dict[str, Any] | None = None
        self._spinner = Spinner("dots", text="the assistant is working…", style="magenta")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Render the answer's tail and the spinner line."""
        text = streaming_text(self.progress)
        if text is not None:
            room = max(1, (options.height or options.max_height) - 1)
            lines = console.render_lines(text, options.update(height=None), pad=False)
            for line in lines[-room:]:
                yield from line
                yield Segment.line()
        yield self._spinner


def running_chat(view: SessionView) -> dict[str, Any] | None:
    """The session's chat execution answering now (the newest not ended), or None.

    Args:
        view: The session view.

    Returns:
        The execution as the view has it, or None when no chat is running.
    """
    running = [
        e
        for e in view.executions
        if e.get("role") == "chat" and not ExecutionStatus(e["status"]).is_terminal
    ]
    return max(
        running, key=lambda e: (str(e.get("created_at", "")), int(e.get("agent_index", 0))),
        default=None,
    )  # fmt: skip


def follow_chat(
    client: TarsyClient,
    session_id: str,
    execution_id: str,
    console: Console,
    *,
    timeout: float,
    interval: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print a chat execution's timeline, with the answer live as it streams, until it ends.

    Args:
        client: The client.
        session_id: The session.
        execution_id: The chat's execution.
        console: Where to print; the live area is drawn only on a terminal.
        timeout: Give up after this many seconds.
        interval: Seconds between polls.
        sleep: How to wait between polls (tests pass a no-op).

    Returns:
        ``EXIT_OK`` when the chat completed, ``EXIT_SESSION_FAILED`` when it ended otherwise.

    Raises:
        ApiError: The session has no such execution, or it did not end in time.
    """
    deadline = time.monotonic() + timeout
    printed = 0
    answer = LiveAnswer()
    # Transient: once the step commits, the real events replace the streamed text.
    with (
        watching(session_id),
        Live(answer, console=console, transient=True, refresh_per_second=8) as live,
    ):
        while True:
            view = client.session(session_id)
            execution = next(
                (e for e in view.executions if e["execution_id"] == execution_id), None
            )
            if execution is None:
                raise ApiError(f"session {session_id} has no execution {execution_id}")
            events = execution.get("timeline", [])
            for event in events[printed:]:
                print_event(console, {**event, "stage": CHAT_STAGE, "agent": execution["agent"]})
            printed = len(events)
            answer.progress = execution.get("progress")
            live.refresh()  # now, not at the next tick: each poll may bring new text
            status = ExecutionStatus(execution["status"])
            if status.is_terminal:
                return EXIT_OK if status is ExecutionStatus.COMPLETED else EXIT_SESSION_FAILED
            if time.monotonic() > deadline:
                raise ApiError(f"no answer after {timeout:.0f}s")
            sleep(interval)


def chat_session(client: TarsyClient, args: argparse.Namespace, console: Console) -> int:
    """``tarsy chat``: ask (or with ``--watch`` find the running chat), then follow the answer.

    Raises:
        UsageError: A question with ``--watch``, neither, or no chat running to watch.
    """
    session_id: str = args.session_id
    if args.watch and args.question is not None:
        raise UsageError("give a question or --watch, not both")
    if args.watch:
        execution = running_chat(client.session(session_id))
        if execution is None:
            raise UsageError(
                f"no chat is running on session {session_id}; "
                f"ask one with: tarsy chat {session_id} QUESTION"
            )
        execution_id = str(execution["execution_id"])
    elif args.question is None:
        raise UsageError("no question: give one, or --watch to follow a running chat")
    else:
        execution_id = client.chat(session_id, args.question)
    return follow_chat(
        client,
        session_id,
        execution_id,
        console,
        timeout=args.timeout,
        interval=args.interval,
    )


# ─── cancel one agent ────────────────────────────────────────────────────────


def _describe(execution: dict[str, Any]) -> str:
    role = execution.get("role", "agent")
    kind = "" if role == "agent" else f" [{role}]"
    return f"{execution.get('agent')}{kind} ({execution['execution_id']})"


def resolve_agent(executions: Sequence[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The execution ``tarsy cancel --agent`` means: an execution id, or a running agent's name.

    Args:
        executions: The session view's executions.
        wanted: An execution id of the session (taken as is), or the name of
            exactly one execution that has not ended.

    Returns:
        The execution as the view has it.

    Raises:
        UsageError: The name is unknown among the running agents, or names
            several; the message lists the running agents and their execution ids.
    """
    for execution in executions:
        if execution["execution_id"] == wanted:
            return execution
    running = [e for e in executions if not ExecutionStatus(e["status"]).is_terminal]
    named = [e for e in running if e.get("agent") == wanted]
    if len(named) == 1:
        return named[0]
    listing = ", ".join(_describe(e) for e in running) or "none"
    if named:
        raise UsageError(
            f"{wanted!r} names {len(named)} running agents; give an execution id. "
            f"Running: {listing}"
        )
    raise UsageError(f"no running agent {wanted!r}. Running: {listing}")


def cancel_session(client: TarsyClient, args: argparse.Namespace, errors: Console) -> int:
    """``tarsy cancel``: the whole session, or with ``--agent`` one running agent of it."""
    session_id: str = args.session_id
    if args.agent is None:
        client.cancel(session_id)
        errors.print(f"cancel requested for {session_id}", markup=False)
        return EXIT_OK
    if not args.agent.strip():
        raise UsageError("--agent is empty; give an agent name or an execution id")
    execution = resolve_agent(client.session(session_id).executions, args.agent)
    client.cancel_agent(session_id, str(execution["execution_id"]))
    errors.print(f"cancel requested for {_describe(execution)} of {session_id}", markup=False)
    return EXIT_OK


# ─── the execution tree ──────────────────────────────────────────────────────


@dataclass(frozen=True)
class ExecutionNode:
    """One execution of the tree in ``tarsy show``, with the sub-agents it messaged."""

    execution: dict[str, Any]
    children: tuple[ExecutionNode, ...] = ()


def _by_creation(execution: dict[str, Any]) -> tuple[str, int]:
    return str(execution.get("created_at", "")), int(execution.get("agent_index", 0))


def execution_tree(executions: Sequence[dict[str, Any]]) -> dict[int, list[ExecutionNode]]:
    """The session's executions as trees, per stage: each agent above its sub-agents.

    An execution's parent is its ``parent_execution_id`` (set on sub-agents); one
    whose parent is not in the view is shown at its stage's top level.

    Args:
        executions: The session view's executions.

    Returns:
        The top-level nodes of each stage, stages in chain order and then the
        summary, chats and scoring; nodes in creation order.
    """
    ids = {e["execution_id"] for e in executions}
    children: dict[str, list[dict[str, Any]]] = {}
    roots: list[dict[str, Any]] = []
    for execution in sorted(executions, key=_by_creation):
        parent = execution.get("parent_execution_id")
        if parent in ids and parent != execution["execution_id"]:
            children.setdefault(str(parent), []).append(execution)
        else:
            roots.append(execution)
    placed: set[str] = set()

    def node(execution: dict[str, Any]) -> ExecutionNode:
        placed.add(execution["execution_id"])
        below = children.get(execution["execution_id"], [])
        return ExecutionNode(
            execution, tuple(node(c) for c in below if c["execution_id"] not in placed)
        )

    # Executions whose parents form a loop (never written so; a damaged view) stay visible.
    trees = [node(e) for e in roots]
    trees += [
        node(e) for e in sorted(executions, key=_by_creation) if e["execution_id"] not in placed
    ]
    stages: dict[int, list[ExecutionNode]] = {}
    for tree in trees:
        stages.setdefault(int(tree.execution.get("stage", 0)), []).append(tree)
    # Chain stages (0, 1, ...) first, then the sentinels: summary (-1), chat (-2), scoring (-3).
    order = sorted(stages, key=lambda index: (index < 0, abs(index)))
    return {index: stages[index] for index in order}


def agent_paths(executions: Sequence[dict[str, Any]]) -> dict[str, str]:
    """How the timeline names each sub-agent: its parent's name, then its own (nested: longer).

    Args:
        executions: The session view's executions.

    Returns:
        ``{execution_id: path}`` for the executions that have a parent in the view.
    """
    by_id = {e["execution_id"]: e for e in executions}
    paths: dict[str, str] = {}
    for execution in executions:
        names = [str(execution.get("agent"))]
        seen = {execution["execution_id"]}
        parent = by_id.get(str(execution.get("parent_execution_id")))
        while parent is not None and parent["execution_id"] not in seen:
            names.append(str(parent.get("agent")))
            seen.add(parent["execution_id"])
            parent = by_id.get(str(parent.get("parent_execution_id")))
        if len(names) > 1:
            paths[execution["execution_id"]] = AGENT_PATH_SEPARATOR.join(reversed(names))
    return paths


_STATUSES = frozenset(status.value for status in ExecutionStatus)


def execution_line(execution: dict[str, Any]) -> Text:
    """One execution in the tree: agent, role, status, iterations, tokens, execution id."""
    status = str(execution.get("status", "?"))
    style = _STATUS_STYLE.get(ExecutionStatus(status), "cyan") if status in _STATUSES else "white"
    line = Text(str(execution.get("agent", "?")), style="bold")
    role = execution.get("role", "agent")
    if role != "agent":
        line.append(f" [{str(role).replace('_', '-')}]", style="dim")
    line.append("  ")
    line.append(status, style=style)
    iterations = int(execution.get("iteration", 0))
    tokens = int((execution.get("tokens") or {}).get("total_tokens", 0))
    line.append(f" · {iterations} iteration{'' if iterations == 1 else 's'} · {tokens:,} tokens")
    line.append(f"  {execution['execution_id']}", style="dim")
    return line


def print_tree(console: Console, view: SessionView) -> None:
    """Print the executions as a tree: stage → agent → the sub-agents it messaged."""
    names = {stage.get("index"): stage.get("name") for stage in view.stages}
    tree = Tree("[bold]executions[/]")

    def add(branch: Tree, node: ExecutionNode) -> None:
        leaf = branch.add(execution_line(node.execution))
        for child in node.children:
            add(leaf, child)

    for index, nodes in execution_tree(view.executions).items():
        label = stage_label(index)
        if names.get(index):
            label += f" · {names[index]}"
        stage = tree.add(Text(label, style="cyan"))
        for node in nodes:
            add(stage, node)
    console.print(tree)


def show_session(view: SessionView, console: Console, page: str | None = None) -> int:
    """Print a whole session once (``page``: its URL in the browser, if known)."""
    session = view.session
    console.print(
        f"[bold]session[/] {escape(session['session_id'])}  "
        f"[bold]alert[/] {escape(session['alert_type'])}  "
        f"[bold]chain[/] {escape(session['chain_id'])}  [bold]status[/] {session['status']}"
    )
    if line := routing_line(session):
        console.print(line, style="dim", markup=False, soft_wrap=True)
    if page:
        console.print(f"[bold]page[/] {escape(page)}", highlight=False)
    if session.get("resolved_at"):
        console.print(f"[bold]resolved by its source[/] {session['resolved_at']}")
    if line := runbook_line(session):
        console.print(line, style="dim", markup=False, soft_wrap=True)
    if line := recalled_line(session):
        console.print(line, style="dim", markup=False, soft_wrap=True)
    told: set[str] = set()
    for event in _new_events(view, {}):
        print_event(console, event, told)
    if session.get("final_analysis") and not any(
        e.get("type") == "final_analysis" for e in view.timeline
    ):
        print_markdown(console, session["final_analysis"], title="final analysis")
    if view.executions:
        print_tree(console, view)
    if view.audit:
        console.print("[bold]who did what[/]")
        for action in view.audit:
            console.print(f"  {audit_line(action)}", markup=False, soft_wrap=True)
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


def investigate_again(
    client: TarsyClient, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    """Start the session's alert again; print the new session's id (then follow it)."""
    new_id = client.investigate_again(args.session_id)
    print(new_id, flush=True)
    if page := client.page_url(new_id):
        errors.print(f"page: {page}", markup=False)
    errors.print(f"investigates {args.session_id} again", markup=False)
    return watch_session(client, new_id, console) if args.watch else EXIT_OK


def write_draft(client: TarsyClient, args: argparse.Namespace, errors: Console) -> int:
    """``tarsy eval --draft-from ID``: a corrected session as a draft scenario, for review."""
    view = client.session(args.draft_from)
    try:
        draft = draft_scenario(view)
    except NotCorrected as e:
        raise UsageError(str(e)) from e
    path = Path(args.draft_out or Path(DRAFTS_DIR) / f"{draft['name']}.yaml")
    if path.exists():
        raise UsageError(f"{path} exists: a draft someone may be editing is not overwritten")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(draft_yaml(draft), encoding="utf-8")
    print(path, flush=True)
    answers = len(draft["x-draft"]["recorded_tool_answers"])
    errors.print(
        f"a DRAFT scenario for review ({answers} recorded tool answers): write its cluster, "
        "its findings' match patterns and a playbook before adding it to the scenarios",
        markup=False,
    )
    return EXIT_OK


def give_feedback(client: TarsyClient, args: argparse.Namespace, errors: Console) -> int:
    """Send a responder's verdict (and cause) on one session; say what was recorded."""
    if args.verdict is None:
        raise UsageError(f"feedback on {args.session_id}: say right, partly_right or wrong")
    recorded = Feedback.model_validate(client.feedback(args.session_id, args.verdict, args.cause))
    errors.print(
        f"recorded on {args.session_id}: {VERDICT_LABELS[recorded.verdict]}"
        + (f"; the real root cause: {recorded.root_cause}" if recorded.root_cause else ""),
        markup=False,
        soft_wrap=True,
    )
    return EXIT_OK


def collect_feedback(
    client: TarsyClient, since: datetime | None, pages: int
) -> tuple[FeedbackSummary, bool]:
    """The summary of the feedback on sessions (newest first); True when pages were left unread."""
    rows = []
    cursor: str | None = None
    for _ in range(max(pages, 1)):
        page = client.list_sessions(action="feedback", since=since, limit=MAX_LIMIT, cursor=cursor)
        rows.extend(page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            break
    return summarize(rows), cursor is not None


def print_feedback_summary(
    console: Console, summary: FeedbackSummary, now: datetime, *, partial: bool
) -> None:
    """Counts per verdict, then the latest corrections (the real causes people wrote)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("verdict")
    table.add_column("sessions", justify="right")
    for verdict in VERDICTS:
        table.add_row(VERDICT_LABELS[verdict], str(summary.counts[verdict]))
    table.add_row(Text("all", style="bold"), Text(str(summary.sessions), style="bold"))
    console.print(table)
    if partial:
        console.print("(the newest sessions only: add --pages for more)", style="dim")
    if not summary.corrections:
        console.print("no corrections yet", style="dim")
        return
    console.print("[bold]recent corrections[/]")
    for c in summary.corrections:
        console.print(
            f"  {c.session_id}  {c.alert_type}  {VERDICT_LABELS[c.verdict]}, "
            f"{short_span(now - c.at, units=1)} ago by {c.by}: {c.root_cause}",
            markup=False,
            soft_wrap=True,
        )


def feedback_command(
    client: TarsyClient, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    """``tarsy feedback SESSION VERDICT [--cause]`` gives feedback; ``tarsy feedback`` sums it."""
    if args.session_id is not None:
        return give_feedback(client, args, errors)
    now = clock()
    since = None if args.since is None else parse_when("--since", args.since, now)
    summary, partial = collect_feedback(client, since, args.pages)
    if args.json:
        print(summary.model_dump_json(indent=2))
        return EXIT_OK
    print_feedback_summary(console, summary, now, partial=partial)
    return EXIT_OK


def _run(args: argparse.Namespace, console: Console, errors: Console) -> int:
    """Run the parsed command; return the exit code."""
    if args.command == "eval" and args.draft_from:
        with _client(args) as client:
            return write_draft(client, args, errors)
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
            if page := client.page_url(submitted.session_id):
                errors.print(f"page:   {page}", style="dim", markup=False)
            if args.watch:
                return watch_session(client, submitted.session_id, console)
            return EXIT_OK
    with _client(args) as client:
        return _session_command(client, args, console, errors)


def _session_command(
    client: TarsyClient, args: argparse.Namespace, console: Console, errors: Console
) -> int:
    """Run a command that talks to the api about sessions; return the exit code."""
    if args.command == "watch":
        return watch_session(
            client, args.session_id, console, timeout=args.timeout, interval=args.interval
        )
    if args.command == "chat":
        return chat_session(client, args, console)
    if args.command == "cancel":
        return cancel_session(client, args, errors)
    if args.command == "resume":
        client.resume(args.session_id, args.iterations)
        errors.print(f"resumed {args.session_id}", markup=False)
        return watch_session(client, args.session_id, console) if args.watch else EXIT_OK
    if args.command == "again":
        return investigate_again(client, args, console, errors)
    if args.command == "list":
        return list_sessions(client, args, console, errors)
    if args.command == "feedback":
        return feedback_command(client, args, console, errors)
    if args.command == "audit":
        return audit_command(client, args, console, errors)
    if args.command == "erase":
        return erase_session(client, args, errors)
    view = client.session(args.session_id)
    if args.json:
        print(view.model_dump_json(indent=2, exclude_unset=True))
        return EXIT_OK
    return show_session(view, console, client.page_url(args.session_id))


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
    except StoppedWatching as e:
        errors.print(stopped_watching_message(e.session_id), style="yellow", markup=False)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

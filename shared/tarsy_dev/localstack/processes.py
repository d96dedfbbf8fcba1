"""Start and stop child processes, each in its own process group.

``gcloud beta emulators ... start`` forks a Java process; stopping the gcloud
PID alone leaves the emulator running. Each child therefore gets its own
session (``setsid``) and is stopped by signalling the whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

import httpx
from pydantic import BaseModel


class ProcessInfo(BaseModel):
    """A child process of the stack, enough to stop it from another process."""

    name: str
    pid: int
    log_path: str
    url: str = ""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    url: str = "",
) -> ProcessInfo:
    """Start ``argv`` in a new process group, output to ``log_dir/name.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    return ProcessInfo(name=name, pid=proc.pid, log_path=str(log_path), url=url)


def is_running(pid: int) -> bool:
    """Whether a process with this PID exists (and is not a zombie we own)."""
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(info: ProcessInfo, *, timeout: float = 10.0) -> None:
    """Stop a process group: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    try:
        os.killpg(info.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _group_alive(info.pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info.pid, signal.SIGKILL)


def terminate_all(processes: Sequence[ProcessInfo]) -> None:
    """Send SIGTERM to every running process group at once (their shutdowns then overlap)."""
    for info in processes:
        if is_running(info.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info.pid, signal.SIGTERM)


# A stop interrupted this many times in a row is given up, so that the others are still stopped.
STOP_ATTEMPTS = 3


def stop_all(
    processes: Sequence[ProcessInfo],
    *,
    progress: Callable[[str], None] = lambda _: None,
    stop_one: Callable[[ProcessInfo], None] = stop,
    alive: Callable[[int], bool] = is_running,
) -> tuple[list[str], list[str]]:
    """Stop every process group, last started first, saying which as it goes.

    A KeyboardInterrupt (a second Ctrl-C while a demo shuts down) does not cut
    the cleanup short: the interrupted stop is tried again, and the others are
    stopped all the same; otherwise the emulators and functions would keep running.

    Args:
        processes: In the order they were started.
        progress: Told ``stopping NAME (pid N)`` before each stop.
        stop_one: Stops one process group (injected by tests).
        alive: Whether a PID still runs (injected by tests).

    Returns:
        ``(stopped, left)``: the names stopped, and those that may still run
        because every attempt to stop them was interrupted.
    """
    stopped: list[str] = []
    left: list[str] = []
    for info in reversed(processes):
        for _ in range(STOP_ATTEMPTS):
            try:
                if alive(info.pid):
                    progress(f"stopping {info.name} (pid {info.pid})")
                    stop_one(info)
                    stopped.append(info.name)
                break
            except KeyboardInterrupt:
                progress(f"interrupted while stopping {info.name}; stopping it and the rest anyway")
        else:
            left.append(info.name)
    return stopped, left


@contextlib.contextmanager
def interrupts_held(on_interrupt: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Let no SIGINT or SIGTERM raise inside the block (cleanup that must finish).

    Each such signal calls ``on_interrupt`` instead. Only the main thread can
    set signal handlers; elsewhere the block runs unprotected.

    Args:
        on_interrupt: Called for each signal held (to say that stopping goes on).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        on_interrupt()

    held = (signal.SIGINT, signal.SIGTERM)
    saved = {signum: signal.signal(signum, hold) for signum in held}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _group_alive(pgid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
            if pid == 0:
                break
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: ProcessInfo | None = None,
) -> None:
    """Poll ``check`` until it is true; raise with the log tail if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if process is not None and not is_running(process.pid):
            raise RuntimeError(f"{what}: process exited early\n{log_tail(process)}")
        time.sleep(0.1)
    tail = log_tail(process) if process is not None else ""
    raise TimeoutError(f"{what}: not ready after {timeout:.0f}s\n{tail}")


def http_ok(url: str) -> Callable[[], bool]:
    """Return a check that ``GET url`` answers with a status below 500."""

    def check() -> bool:
        try:
            return httpx.get(url, timeout=1.0).status_code < 500
        except httpx.HTTPError:
            return False

    return check


def log_tail(info: ProcessInfo, lines: int = 30) -> str:
    """Return the last lines of a process's log."""
    try:
        text = Path(info.log_path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])

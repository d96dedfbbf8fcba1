"""``make up/demo/down``: inputs checked before anything starts, and a shutdown that finishes."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tarsy.settings import get_settings
from tarsy_dev.cli import StoppedWatching, _parser
from tarsy_dev.localstack import __main__ as localstack
from tarsy_dev.localstack import stack as stack_module
from tarsy_dev.localstack.processes import (
    ProcessInfo,
    interrupts_held,
    is_running,
    spawn,
    stop,
    stop_all,
)
from tarsy_dev.localstack.signin import write_key
from tarsy_dev.localstack.stack import STATE_FILE, Stack, StackOptions, load_stack, save_stack


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


class NotStarted(Exception):
    """Raised by the stand-in for start_stack: the stack would have started."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[StackOptions]:
    """Record the options start_stack gets, and start nothing."""
    calls: list[StackOptions] = []

    def start_stack(options: StackOptions, *_: object, **__: object) -> Stack:
        calls.append(options)
        raise NotStarted

    monkeypatch.setattr(localstack, "start_stack", start_stack)
    return calls


# A signing key as the stack writes one (the demo signs its CLI requests with it).
SIGNIN_KEY = Path(tempfile.gettempdir()) / f"tarsy-unit-{os.getuid()}" / "signin-key.pem"
write_key(SIGNIN_KEY)


def info(name: str, pid: int = 0) -> ProcessInfo:
    return ProcessInfo(name=name, pid=pid, log_path="/dev/null")


def fake_stack(processes: list[ProcessInfo]) -> Stack:
    return Stack(
        project_id="p",
        api_key="k",
        firestore_host="127.0.0.1:1",
        pubsub_host="127.0.0.1:2",
        ingest_url="http://127.0.0.1:3",
        api_url="http://127.0.0.1:4",
        step_url="http://127.0.0.1:5",
        steps_topic="t",
        model="none",
        processes=processes,
        signin_url="http://127.0.0.1:6",
        signin_key=str(SIGNIN_KEY),
    )


@pytest.fixture
def sleepers(tmp_path: Path) -> Iterator[list[ProcessInfo]]:
    """Three real process groups, standing in for the emulators and functions."""
    processes = [
        spawn(name, ["sleep", "300"], log_dir=tmp_path / "logs")
        for name in ("firestore-emulator", "pubsub-emulator", "api")
    ]
    yield processes
    for process in processes:
        stop(process, timeout=0)


# ─── inputs are checked before the stack starts ──────────────────────────────


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: "missing.json", "alert missing.json: no such file"),
        (lambda d: str(d), "a directory"),
        (lambda d: str(write(d / "a.json", "{nope")), "not JSON"),
        (lambda d: str(write(d / "a.json", "[1]")), "a JSON object"),
    ],
)
def test_demo_checks_the_alert_before_starting_anything(
    started: list[StackOptions],
    tmp_path: Path,
    make: Callable[[Path], str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--state-dir", str(tmp_path / ".local"), "demo", "--alert", make(tmp_path)]
    assert localstack.main(argv) == localstack.EXIT_USAGE
    err = capsys.readouterr().err
    assert started == []
    assert err.startswith("demo: alert ")
    assert expected in err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", ["up", "demo"])
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("", "no such file"),
        ("agent_chains: {x: {alert_types: [X], stages: [{name: s, agent: nobody}]}}", "nobody"),
    ],
)
def test_a_bad_config_fails_before_anything_starts(
    started: list[StackOptions],
    tmp_path: Path,
    command: str,
    config: str,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "my.yaml"
    if config:
        path.write_text(config)
    argv = ["--state-dir", str(tmp_path / ".local"), command, "--config", str(path)]
    assert localstack.main(argv) == localstack.EXIT_USAGE
    err = capsys.readouterr().err
    assert started == []
    assert err.startswith(f"{command}: config {path}")
    assert expected in err


GOOD_CONFIG = """
agent_chains:
  disk:
    alert_types: [DiskFull]
    stages: [{name: investigation, agent: investigator}]
"""


@pytest.mark.parametrize("command", ["up", "demo"])
def test_config_from_tarsy_config_path(
    started: list[StackOptions],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    write(tmp_path / "env.yaml", GOOD_CONFIG)
    monkeypatch.setenv("TARSY_CONFIG_PATH", "env.yaml")  # relative to where make runs
    with pytest.raises(NotStarted):
        localstack.main(["--state-dir", str(tmp_path / ".local"), command])
    [options] = started
    assert options.config_path == tmp_path / "env.yaml"


def test_config_flag_beats_tarsy_config_path(
    started: list[StackOptions], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "env.yaml", GOOD_CONFIG)
    write(tmp_path / "flag.yaml", GOOD_CONFIG)
    monkeypatch.setenv("TARSY_CONFIG_PATH", str(tmp_path / "env.yaml"))
    with pytest.raises(NotStarted):
        localstack.main(["--state-dir", str(tmp_path / ".local"), "up", "--config", "flag.yaml"])
    assert started[0].config_path == tmp_path / "flag.yaml"


# ─── stopping finishes, Ctrl-C or not ────────────────────────────────────────


def test_stop_all_goes_on_after_an_interrupt() -> None:
    calls: list[str] = []
    said: list[str] = []

    def stop_one(process: ProcessInfo) -> None:
        calls.append(process.name)
        if calls.count(process.name) == 1 and process.name == "api":
            raise KeyboardInterrupt  # the second Ctrl-C, mid-stop

    processes = [info("firestore-emulator", 1), info("api", 2), info("scheduler", 3)]
    stopped, left = stop_all(processes, progress=said.append, stop_one=stop_one, alive=bool)
    assert stopped == ["scheduler", "api", "firestore-emulator"]
    assert left == []
    assert calls == ["scheduler", "api", "api", "firestore-emulator"]
    assert said[:2] == ["stopping scheduler (pid 3)", "stopping api (pid 2)"]
    assert "interrupted while stopping api" in said[2]


def test_stop_all_gives_up_on_one_process_not_on_the_rest() -> None:
    def stop_one(process: ProcessInfo) -> None:
        if process.name == "api":
            raise KeyboardInterrupt

    processes = [info("firestore-emulator", 1), info("api", 2), info("scheduler", 3)]
    stopped, left = stop_all(processes, stop_one=stop_one, alive=bool)
    assert stopped == ["scheduler", "firestore-emulator"]
    assert left == ["api"]


def test_stop_all_skips_what_is_not_running() -> None:
    said: list[str] = []
    stopped, _ = stop_all(
        [info("gone", 0), info("here", 7)],
        progress=said.append,
        stop_one=lambda _: None,
        alive=bool,
    )
    assert stopped == ["here"]
    assert said == ["stopping here (pid 7)"]


def test_interrupts_held_turns_ctrl_c_into_a_note() -> None:
    # Python's own Ctrl-C handler to begin with, whatever the runner inherited (a shell
    # starts background jobs with SIGINT ignored); the inherited one is put back after.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        notes: list[str] = []
        with interrupts_held(lambda: notes.append("held")):
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
        assert notes == ["held", "held"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_stop_stack_keeps_the_state_files_while_something_may_run(tmp_path: Path) -> None:
    def refuse(process: ProcessInfo) -> None:
        raise KeyboardInterrupt

    running = fake_stack([info("me", 1)])
    running.processes[0].pid = os.getpid()  # alive, and never signalled
    save_stack(running, tmp_path)
    said: list[str] = []
    assert stack_module.stop_stack(running, tmp_path, said.append, stop_one=refuse) == []
    assert load_stack(tmp_path) == running
    assert "make down" in said[-1]


def test_demo_shutdown_survives_a_second_ctrl_c(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C during the watch, then again while the first process is being stopped."""
    running = fake_stack(sleepers)

    def start(options: StackOptions) -> Stack:
        save_stack(running, options.state_dir)  # as start_stack records what it started
        return running

    monkeypatch.setattr(localstack, "_start", start)

    class Interrupted:
        def __init__(self, **_: object) -> None: ...

        def __enter__(self) -> Interrupted:
            return self

        def __exit__(self, *_: object) -> None: ...

        def submit(self, alert: dict[str, Any]) -> None:
            raise KeyboardInterrupt  # the first Ctrl-C

    monkeypatch.setattr(localstack, "TarsyClient", Interrupted)
    second: list[str] = []

    def stop_with_a_second_ctrl_c(process: ProcessInfo, **kwargs: float) -> None:
        if not second:
            second.append(process.name)
            signal.raise_signal(signal.SIGINT)
        stop(process, **kwargs)

    monkeypatch.setattr(stack_module, "stop", stop_with_a_second_ctrl_c)
    sigterm = signal.getsignal(signal.SIGTERM)

    try:
        code = localstack.main(["--state-dir", str(tmp_path / ".local"), "demo"])
    except KeyboardInterrupt:
        pytest.fail("the second Ctrl-C cut the shutdown short")

    assert code == localstack.EXIT_INTERRUPTED
    assert second == ["api"]
    assert [p.name for p in sleepers if is_running(p.pid)] == []
    assert not (tmp_path / ".local" / STATE_FILE).exists()
    err = capsys.readouterr().err
    assert "Ctrl-C: still stopping the stack" in err
    assert "stopped 3 processes: api, pubsub-emulator, firestore-emulator" in err
    assert signal.getsignal(signal.SIGTERM) == sigterm


def test_down_says_what_it_stops(
    sleepers: list[ProcessInfo], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / ".local"
    save_stack(fake_stack(sleepers), state_dir)
    assert localstack.main(["--state-dir", str(state_dir), "down"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"stopping the local stack recorded in {state_dir / STATE_FILE}",
        *(f"stopping {p.name} (pid {p.pid})" for p in reversed(sleepers)),
        "stopped: api, pubsub-emulator, firestore-emulator",
    ]
    assert not any(is_running(p.pid) for p in sleepers)
    assert load_stack(state_dir) is None


def test_down_without_a_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert localstack.main(["--state-dir", str(tmp_path), "down"]) == 0
    assert "nothing to stop" in capsys.readouterr().err


def test_the_demo_alert_defaults_still_work() -> None:
    assert localstack.demo_alert(None, None)["alert_type"]
    assert json.dumps(localstack.demo_alert(None, "oom-killed"))


# ─── a second `make up` ──────────────────────────────────────────────────────


def test_a_second_up_keeps_the_running_stack_its_sessions_and_its_key(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = tmp_path / ".local"
    running = fake_stack(sleepers)
    save_stack(running, state_dir)

    def restart(options: StackOptions) -> Stack:
        raise AssertionError("a running stack was restarted")

    monkeypatch.setattr(localstack, "_start", restart)
    assert localstack.main(["--state-dir", str(state_dir), "up"]) == 0
    err = capsys.readouterr().err
    assert "already up" in err and "(API key: k)" in err
    assert "http://127.0.0.1:6/ui/" in err
    assert all(is_running(p.pid) for p in sleepers)
    assert load_stack(state_dir) == running


def _second_up(
    state_dir: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> list[StackOptions]:
    """Run ``make up CONFIG=config`` over the stack saved in ``state_dir``; return the restarts."""
    restarted: list[StackOptions] = []

    def restart(options: StackOptions) -> Stack:
        restarted.append(options)
        return fake_stack([])

    monkeypatch.setattr(localstack, "_start", restart)
    assert localstack.main(["--state-dir", str(state_dir), "up", "--config", str(config)]) == 0
    return restarted


def test_a_second_up_with_another_config_restarts_the_stack_and_says_why(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = tmp_path / ".local"
    save_stack(fake_stack(sleepers), state_dir)
    config = tmp_path / "mine.yaml"
    config.write_text("defaults: {max_iterations: 7}\n")

    [options] = _second_up(state_dir, config, monkeypatch)

    assert options.config_path == config
    err = " ".join(capsys.readouterr().err.split())
    assert f"restarting the local stack: it runs the built-in configuration only, not {config}" in (
        err
    )


def test_a_second_up_with_the_same_unchanged_config_keeps_the_stack_and_names_it(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = tmp_path / ".local"
    config = tmp_path / "mine.yaml"
    config.write_text("defaults: {max_iterations: 7}\n")
    running = fake_stack(sleepers).model_copy(
        update={"config_path": str(config), "config_digest": stack_module.config_digest(config)}
    )
    save_stack(running, state_dir)

    assert _second_up(state_dir, config, monkeypatch) == []

    err = " ".join(capsys.readouterr().err.split())
    assert f"kept as it is, with its sessions and {config}" in err
    assert load_stack(state_dir) == running


def test_a_second_up_after_the_config_was_edited_restarts_the_stack(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = tmp_path / ".local"
    config = tmp_path / "mine.yaml"
    config.write_text("defaults: {max_iterations: 7}\n")
    save_stack(
        fake_stack(sleepers).model_copy(
            update={"config_path": str(config), "config_digest": stack_module.config_digest(config)}
        ),
        state_dir,
    )
    config.write_text("defaults: {max_iterations: 9}\n")

    assert len(_second_up(state_dir, config, monkeypatch)) == 1

    assert f"{config} changed since the stack started" in " ".join(capsys.readouterr().err.split())


def test_up_over_a_dead_stack_starts_afresh_with_the_same_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / ".local"
    gone = spawn("api", ["true"], log_dir=tmp_path / "logs")
    stop(gone, timeout=5)
    save_stack(fake_stack([gone]).model_copy(update={"api_key": "kept-key"}), state_dir)
    started: list[StackOptions] = []

    def start(options: StackOptions, settings: object, progress: object = None) -> Stack:
        started.append(options)
        return fake_stack([]).model_copy(update={"api_key": options.api_key})

    monkeypatch.setattr(localstack, "start_stack", start)
    assert localstack.main(["--state-dir", str(state_dir), "up"]) == 0
    assert [options.api_key for options in started] == ["kept-key"]
    assert "(API key: kept-key)" in capsys.readouterr().err


def test_ctrl_c_while_the_demo_watches_stops_the_stack_without_a_traceback(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    running = fake_stack(sleepers)
    monkeypatch.setattr(localstack, "_start", lambda options: running)

    class Submitted:
        session_id = "s-1"

    class Client:
        def __init__(self, **_: object) -> None: ...

        def __enter__(self) -> Client:
            return self

        def __exit__(self, *_: object) -> None: ...

        def submit(self, alert: dict[str, Any]) -> Submitted:
            return Submitted()

    def watch(*args: object, **kwargs: object) -> int:
        raise StoppedWatching("s-1")  # Ctrl-C inside the watch

    monkeypatch.setattr(localstack, "TarsyClient", Client)
    monkeypatch.setattr(localstack, "watch_session", watch)
    code = localstack.main(["--state-dir", str(tmp_path / ".local"), "demo"])
    assert code == localstack.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "interrupted; stopping the stack" in err and "goes on" not in err
    assert [p.name for p in sleepers if is_running(p.pid)] == []


def test_a_generated_api_key_is_read_as_the_value_of_api_key_on_a_command_line(
    tmp_path: Path,
) -> None:
    for _ in range(500):  # base64 keys started with "-" one time in 64
        key = StackOptions(root=tmp_path, state_dir=tmp_path).api_key
        args = _parser().parse_args(["--api-key", key, "show", "some-session"])
        assert args.api_key == key


class _DemoClient:
    """The demo's client: its submit answers at once, as ingest does."""

    def __init__(self, **_: object) -> None: ...

    def __enter__(self) -> _DemoClient:
        return self

    def __exit__(self, *_: object) -> None: ...

    def submit(self, alert: dict[str, Any]) -> Any:
        return type("Submitted", (), {"session_id": "s-1"})()


def test_the_demo_refuses_to_stop_a_running_up_stack_and_says_how_to_use_it(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = tmp_path / ".local"
    save_stack(fake_stack(sleepers), state_dir)

    def restart(options: StackOptions) -> Stack:
        raise AssertionError("the running stack was replaced")

    monkeypatch.setattr(localstack, "_start", restart)
    assert localstack.main(["--state-dir", str(state_dir), "demo"]) == localstack.EXIT_USAGE
    err = capsys.readouterr().err
    assert "running, with its sessions" in err and "make down" in err
    assert "tarsy submit" in err and "http://127.0.0.1:6/ui/" in err
    assert all(is_running(p.pid) for p in sleepers)
    assert load_stack(state_dir) is not None


def test_at_a_terminal_the_demo_keeps_the_page_up_until_enter_then_stops(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    running = fake_stack(sleepers).model_copy(update={"kubeconfig": "/k/kubeconfig"})
    monkeypatch.setattr(localstack, "_start", lambda options: running)
    monkeypatch.setattr(localstack, "TarsyClient", _DemoClient)
    monkeypatch.setattr(localstack, "watch_session", lambda *a, **k: 0)
    monkeypatch.setattr(localstack, "interactive", lambda: True)
    up_while_waiting: list[bool] = []
    monkeypatch.setattr(
        localstack,
        "wait_for_enter",
        lambda: up_while_waiting.append(all(is_running(p.pid) for p in sleepers)),
    )
    state_dir = str(tmp_path / ".local")
    args = ["--state-dir", state_dir, "demo", "--scenario", "oom-killed"]
    assert localstack.main(args) == 0
    err = capsys.readouterr().err
    assert up_while_waiting == [True]  # the page's stack ran while the person looked
    assert "the page stays up while you look: http://127.0.0.1:6/ui/sessions/s-1" in err
    assert "press Enter" in err
    # The way back to the same incident names its scenario.
    assert "`make up SCENARIO=oom-killed` keeps the same demo cluster running" in err
    assert [p.name for p in sleepers if is_running(p.pid)] == []


def test_redirected_the_demo_stops_at_once_and_says_the_page_goes_with_it(
    sleepers: list[ProcessInfo],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(localstack, "_start", lambda options: fake_stack(sleepers))
    monkeypatch.setattr(localstack, "TarsyClient", _DemoClient)
    monkeypatch.setattr(localstack, "watch_session", lambda *a, **k: 0)
    monkeypatch.setattr(localstack, "interactive", lambda: False)

    def never() -> None:
        raise AssertionError("a demo without a terminal waited for Enter")

    monkeypatch.setattr(localstack, "wait_for_enter", never)
    args = ["--state-dir", str(tmp_path / ".local"), "demo", "--scenario", "oom-killed"]
    assert localstack.main(args) == 0
    err = capsys.readouterr().err
    assert "its page goes with it (make up SCENARIO=oom-killed keeps one up)" in err
    assert [p.name for p in sleepers if is_running(p.pid)] == []

"""``tarsy submit --source`` replays a saved webhook body; ``tarsy show`` names a resolution."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tarsy_dev import cli
from tarsy_dev.client import TarsyClient
from tests.unit.sources.samples import FIXTURES

INGEST = "http://ingest.test"
API = "http://api.test"
SID = "3f2a7c1e-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)  # no .local/stack.env


def serve(
    monkeypatch: pytest.MonkeyPatch, status: int, body: dict[str, Any]
) -> list[httpx.Request]:
    """Answer every request of the CLI's client with ``status`` and ``body``; record them."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(status, json=body)

    transport = httpx.MockTransport(answer)
    factory: Callable[..., TarsyClient] = functools.partial(TarsyClient, transport=transport)
    monkeypatch.setattr(cli, "TarsyClient", factory)
    return requests


def submit(*argv: str) -> int:
    return cli.main(["--ingest-url", INGEST, "--api-key", "k", "submit", *argv])


def test_submit_source_replays_the_body_unchanged_to_its_route(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = {
        "alerts": [
            {"fingerprint": "5f1a3c2b9e8d7a64", "session_id": SID, "outcome": "created"},
            {
                "fingerprint": "a07c44e1d2b3f985",
                "session_id": None,
                "outcome": "ignored",
                "reason": "beyond the cap",
            },
        ]
    }
    requests = serve(monkeypatch, 202, answer)
    path = FIXTURES / "alertmanager_firing_group.json"
    assert submit("--source", "alertmanager", str(path)) == cli.EXIT_OK
    [sent] = requests
    assert str(sent.url) == f"{INGEST}/alerts/alertmanager"
    assert sent.content == path.read_bytes()
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == "Bearer k"
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"created\t{SID}\t5f1a3c2b9e8d7a64",
        "ignored\t-\ta07c44e1d2b3f985",
    ]
    assert "beyond the cap" in err


def test_submit_source_sns_is_sent_as_text_and_reports_the_subscription(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "arn:aws:sns:eu-west-1:111122223333:tarsy-cloudwatch-alarms"
    requests = serve(
        monkeypatch, 200, {"subscription": "confirmed", "topic_arn": topic, "message_id": "m"}
    )
    path = FIXTURES / "sns_subscription_confirmation.json"
    assert submit("--source", "sns", str(path)) == cli.EXIT_OK
    [sent] = requests
    assert str(sent.url) == f"{INGEST}/alerts/sns"
    assert sent.headers["content-type"].startswith("text/plain")
    assert f"SNS subscription confirmed: {topic}" in capsys.readouterr().err


def test_submit_source_rejection_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = {
        "error": {
            "status": 422,
            "message": "Alertmanager webhook (version 4) does not match its documented shape",
            "details": [{"field": "version", "message": "Input should be '4'"}],
        }
    }
    serve(monkeypatch, 422, error)
    path = FIXTURES / "grafana_firing.json"
    assert submit("--source", "alertmanager", str(path)) == cli.EXIT_ERROR
    assert "version: Input should be '4'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--source", "nagios", "x.json"],
        ["--source", "alertmanager", "--watch", str(FIXTURES / "grafana_firing.json")],
    ],
)
def test_submit_source_usage_errors(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = serve(monkeypatch, 202, {"alerts": []})
    try:
        code = submit(*argv)
    except SystemExit as e:  # argparse's own usage errors
        code = int(str(e.code))
    assert code == cli.EXIT_ERROR
    assert requests == []


def test_show_names_the_resolution(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = {
        "session_id": SID,
        "alert_type": "KubePodCrashLooping",
        "chain_id": "default",
        "status": "active",
        "resolved_at": "2026-11-20T08:30:00Z",
        "tokens": {},
    }
    serve(monkeypatch, 200, {"session": session, "stages": [], "executions": [], "timeline": []})
    assert cli.main(["--api-url", API, "show", SID]) == cli.EXIT_OK
    assert "resolved by its source 2026-11-20T08:30:00Z" in capsys.readouterr().out

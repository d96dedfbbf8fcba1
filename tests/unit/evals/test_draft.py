"""``tarsy eval --draft-from``: a corrected session as a draft scenario, clearly for review."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tarsy_dev import cli
from tarsy_dev.client import SessionView
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.evals.draft import DRAFT_NOTE, NotCorrected, draft_scenario, draft_yaml
from tests.unit.test_client_cli import API, Recorder, clean_env, ok, serve

__all__ = ["clean_env", "serve"]  # fixtures, used by name

CAUSE = "the payments ConfigMap points DATABASE_HOST at a Service that does not exist"
ALERT = {"labels": {"alertname": "PodCrashLooping", "namespace": "checkout"}}


def tool_event(tool: str, arguments: dict[str, Any], answer: str) -> dict[str, Any]:
    return {
        "type": "mcp_tool_call",
        "content": answer,
        "metadata": {"server_name": "kubernetes", "tool_name": tool, "arguments": arguments},
    }


def view(feedback: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "session": {
            "session_id": "S-1_x", "alert_type": "kubernetes", "alert_data": json.dumps(ALERT),
            "status": "completed", "executive_summary": "The pod runs out of memory.",
            "feedback": feedback,
        },
        "stages": [], "executions": [],
        "timeline": [
            {"type": "llm_thinking", "content": "hmm", "metadata": {}},
            tool_event("pods_list", {"namespace": "checkout"}, "NAME READY\npayments-0 0/1"),
            tool_event("pods_log", {"name": "payments-0"}, "dial tcp: lookup payments-db-primary"),
            tool_event("pods_list", {"namespace": "checkout"}, "NAME READY\npayments-0 0/1"),
        ],
    }  # fmt: skip


CORRECTED = {"verdict": "wrong", "root_cause": CAUSE, "by": "rita@example.com",
             "at": "2026-11-27T10:00:00Z"}  # fmt: skip


def test_a_corrected_session_drafts_its_alert_its_tool_answers_and_the_real_cause() -> None:
    draft = draft_scenario(SessionView.model_validate(view(CORRECTED)))
    assert draft["name"] == "draft-s-1-x"
    assert draft["alert"] == {"alert_type": "kubernetes", "data": ALERT}
    assert draft["expected"] == {"summary": CAUSE, "findings": [{"fact": CAUSE, "match": []}]}
    assert draft["cluster"] is None
    notes = draft["x-draft"]
    assert notes["note"] == DRAFT_NOTE and notes["session_id"] == "S-1_x"
    assert notes["analysis_marked_wrong"] == "The pod runs out of memory."
    # Each distinct call once, in the order made, with what the cluster answered.
    assert [(a["tool"], a["arguments"]) for a in notes["recorded_tool_answers"]] == [
        ("pods_list", {"namespace": "checkout"}),
        ("pods_log", {"name": "payments-0"}),
    ]
    assert notes["recorded_tool_answers"][1]["answer"] == "dial tcp: lookup payments-db-primary"


def test_the_draft_says_it_is_a_draft_and_is_no_scenario_until_a_person_finishes_it() -> None:
    text = draft_yaml(draft_scenario(SessionView.model_validate(view(CORRECTED))))
    assert text.startswith("# DRAFT for review: NOT a scenario yet.")
    loaded = yaml.safe_load(text)
    assert loaded["expected"]["summary"] == CAUSE
    with pytest.raises(ValidationError):
        Scenario.model_validate(loaded)


@pytest.mark.parametrize(
    "feedback",
    [None, {**CORRECTED, "root_cause": None}, {**CORRECTED, "verdict": "right"}],
    ids=["no feedback", "no cause written", "confirmed right"],
)
def test_a_session_without_a_corrected_cause_gives_no_draft(
    feedback: dict[str, Any] | None,
) -> None:
    with pytest.raises(NotCorrected):
        draft_scenario(SessionView.model_validate(view(feedback)))


def test_the_cli_writes_the_draft_where_asked_and_never_over_another(
    serve: Callable[..., Recorder], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = serve(ok(view(CORRECTED)))
    out = tmp_path / "drafts" / "one.yaml"
    argv = ["eval", "--draft-from", "S-1_x", "--draft-out", str(out), "--api-url", API]
    assert cli.main(argv) == cli.EXIT_OK
    assert recorder.requests[0].url.path == "/sessions/S-1_x"
    assert yaml.safe_load(out.read_text())["expected"]["summary"] == CAUSE
    captured = capsys.readouterr()
    assert (
        captured.out.strip() == str(out) and "DRAFT scenario for review (2 recorded" in captured.err
    )
    assert cli.main(argv) == cli.EXIT_ERROR
    assert "is not overwritten" in capsys.readouterr().err


def test_the_cli_refuses_a_session_nobody_corrected(
    serve: Callable[..., Recorder], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(ok(view(None)))
    argv = ["eval", "--draft-from", "S-1_x", "--draft-out", str(tmp_path / "x.yaml"),
            "--api-url", API]  # fmt: skip
    assert cli.main(argv) == cli.EXIT_ERROR
    assert "has no corrected cause" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()

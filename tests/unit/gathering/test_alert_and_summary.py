"""What the alert says about itself, and the findings standing in when the model fails."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tarsy.engine.transitions import fail_session
from tarsy.evidence.alert import alert_facts
from tarsy.models import ErrorInfo, ExecutionStatus, Session

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_whole_alertmanager_notification_gives_its_first_firing_alert() -> None:
    notification = {
        "commonLabels": {"cluster": "eu-1"},
        "alerts": [
            {"status": "resolved", "labels": {"alertname": "Old", "pod": "a"}},
            {
                "status": "firing",
                "labels": {"alertname": "PodCrashing", "pod": "b", "namespace": "shop"},
                "annotations": {"summary": "b restarts"},
                "startsAt": "2026-01-01T10:00:00Z",
            },
        ],
    }
    facts = alert_facts(json.dumps(notification))
    assert facts.name == "PodCrashing"
    assert facts.labels == {"cluster": "eu-1", "alertname": "PodCrashing", "pod": "b",
                            "namespace": "shop"}  # fmt: skip
    assert facts.annotations == {"summary": "b restarts"}
    assert facts.starts_at == datetime(2026, 1, 1, 10, tzinfo=UTC)


def test_a_flat_alert_names_things_with_its_own_text_fields() -> None:
    facts = alert_facts(json.dumps({"pod": "api-0", "namespace": "shop", "restarts": 4}))
    assert facts.labels == {"pod": "api-0", "namespace": "shop"}


def test_free_text_and_hostile_json_give_empty_facts() -> None:
    assert alert_facts("disk full on db-1").labels == {}
    assert alert_facts("[" * 5000).labels == {}
    assert alert_facts(json.dumps({"labels": ["not", "a", "mapping"]})).labels == {}


def _session(findings: list[str]) -> Session:
    return Session(
        session_id="s", alert_type="k", alert_data="{}", chain_id="c",
        status=ExecutionStatus.ACTIVE, findings=findings,
    )  # fmt: skip


def test_the_findings_stand_in_the_executive_summary_when_the_investigation_fails() -> None:
    error = ErrorInfo(message="the model failed twice")
    update = fail_session(_session(["web-1 exits 1.", "HOST changed."]), error, NOW)
    assert update.executive_summary == (
        "The investigation did not finish (the model failed twice). "
        "tarsy's automatic checks of the evidence found:\n- web-1 exits 1.\n- HOST changed."
    )


def test_a_cancelled_session_or_one_without_findings_gets_no_summary() -> None:
    error = ErrorInfo(message="stopped")
    cancelled = fail_session(_session(["x"]), error, NOW, status=ExecutionStatus.CANCELLED)
    assert cancelled.executive_summary is None
    assert fail_session(_session([]), error, NOW).executive_summary is None

"""Metric log lines: each step, model call and session end as one structured line.

They feed the log-based metrics of ``infra/monitoring.tf``; the field names
checked here are the ones its filters and extractors read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from tarsy import telemetry
from tarsy.log import CloudLoggingFormatter
from tarsy.settings import Settings


class Lines(logging.Handler):
    """Keeps every record of the ``tarsy.metrics`` logger, rendered as Cloud Logging JSON."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict[str, object]] = []
        self._format = CloudLoggingFormatter()

    def emit(self, record: logging.LogRecord) -> None:
        self.entries.append(json.loads(self._format.format(record)))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    metrics_logger = logging.getLogger("tarsy.metrics")
    metrics_logger.addHandler(handler)
    root = logging.getLogger()
    level = root.level
    # A quiet deployment (log level WARNING) still writes its metric lines.
    root.setLevel(logging.WARNING)
    telemetry.reset()
    yield handler
    telemetry.reset()
    root.setLevel(level)
    metrics_logger.removeHandler(handler)


def test_metric_lines_are_off_unless_the_setting_turns_them_on(lines: Lines) -> None:
    telemetry.setup(Settings(), "tarsy-step")
    with telemetry.step_span("tarsy-steps", {}, session_id="s", execution_id="e", kind="iterate"):
        pass
    telemetry.record_session_end("completed", chain_id="kubernetes")
    assert not telemetry.metric_logs()
    assert lines.entries == []


def test_a_step_a_model_call_and_a_session_end_each_write_one_line(lines: Lines) -> None:
    telemetry.setup(Settings(TARSY_METRIC_LOGS=True), "tarsy-step")
    assert telemetry.metric_logs()

    with pytest.raises(RuntimeError):
        with telemetry.step_span(
            "tarsy-steps", {}, session_id="s", execution_id="e", kind="iterate", step=2
        ):
            raise RuntimeError("boom")
    with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="gemini-2.5-pro") as call:
        call.record_usage(input_tokens=1200, output_tokens=80, reasoning_tokens=20)
    with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="gemini-2.5-pro") as call:
        call.fail("rate_limit", "429 after 3 retries")
    telemetry.record_session_end(
        "timed_out", chain_id="kubernetes", total_tokens=5400, cost_usd=0.0125
    )

    def without_time(entry: dict[str, object]) -> dict[str, object]:
        assert isinstance(entry.pop("time"), str)
        assert isinstance(entry.pop("seconds", 0.0), float)
        return entry

    step, ok_call, failed_call, ended = (without_time(e) for e in lines.entries)
    assert step == {
        "severity": "INFO",
        "message": "metric step",
        "logger": "tarsy.metrics",
        "tarsy_metric": "step",
        "kind": "iterate",
        "outcome": "error",
    }
    assert ok_call == {
        "severity": "INFO",
        "message": "metric model_call",
        "logger": "tarsy.metrics",
        "tarsy_metric": "model_call",
        "model": "gemini-2.5-pro",
        "provider": "gcp.vertex_ai",
        "outcome": "ok",
        "input_tokens": 1200,
        "output_tokens": 100,
    }
    assert failed_call["outcome"] == "error"
    assert failed_call["error_type"] == "rate_limit"
    assert "input_tokens" not in failed_call
    assert ended == {
        "severity": "INFO",
        "message": "metric session_end",
        "logger": "tarsy.metrics",
        "tarsy_metric": "session_end",
        "status": "timed_out",
        "chain": "kubernetes",
        "total_tokens": 5400,
        "cost_usd": 0.0125,
    }

"""The sample bodies in ``tarsy_dev.samples`` are what each route accepts (issue 23, item 7)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from tarsy.intake.sources.alertmanager import AlertmanagerReceiver
from tarsy.intake.sources.alertmanager_api import AlertmanagerApiReceiver
from tarsy.intake.sources.config import AlertSourcesConfig
from tarsy.intake.sources.grafana import GrafanaReceiver
from tarsy.intake.sources.pagerduty import PagerDutyReceiver
from tarsy.intake.sources.sns import normalize_sns, parse_sns
from tarsy.models import AlertSubmission

SAMPLES = resources.files("tarsy_dev.samples")
CONFIG = AlertSourcesConfig()


def sample(name: str) -> bytes:
    return SAMPLES.joinpath(name).read_bytes()


def test_the_api_samples_are_valid_submissions() -> None:
    for name in ("pod-crashloop.json", "api-high-latency.json"):
        submission = AlertSubmission.model_validate(json.loads(sample(name)))
        assert submission.alert_type


def test_the_alertmanager_sample_is_one_firing_crash_loop() -> None:
    [alert] = AlertmanagerReceiver().alerts(sample("alertmanager.json").decode(), CONFIG)
    assert (alert.alert_type, alert.event) == ("KubePodCrashLooping", "firing")
    assert "payments-api" in json.dumps(alert.data)


def test_the_grafana_samples_are_one_firing_latency_alert_each() -> None:
    [webhook] = GrafanaReceiver().alerts(sample("grafana.json").decode(), CONFIG)
    [api] = AlertmanagerApiReceiver().alerts(
        sample("grafana-alertmanager-api.json").decode(), CONFIG
    )
    for alert in (webhook, api):
        assert (alert.alert_type, alert.event) == ("HighRequestLatency", "firing")


def test_the_pagerduty_sample_is_a_triggered_incident() -> None:
    [alert] = PagerDutyReceiver().alerts(sample("pagerduty.json").decode(), CONFIG)
    assert alert.event == "firing"
    assert "payments-api" in alert.alert_type


def test_the_sns_sample_is_a_cloudwatch_alarm_notification() -> None:
    outcome: Any = normalize_sns(parse_sns(sample("sns-cloudwatch-alarm.json")), CONFIG.sns)
    [alert] = outcome
    assert alert.event == "firing" and "payments-db-cpu-high" in json.dumps(alert.data)


def test_every_sample_is_listed_in_the_samples_readme() -> None:
    readme = SAMPLES.joinpath("README.md").read_text()
    names = [f.name for f in SAMPLES.iterdir() if f.name.endswith(".json")]
    assert names and all(f"`{name}`" in readme for name in names)

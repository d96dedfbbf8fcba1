"""The evidence brief: findings first, cited evidence next, compact, within its budget."""

from __future__ import annotations

import json
from typing import Any

from tarsy.evidence.brief import (
    brief_chars,
    compact,
    evidence_label,
    evidence_text,
    findings_text,
)
from tarsy.evidence.gather import GatheredCall
from tarsy.evidence.snapshot import Detection, ObjectRef
from tarsy.tools.base import ToolResult


def gathered(n: int, tool: str, text: str, **arguments: Any) -> GatheredCall:
    result = ToolResult(
        call_id=f"gather-{n:03d}", name=f"kubernetes.{tool}", arguments=arguments,
        content=text, full_content=text,
    )  # fmt: skip
    return GatheredCall(collector="test", round=0, result=result)


SUBJECT = ObjectRef(kind="Pod", name="web-1", namespace="shop")


def test_labels_number_the_gathered_calls_from_one() -> None:
    assert evidence_label("gather-000") == "E1"
    assert evidence_label("gather-011") == "E12"


def test_findings_are_numbered_with_their_weight_and_the_evidence_they_cite() -> None:
    detections = [
        Detection(check="a", subject=SUBJECT, finding="web-1 exits 1.", evidence=["gather-002"],
                  severity=1),
        Detection(check="b", subject=SUBJECT, finding="web-1 restarted 4 times.", severity=2),
    ]  # fmt: skip
    assert findings_text(detections) == (
        "1. (likely cause) web-1 exits 1. [E3]\n2. (symptom) web-1 restarted 4 times."
    )


def test_a_secret_shows_its_key_names_and_never_its_values() -> None:
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
        "data: {password: c2VjcmV0, user: YQ==}\n"
    )
    shown = compact("object", secret, is_error=False)
    assert "password" in shown and "user" in shown
    assert "c2VjcmV0" not in shown and "YQ==" not in shown


def test_bookkeeping_fields_and_the_applied_configuration_are_left_out() -> None:
    applied = json.dumps({"data": {"HOST": "a"}})
    body = (
        "kind: ConfigMap\nmetadata:\n  name: web\n  uid: 123-abc\n  resourceVersion: '9'\n"
        f"  managedFields: [{{manager: kubectl}}]\n  annotations:\n"
        f"    kubectl.kubernetes.io/last-applied-configuration: '{applied}'\ndata: {{HOST: b}}\n"
    )
    shown = compact("object", body, is_error=False)
    assert "uid" not in shown and "managedFields" not in shown and "resourceVersion" not in shown
    assert "HOST: b" in shown and '"HOST": "a"' not in shown


def test_only_warning_events_are_shown_one_per_line_newest_first() -> None:
    text = """\
- InvolvedObject: {Kind: Pod, Name: web-1}
  Message: Started container web
  Namespace: shop
  Reason: Started
  Timestamp: 2026-01-01 10:00:00 +0000 UTC
  Type: Normal
- InvolvedObject: {Kind: Pod, Name: web-1}
  Message: Back-off restarting failed container
  Namespace: shop
  Reason: BackOff
  Timestamp: 2026-01-01 10:05:00 +0000 UTC
  Type: Warning
- InvolvedObject: {Kind: Pod, Name: web-1}
  Message: 'Readiness probe failed: HTTP probe failed with statuscode: 503'
  Namespace: shop
  Reason: Unhealthy
  Timestamp: 2026-01-01 10:06:00 +0000 UTC
  Type: Warning
"""
    assert compact("events", text, is_error=False).splitlines() == [
        "2026-01-01 10:06:00Z Unhealthy Pod shop/web-1: "
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        "2026-01-01 10:05:00Z BackOff Pod shop/web-1: Back-off restarting failed container",
    ]


def test_a_long_log_keeps_its_last_lines() -> None:
    log = "\n".join(f"line {n}" for n in range(100))
    shown = compact("log", log, is_error=False).splitlines()
    assert shown[0] == "(75 earlier lines not shown)" and shown[-1] == "line 99"


def test_cited_evidence_comes_first_and_what_does_not_fit_is_named_not_shown() -> None:
    lines = {mark: "\n".join(mark * 45 for _ in range(20)) for mark in "xy"}
    calls = [
        gathered(0, "pods_log", lines["x"], name="a"),
        gathered(1, "pods_log", lines["y"], name="b"),
        gathered(2, "pods_log", "the cited line", name="c"),
    ]
    cited = [Detection(check="c", subject=SUBJECT, finding="f", evidence=["gather-002"])]
    text = evidence_text(calls, cited, budget_chars=1200)
    assert text.index("[E3]") < text.index("[E1]")
    assert "the cited line" in text and lines["x"] in text and "y" * 45 not in text
    omitted = '[E2] kubernetes.pods_log {"name": "b"}'
    assert f"Gathered but not shown here (call the tool to read it):\n{omitted}" in text


def test_the_brief_is_capped_by_a_small_context_window() -> None:
    assert brief_chars(6000, None, 0.35) == 21000
    assert brief_chars(6000, 8192, 0.35) == int(2867 * 3.5)

"""Investigate again: what the new session is routed by."""

from __future__ import annotations

from tarsy.commands.sessions import alert_object


def test_alert_data_is_routed_again_by_its_labels_when_it_was_json() -> None:
    assert alert_object('{"labels": {"pod": "api-0"}}') == {"labels": {"pod": "api-0"}}


def test_alert_data_that_was_text_stays_text() -> None:
    assert alert_object("pod api-0 down") == "pod api-0 down"

"""Which Slack message events are questions for tarsy (pure)."""

from __future__ import annotations

import pytest

from tarsy.intake.slack_events import MessageEvent, ignored_because, question_of

REPLY = {"type": "message", "channel": "C1", "user": "U1", "ts": "2.0", "thread_ts": "1.0"}


def test_a_persons_reply_in_a_thread_is_a_question_without_its_opening_mention() -> None:
    event = MessageEvent.model_validate({**REPLY, "text": "<@U0TARSY> <@U2>  why now?"})
    assert ignored_because(event) is None
    assert question_of(event.text) == "why now?"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"type": "app_mention"}, "event type 'app_mention'"),
        ({"subtype": "message_changed"}, "message subtype 'message_changed'"),
        ({"bot_id": "B1"}, "a bot's message"),
        ({"user": None}, "a bot's message"),
        ({"thread_ts": None}, "not a reply in a thread"),
        ({"thread_ts": "2.0"}, "not a reply in a thread"),
        ({"text": "<@U0TARSY>"}, "no question"),
    ],
)
def test_what_is_not_a_question_says_why(change: dict[str, object], reason: str) -> None:
    event = MessageEvent.model_validate({**REPLY, "text": "why?", **change})
    assert ignored_because(event) == reason


def test_a_reply_also_sent_to_the_channel_is_still_a_question() -> None:
    event = MessageEvent.model_validate({**REPLY, "text": "why?", "subtype": "thread_broadcast"})
    assert ignored_because(event) is None

"""Which Slack message events are questions for tarsy (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tarsy.intake.slack_events import (
    EventCallback,
    MessageEvent,
    budget_refusal,
    ignored_because,
    mentions,
    question_of,
    start_of_day,
)

REPLY = {"type": "message", "channel": "C1", "user": "U1", "ts": "2.0", "thread_ts": "1.0"}
BOTS = frozenset({"U0TARSY"})


def test_a_persons_reply_in_a_thread_is_a_question_without_its_opening_mention() -> None:
    event = MessageEvent.model_validate({**REPLY, "text": "<@U0TARSY> <@U2>  why now?"})
    assert ignored_because(event, bots=BOTS) is None
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
        ({"text": "why? cc <@U2>"}, "does not mention tarsy"),
    ],
)
def test_what_is_not_a_question_says_why(change: dict[str, object], reason: str) -> None:
    event = MessageEvent.model_validate({**REPLY, "text": "<@U0TARSY> why?", **change})
    assert ignored_because(event, bots=BOTS) == reason


def test_a_reply_also_sent_to_the_channel_is_still_a_question() -> None:
    event = MessageEvent.model_validate(
        {**REPLY, "text": "<@U0TARSY> why?", "subtype": "thread_broadcast"}
    )
    assert ignored_because(event, bots=BOTS) is None


def test_by_default_only_a_reply_that_mentions_the_bot_is_a_question() -> None:
    chatter = MessageEvent.model_validate({**REPLY, "text": "I restarted it, looks fine now"})
    asked = MessageEvent.model_validate({**REPLY, "text": "so why did it fail, <@U0TARSY|tarsy>?"})
    assert ignored_because(chatter, bots=BOTS) == "does not mention tarsy"
    assert ignored_because(asked, bots=BOTS) is None
    # With ``all``, every person's reply is one.
    assert ignored_because(chatter, questions="all", bots=BOTS) is None
    # Not knowing who the bot is, nothing mentions it.
    assert ignored_because(asked) == "does not mention tarsy"


def test_the_bot_is_who_the_event_was_authorized_for() -> None:
    callback = EventCallback.model_validate(
        {
            "type": "event_callback",
            "event_id": "Ev1",
            "event": {**REPLY, "text": "x"},
            "authorizations": [{"user_id": "U0TARSY", "is_bot": True}, {"user_id": "U9"}],
        }
    )
    assert callback.bot_users() == BOTS
    assert mentions("hey <@U0TARSY>", callback.bot_users())
    assert not mentions("hey <@U9>", callback.bot_users())


def test_a_budget_is_refused_once_spent_with_the_figure() -> None:
    assert budget_refusal(4_990_000_000, None) is None
    assert budget_refusal(4_990_000_000, 5.0) is None
    refusal = budget_refusal(5_012_300_000, 5.0)
    assert refusal is not None and "$5.0123" in refusal and "$5.00" in refusal


def test_the_budget_day_starts_at_midnight_utc() -> None:
    late_in_berlin = datetime(2026, 3, 2, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    assert start_of_day(late_in_berlin) == datetime(2026, 3, 1, tzinfo=UTC)

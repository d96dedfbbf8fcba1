"""Slack notifications against a loopback fake of the Slack Web API (real slack-sdk client)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from tarsy import secrets
from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.models import ErrorInfo, ExecutionStatus, Session, TokenUsage
from tarsy.notify import configured, slack
from tarsy.notify.ledger import Claim
from tarsy.notify.result import NotificationResult
from tarsy.notify.slack import build_message, find_thread, notify_session_end, score_of
from tarsy.settings import Settings
from tests.fake_slack import Failure, FakeSlack, fake_slack

CHAINS = """
agent_chains:
  database:
    alert_types: [PostgresReplicationLag]
    slack_channel: C0DATABASE
    stages:
      - name: triage
        agent: investigator
"""


class MemoryLedger:
    """The ledger's contract in memory: the first claim wins, results are kept.

    Leases are not modelled (the Firestore ledger's takeovers are tested on the
    emulator, tests/integration/test_notify.py): a claim is final.
    """

    def __init__(self) -> None:
        self.claims: list[tuple[str, str]] = []
        self.attempts = 0
        self.records: dict[tuple[str, str], NotificationResult] = {}
        self.retries: dict[tuple[str, str], timedelta | None] = {}

    async def claim(
        self, session_id: str, notifier: str, *, lease: timedelta | None = None
    ) -> Claim | None:
        self.attempts += 1
        if (session_id, notifier) in self.claims:
            return None
        self.claims.append((session_id, notifier))
        return Claim(attempt=1)

    async def record(
        self,
        session_id: str,
        notifier: str,
        result: NotificationResult,
        *,
        retry_after: timedelta | None = None,
    ) -> None:
        self.records[(session_id, notifier)] = result
        self.retries[(session_id, notifier)] = retry_after

    async def stale(self, limit: int) -> list[str]:
        return []


class BrokenLedger(MemoryLedger):
    async def claim(
        self, session_id: str, notifier: str, *, lease: timedelta | None = None
    ) -> Claim | None:
        raise ConnectionError("firestore is down")


@pytest.fixture
def slack_api() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


def settings_for(fake: FakeSlack, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": SecretStr(fake.token),
        "slack_channel": "C0DEFAULT",
        "slack_base_url": fake.base_url,
        "public_api_url": "https://api.example.test/",
        "project_id": "prod-project",
        **overrides,
    }
    return Settings.model_validate(values)


@pytest.fixture
def config() -> TarsyConfig:
    return load_config(Settings(), user_text=CHAINS)


def session(status: ExecutionStatus = ExecutionStatus.COMPLETED, **fields: Any) -> Session:
    values: dict[str, Any] = {
        "session_id": "sess-1",
        "alert_type": "KubePodCrashLooping",
        "alert_data": "pod api-0 restarts",
        "chain_id": "default",
        "status": status,
        "executive_summary": "The api pod crashes on a bad ConfigMap key.",
        "tokens": TokenUsage(input_tokens=1200, output_tokens=300, total_tokens=1700,
                             thinking_tokens=200),
        "cost": 12_340_000,  # nano-dollars, as stored
        **fields,
    }  # fmt: skip
    return Session.model_validate(values)


def blocks_text(post: dict[str, Any]) -> str:
    blocks = post["blocks"]
    if isinstance(blocks, str):  # sent form-encoded: a JSON string
        blocks = json.loads(blocks)
    return json.dumps(blocks)


# ─── once, not once per redelivery ────────────────────────────────────────────


@pytest.mark.parametrize(
    ("status", "extra", "headline", "expected"),
    [
        (
            ExecutionStatus.COMPLETED,
            {},
            "Investigation completed",
            "The api pod crashes on a bad ConfigMap key.",
        ),
        (
            ExecutionStatus.FAILED,
            {"error": ErrorInfo(message="stage 'triage' ended failed (model quota)")},
            "Investigation failed",
            "stage 'triage' ended failed (model quota)",
        ),
    ],
)
async def test_a_finished_session_posts_once_however_often_it_is_notified(
    slack_api: FakeSlack,
    config: TarsyConfig,
    status: ExecutionStatus,
    extra: dict[str, Any],
    headline: str,
    expected: str,
) -> None:
    ledger = MemoryLedger()
    ended = session(status, **extra)
    settings = settings_for(slack_api)

    results = [await notify_session_end(ended, settings, config, ledger) for _ in range(3)]

    assert [r.status for r in results] == ["sent", "duplicate", "duplicate"]
    [post] = slack_api.posted()
    assert post["channel"] == "C0DEFAULT"
    assert not post.get("thread_ts")
    assert headline in post["text"]
    assert expected in blocks_text(post)
    recorded = ledger.records[("sess-1", "slack")]
    assert recorded.status == "sent" and recorded.ts == results[0].ts


async def test_concurrent_duplicates_post_once(slack_api: FakeSlack, config: TarsyConfig) -> None:
    ledger = MemoryLedger()
    settings = settings_for(slack_api)

    results = await asyncio.gather(
        *(notify_session_end(session(), settings, config, ledger) for _ in range(3))
    )

    assert sorted(r.status for r in results) == ["duplicate", "duplicate", "sent"]
    assert len(slack_api.posted()) == 1


# ─── threading by fingerprint ─────────────────────────────────────────────────


@pytest.mark.parametrize("where", ["metadata", "alert_data"])
async def test_threaded_under_the_message_that_carries_the_fingerprint(
    slack_api: FakeSlack, config: TarsyConfig, where: str
) -> None:
    slack_api.history = [
        {"type": "message", "ts": "1699999999.000300", "text": "unrelated chatter"},
        {
            "type": "message",
            "ts": "1699999999.000200",
            "text": "",
            "attachments": [{"fallback": "FIRING  KubePodCrashLooping\n fp=ABC-123  api-0"}],
        },
        {"type": "message", "ts": "1699999999.000100", "text": "older, also fp=abc-123"},
    ]
    fingerprint = "fp=abc-123"
    fields: dict[str, Any] = (
        {"metadata": {"slack_message_fingerprint": fingerprint}}
        if where == "metadata"
        else {"alert_data": json.dumps({"slack_message_fingerprint": fingerprint, "pod": "x"})}
    )

    result = await notify_session_end(
        session(**fields), settings_for(slack_api), config, MemoryLedger()
    )

    assert result.status == "sent"
    assert result.thread_ts == "1699999999.000200"  # the newest match, found in an attachment
    [post] = slack_api.posted()
    assert post["thread_ts"] == "1699999999.000200"
    [request] = slack_api.history_requests
    assert request["channel"] == "C0DEFAULT" and request["limit"] == "50"
    assert float(request["oldest"]) > 0


async def test_no_matching_message_posts_a_new_one(
    slack_api: FakeSlack, config: TarsyConfig
) -> None:
    slack_api.history = [{"type": "message", "ts": "1.1", "text": "something else"}]
    metadata = {"slack_message_fingerprint": "fp=zzz"}

    result = await notify_session_end(
        session(metadata=metadata), settings_for(slack_api), config, MemoryLedger()
    )

    assert result.status == "sent" and result.thread_ts is None
    [post] = slack_api.posted()
    assert not post.get("thread_ts")


async def test_unreadable_history_still_posts_unthreaded(
    slack_api: FakeSlack, config: TarsyConfig
) -> None:
    slack_api.failures["conversations.history"] = Failure(error="missing_scope")
    metadata = {"slack_message_fingerprint": "fp=abc"}

    result = await notify_session_end(
        session(metadata=metadata), settings_for(slack_api), config, MemoryLedger()
    )

    assert result.status == "sent" and result.thread_ts is None
    assert len(slack_api.posted()) == 1


def test_find_thread_ignores_case_and_whitespace_and_follows_replies() -> None:
    messages: list[dict[str, Any]] = [
        {"ts": "3", "thread_ts": "1", "text": "reply mentioning  FP-9"},
        {"ts": "2", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}]},
    ]
    assert find_thread(messages, "fp-9") == "1"
    assert find_thread(messages, "   ") is None
    assert find_thread(messages, "fp-10") is None


# ─── failures are results ─────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("failure", "detail"),
    [(Failure(status=500), "500"), (Failure(error="channel_not_found"), "channel_not_found")],
)
async def test_a_failed_post_is_recorded_and_raises_nothing(
    slack_api: FakeSlack, config: TarsyConfig, failure: Failure, detail: str
) -> None:
    slack_api.failures["chat.postMessage"] = failure
    ledger = MemoryLedger()

    result = await notify_session_end(session(), settings_for(slack_api), config, ledger)

    assert result.status == "failed"
    assert result.detail is not None and detail in result.detail
    assert ledger.records[("sess-1", "slack")] == result
    # The first attempt failed: claimable again after the retry delay (the sweeper's),
    # not by a redelivery that comes meanwhile.
    assert result.attempt == 1 and ledger.retries[("sess-1", "slack")] == slack.RETRY_AFTER
    again = await notify_session_end(session(), settings_for(slack_api), config, ledger)
    assert again.status == "duplicate"
    assert slack_api.posted() == []


async def test_an_unreachable_slack_is_a_failed_result(config: TarsyConfig) -> None:
    with fake_slack() as gone:
        settings = settings_for(gone)
    result = await notify_session_end(session(), settings, config, MemoryLedger())
    assert result.status == "failed"


async def test_a_ledger_that_cannot_claim_sends_nothing(
    slack_api: FakeSlack, config: TarsyConfig
) -> None:
    result = await notify_session_end(session(), settings_for(slack_api), config, BrokenLedger())
    assert result.status == "failed" and result.detail is not None
    assert "firestore is down" in result.detail
    assert slack_api.posted() == []


# ─── configuration ────────────────────────────────────────────────────────────


async def test_off_unless_configured(slack_api: FakeSlack, config: TarsyConfig) -> None:
    ledger = MemoryLedger()
    no_token = settings_for(slack_api, slack_bot_token=None)
    no_channel = settings_for(slack_api, slack_channel="")

    for settings in (no_token, no_channel):
        result = await notify_session_end(session(), settings, config, ledger)
        assert result.status == "skipped"
    assert ledger.attempts == 0 and slack_api.posted() == []


async def test_a_running_session_is_not_announced_nor_claimed(
    slack_api: FakeSlack, config: TarsyConfig
) -> None:
    ledger = MemoryLedger()
    result = await notify_session_end(
        session(ExecutionStatus.ACTIVE), settings_for(slack_api), config, ledger
    )
    assert result.status == "skipped" and ledger.attempts == 0


async def test_a_chain_channel_overrides_the_default(
    slack_api: FakeSlack, config: TarsyConfig
) -> None:
    chained = session(chain_id="database", alert_type="PostgresReplicationLag")
    only_chain = settings_for(slack_api, slack_channel="")

    result = await notify_session_end(chained, only_chain, config, MemoryLedger())

    assert result.status == "sent" and result.channel == "C0DATABASE"
    assert [p["channel"] for p in slack_api.posted()] == ["C0DATABASE"]


def test_the_token_may_come_from_secret_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def fake_resolve(value: object, settings: Settings) -> str:
        asked.append(str(getattr(value, "secret", "")))
        return "xoxb-from-secret"

    monkeypatch.setattr(secrets, "resolve", fake_resolve)
    settings = Settings.model_validate({"slack_token_secret": "tarsy-slack-bot-token"})
    assert configured.slack(settings)
    assert slack.bot_token(settings) == "xoxb-from-secret"
    assert asked == ["tarsy-slack-bot-token"]


# ─── the message ──────────────────────────────────────────────────────────────


def test_the_message_says_what_an_on_call_engineer_needs() -> None:
    ended = session(alert_type="Disk <full> & more")
    message = build_message(
        ended,
        status_url="https://api.example.test/sessions/sess-1",
        console_url="https://console.example.test/sess-1",
        page_url="https://api.example.test/ui/sessions/sess-1",
    )
    text = json.dumps(message.blocks)
    assert "Investigation completed" in message.text and "sess-1" in message.text
    assert "Disk &lt;full&gt; &amp; more" in text
    assert "1,700 (in 1,200 / out 500)" in text  # thinking counts as output
    assert "$0.0123" in text
    assert "The api pod crashes on a bad ConfigMap key." in text
    assert "<https://api.example.test/sessions/sess-1|status>" in text
    assert "<https://api.example.test/ui/sessions/sess-1|open the investigation>" in text
    assert "Score" not in text


def test_long_summaries_are_truncated_for_slack() -> None:
    message = build_message(session(executive_summary="x" * 10_000), status_url=None,
                            console_url=None)  # fmt: skip
    longest = max(len(b.get("text", {}).get("text", "")) for b in message.blocks)
    assert longest < 3000
    assert "truncated" in json.dumps(message.blocks)


class Scored:
    def __init__(self, score: object) -> None:
        self.score = score


class TotalScore:
    total_score = 72


@pytest.mark.parametrize(
    ("holder", "expected"),
    [
        (Scored(87), 87.0),
        (Scored({"total_score": 64.5}), 64.5),
        (Scored(TotalScore()), 72.0),
        ({"score": 12}, 12.0),
        (Scored(None), None),
        (Scored(True), None),
        (Scored("high"), None),
        (object(), None),
    ],
)
def test_the_score_is_read_tolerantly(holder: object, expected: float | None) -> None:
    assert score_of(holder) == expected


def test_a_score_is_shown_when_the_session_has_one() -> None:
    message = build_message(session(score=91), status_url=None, console_url=None)
    assert "*Score*\\n91" in json.dumps(message.blocks)


# ─── found again: the session's marker ────────────────────────────────────────


def test_every_message_carries_the_session_in_its_metadata_and_its_text() -> None:
    message = build_message(session(), status_url=None, console_url=None)
    assert message.metadata == {
        "event_type": "tarsy_session_end",
        "event_payload": {"session_id": "sess-1"},
    }
    assert "(session sess-1)" in message.text


def test_an_earlier_post_is_found_by_metadata_or_by_text_and_only_for_its_session() -> None:
    by_metadata: dict[str, Any] = {
        "ts": "1.000002",
        "text": "edited by someone",
        "metadata": {"event_type": "tarsy_session_end", "event_payload": {"session_id": "s-1"}},
    }
    by_text: dict[str, Any] = {
        "ts": "1.000003",
        "text": ":x: Investigation failed: X (session s-2)",
    }
    others: list[dict[str, Any]] = [
        {"ts": "1.000004", "text": "about (session s-10)"},
        {
            "ts": "1.000005",
            "metadata": {"event_type": "deploy", "event_payload": {"session_id": "s-3"}},
        },
        {"ts": "1.000006", "text": "session s-3 without the marker"},
    ]
    messages = [*others, by_metadata, by_text]
    assert slack.find_posted(messages, "s-1") == "1.000002"
    assert slack.find_posted(messages, "s-2") == "1.000003"
    assert slack.find_posted(messages, "s-3") is None
    assert slack.find_posted(messages, "s-1".upper()) is None

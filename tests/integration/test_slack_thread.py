"""Questions asked in a session's Slack thread: signed, mapped to a role, answered there once.

Slack is the loopback fake, reached by the real slack-sdk (WebClient for the
notification, ``users.info`` and the answer; ``SignatureVerifier`` for the
events); the ledger and the sessions are on the Firestore emulator; the step
engine runs in process with a recording bus and delivers every message three
times, with :func:`tarsy.notify.session_end.on_session_end` after each, as the
wiring does. Events are signed here as Slack signs them (HMAC-SHA256 over
``v0:{timestamp}:{body}``), by the test's own code.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from google.cloud import firestore
from pydantic import SecretStr

from tarsy.app import Deps
from tarsy.config.schema import SlackConfig
from tarsy.engine.steps import handle
from tarsy.http.request import HttpRequest, HttpResponse
from tarsy.intake import slack_events
from tarsy.models import ExecutionStatus, Session, StepMessage, utcnow
from tarsy.notify.ledger import Claim, FirestoreLedger
from tarsy.notify.result import NotificationResult
from tarsy.notify.session_end import on_session_end, retry_stale
from tarsy.notify.slack import CLAIM_LEASE
from tarsy.notify.slack_thread import ANSWER_PREFIX, METADATA_EVENT
from tarsy_dev.fakes.bus import RecordingBus
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack
from tests.fake_slack import FakeSlack, fake_slack
from tests.integration.conftest import GRANTS, RESPONDER, VIEWER

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0ONCALL"
RITA, VICTOR = "U0RITA", "U0VICTOR"
BOT = "U0TARSY"  # the app's own user: a question mentions it


@pytest.fixture
def slack_api() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        fake.users = {RITA: RESPONDER, VICTOR: VIEWER}
        yield fake


@pytest.fixture
def ledger(deps: Deps) -> FirestoreLedger:
    settings = deps.settings
    return FirestoreLedger(
        firestore.AsyncClient(project=settings.project_id, database=settings.firestore_database)
    )


def with_slack(deps: Deps, slack_api: FakeSlack, bus: RecordingBus) -> Deps:
    settings = deps.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(slack_api.token),
            "slack_channel": CHANNEL,
            "slack_base_url": slack_api.base_url,
            "slack_signing_secret": SecretStr(SIGNING_SECRET),
            "public_api_url": "https://api.example.test",
            "access_grants": json.dumps(GRANTS),
        }
    )
    return replace(deps, settings=settings, bus=bus)


async def run(
    pending: list[StepMessage], local: Deps, bus: RecordingBus, ledger: FirestoreLedger
) -> None:
    """Deliver every message (and what it publishes) three times, as Pub/Sub may."""
    while pending:
        message = pending.pop(0)
        before = len(bus.published)
        for _ in range(3):
            await handle(message, local)
            await on_session_end(message.session_id, local, ledger=ledger)
        pending.extend(bus.published[before:])


async def investigated(
    local: Deps, ledger: FirestoreLedger, fake_gemini: FakeGemini, slack_api: FakeSlack
) -> tuple[Session, str]:
    """A session run to completion and announced in Slack; the announcement's ts."""
    assert isinstance(local.bus, RecordingBus)
    session = Session(
        session_id=f"thread-{uuid.uuid4()}",
        alert_type="kubernetes",
        alert_data='{"pod": "payments-api-0"}',
        chain_id="default",
    )
    await local.store.create_session(session)
    fake_gemini.script(FakeReply(text="The config map lost DB_URL."), FakeReply(text="Restore it."))
    start = StepMessage(session_id=session.session_id, kind="start_session")
    await run([start], local, local.bus, ledger)
    stored = await local.store.get_session(session.session_id)
    assert stored is not None and stored.status is ExecutionStatus.COMPLETED
    [announcement] = slack_api.posted()
    return stored, str(announcement["ts"])


def signed(body: dict[str, Any], *, secret: str = SIGNING_SECRET, age: float = 0) -> HttpRequest:
    raw = json.dumps(body).encode()
    timestamp = str(int(time.time() - age))
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, hashlib.sha256)
    return HttpRequest(
        method="POST",
        path=slack_events.PATH,
        headers={
            "content-type": "application/json",
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": "v0=" + digest.hexdigest(),
        },
        body=raw,
    )


def question(
    thread_ts: str, user: str = RITA, text: str = "<@U0TARSY> why did DB_URL go?"
) -> dict[str, Any]:
    return {
        "type": "event_callback",
        "team_id": "T0TEAM",
        "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T0TEAM", "user_id": BOT, "is_bot": True}],
        "event": {
            "type": "message",
            "channel": CHANNEL,
            "user": user,
            "text": text,
            "ts": f"{time.time():.6f}",
            "thread_ts": thread_ts,
        },
    }


@pytest.fixture
def local(deps: Deps, slack_api: FakeSlack) -> Deps:
    return with_slack(deps, slack_api, RecordingBus())


def thread_posts(slack_api: FakeSlack, thread_ts: str) -> list[dict[str, Any]]:
    return [p for p in slack_api.posted() if p.get("thread_ts") == thread_ts]


async def chats(local: Deps, session_id: str) -> list[str]:
    return [
        e.execution_id for e in await local.store.list_executions(session_id) if e.role == "chat"
    ]


async def test_a_signed_question_in_the_thread_is_answered_there_once(
    local: Deps, slack_api: FakeSlack, ledger: FirestoreLedger, fake_gemini: FakeGemini
) -> None:
    assert isinstance(local.bus, RecordingBus)
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    event = question(thread_ts)
    fake_gemini.script(FakeReply(text="DB_URL went with the config map's last rollout."))

    before = len(local.bus.published)
    response = await slack_events.handle(signed(event), local, ledger=ledger)

    assert response.status == 200, response.body
    assert response.body["session_id"] == session.session_id
    [chat_id] = await chats(local, session.session_id)
    assert response.body["execution_id"] == chat_id
    # Slack redelivers an event it thinks unanswered: taken once.
    again = await slack_events.handle(signed(event), local, ledger=ledger)
    assert again.body["ignored"] == "already taken"
    await run(list(local.bus.published[before:]), local, local.bus, ledger)

    [answer] = thread_posts(slack_api, thread_ts)
    assert answer["channel"] == CHANNEL
    assert "DB_URL went with the config map's last rollout." in answer["text"]
    assert METADATA_EVENT in str(answer["metadata"]) and chat_id in str(answer["metadata"])
    # The question the model saw is the text without the mention that opened it.
    assert "why did DB_URL go?" in fake_gemini.calls[-1].last_user_text()
    assert "<@U0TARSY>" not in fake_gemini.calls[-1].last_user_text()
    stored = await local.store.get_session(session.session_id)
    assert stored is not None and any(RESPONDER in key for key in stored.audit_keys)
    assert await chats(local, session.session_id) == [chat_id]


@pytest.mark.parametrize(
    "forgery",
    ["another secret", "five minutes old", "unsigned", "body changed", "timestamp not a number"],
)
async def test_a_forged_or_stale_event_is_refused_and_nothing_is_written(
    local: Deps,
    slack_api: FakeSlack,
    ledger: FirestoreLedger,
    fake_gemini: FakeGemini,
    forgery: str,
) -> None:
    assert isinstance(local.bus, RecordingBus)
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    posts_before, published_before = len(slack_api.posted()), len(local.bus.published)
    event = question(thread_ts)
    request = signed(event)
    if forgery == "another secret":
        request = signed(event, secret="not-the-apps-secret")
    elif forgery == "five minutes old":
        request = signed(event, age=6 * 60)
    elif forgery == "unsigned":
        request = request.model_copy(update={"headers": {"content-type": "application/json"}})
    elif forgery == "timestamp not a number":
        headers = {**request.headers, "x-slack-request-timestamp": "soon"}
        request = request.model_copy(update={"headers": headers})
    else:
        tampered = {**event, "event": {**event["event"], "user": RITA, "text": "delete it all"}}
        request = request.model_copy(update={"body": json.dumps(tampered).encode()})

    response: HttpResponse = await slack_events.handle(request, local, ledger=ledger)

    assert response.status == 401
    assert await chats(local, session.session_id) == []
    assert len(slack_api.posted()) == posts_before
    assert len(local.bus.published) == published_before
    event_claim = ledger._ref(session.session_id, slack_events.EVENT_PREFIX + event["event_id"])
    assert not (await event_claim.get()).exists


async def test_a_viewers_question_is_refused_in_the_thread_naming_the_role(
    local: Deps, slack_api: FakeSlack, ledger: FirestoreLedger, fake_gemini: FakeGemini
) -> None:
    assert isinstance(local.bus, RecordingBus)
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)

    response = await slack_events.handle(signed(question(thread_ts, VICTOR)), local, ledger=ledger)

    assert response.status == 200 and response.body["refused"] == "responder"
    [refusal] = thread_posts(slack_api, thread_ts)
    assert "responder" in refusal["text"] and f"<@{VICTOR}>" in refusal["text"]
    assert await chats(local, session.session_id) == []


async def test_slacks_url_verification_is_answered_with_its_challenge(
    local: Deps, ledger: FirestoreLedger
) -> None:
    body = {
        "type": "url_verification",
        "token": "legacy",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
    }

    response = await slack_events.handle(signed(body), local, ledger=ledger)

    assert (response.status, response.body) == (200, {"challenge": body["challenge"]})


async def test_bots_and_messages_outside_a_sessions_thread_are_ignored(
    local: Deps, slack_api: FakeSlack, ledger: FirestoreLedger, fake_gemini: FakeGemini
) -> None:
    assert isinstance(local.bus, RecordingBus)
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    own = question(thread_ts)
    own["event"] = {**own["event"], "bot_id": "B0TARSY", "subtype": "bot_message"}
    elsewhere = question("1600000000.000001")

    first = await slack_events.handle(signed(own), local, ledger=ledger)
    second = await slack_events.handle(signed(elsewhere), local, ledger=ledger)

    assert first.body["ignored"] == "message subtype 'bot_message'"
    assert second.body["ignored"] == "not a session's thread"
    assert thread_posts(slack_api, thread_ts) == []
    assert await chats(local, session.session_id) == []


class DyingLedger(FirestoreLedger):
    """The Firestore ledger, dying once after an answer was posted, before it is recorded."""

    def __init__(self, db: firestore.AsyncClient, clock: Callable[[], datetime]) -> None:
        super().__init__(db, clock)
        self.armed = False

    async def record(
        self,
        session_id: str,
        notifier: str,
        result: NotificationResult,
        *,
        retry_after: timedelta | None = None,
    ) -> None:
        if self.armed and notifier.startswith(ANSWER_PREFIX):
            self.armed = False
            raise Crash(notifier)
        await super().record(session_id, notifier, result, retry_after=retry_after)


class Crash(BaseException):
    """The process dies here (not an Exception: nothing catches it)."""


async def test_an_answer_posted_by_a_process_that_died_is_found_not_posted_again(
    local: Deps, slack_api: FakeSlack, fake_gemini: FakeGemini
) -> None:
    assert isinstance(local.bus, RecordingBus)
    now = [utcnow()]
    settings = local.settings
    ledger = DyingLedger(
        firestore.AsyncClient(project=settings.project_id, database=settings.firestore_database),
        lambda: now[0],
    )
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    fake_gemini.script(FakeReply(text="The rollout at 09:12 dropped DB_URL."))
    before = len(local.bus.published)
    await slack_events.handle(signed(question(thread_ts)), local, ledger=ledger)
    [chat_id] = await chats(local, session.session_id)

    # The chat runs with Slack unset (the engine's own session-end call, on the process's
    # ledger, does nothing); then the call that posts the answer dies before its record.
    silent = replace(local, settings=local.settings.model_copy(update={"slack_bot_token": None}))
    pending = list(local.bus.published[before:])
    while pending:
        message = pending.pop(0)
        published = len(local.bus.published)
        await handle(message, silent)
        pending.extend(local.bus.published[published:])
    ledger.armed = True
    with pytest.raises(Crash):
        await on_session_end(session.session_id, local, ledger=ledger)
    assert len(thread_posts(slack_api, thread_ts)) == 1  # posted, then the process died

    # While the claim's lease runs nobody posts; once it has run out, the sweeper's
    # call takes it over, finds the answer in the thread and records it.
    assert await retry_stale(local, ledger=ledger) == []
    now[0] += CLAIM_LEASE + timedelta(seconds=1)
    assert await retry_stale(local, ledger=ledger) == [session.session_id]

    [answer] = thread_posts(slack_api, thread_ts)
    assert "The rollout at 09:12 dropped DB_URL." in answer["text"]
    entry = (await ledger._ref(session.session_id, ANSWER_PREFIX + chat_id).get()).to_dict()
    assert entry is not None
    assert (entry["state"], entry["attempt"]) == ("sent", 2)
    assert entry["result"]["detail"] == "posted by an earlier attempt"


def test_the_ingest_function_routes_slack_events_and_refuses_them_when_not_configured(
    stack: Stack,
) -> None:
    # The stack's ingest process has no signing secret: the route exists, thread
    # questions are off, and no signature is even looked at.
    with httpx.Client(base_url=stack.ingest_url, timeout=10) as client:
        response = client.post(
            slack_events.PATH, json={"type": "url_verification", "challenge": "c"}
        )
    assert response.status_code == 404
    assert "not configured" in response.json()["error"]["message"]


# ─── once and on purpose (issue 42, point 6) ─────────────────────────────────


class ClockedLedger(FirestoreLedger):
    """The Firestore ledger on a clock the test moves; the process dies once where armed."""

    def __init__(self, deps: Deps) -> None:
        settings = deps.settings
        self.now = utcnow()
        super().__init__(
            firestore.AsyncClient(
                project=settings.project_id, database=settings.firestore_database
            ),
            lambda: self.now,
        )
        self.die_after_claim = False
        self.die_before_settle = False

    async def claim_event(self, session_id: str, key: str, *, lease: timedelta) -> Claim | None:
        claim = await super().claim_event(session_id, key, lease=lease)
        if claim is not None and self.die_after_claim:
            self.die_after_claim = False
            raise Crash(key)
        return claim

    async def settle_event(self, session_id: str, key: str, outcome: str) -> None:
        if self.die_before_settle:
            self.die_before_settle = False
            raise Crash(key)
        await super().settle_event(session_id, key, outcome)

    def pass_the_lease(self) -> None:
        self.now += slack_events.EVENT_LEASE + timedelta(seconds=1)


async def answer_chats(local: Deps, before: int, ledger: FirestoreLedger) -> None:
    """Run what the question published (the chat) to its end, with its Slack answer."""
    assert isinstance(local.bus, RecordingBus)
    await run(list(local.bus.published[before:]), local, local.bus, ledger)


@pytest.mark.parametrize("dies", ["between the claim and the chat", "after starting the chat"])
async def test_a_question_whose_taker_died_is_answered_once_by_slacks_retry(
    local: Deps, slack_api: FakeSlack, fake_gemini: FakeGemini, dies: str
) -> None:
    assert isinstance(local.bus, RecordingBus)
    ledger = ClockedLedger(local)
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    fake_gemini.script(FakeReply(text="The rollout at 09:12 dropped DB_URL."))
    event = question(thread_ts)
    before = len(local.bus.published)
    if dies == "between the claim and the chat":
        ledger.die_after_claim = True
    else:
        ledger.die_before_settle = True

    with pytest.raises(Crash):
        await slack_events.handle(signed(event), local, ledger=ledger)
    started = await chats(local, session.session_id)
    assert len(started) == (0 if dies == "between the claim and the chat" else 1)
    # Slack's retry while the claim's lease runs: the holder may still be at it.
    early = await slack_events.handle(signed(event), local, ledger=ledger)
    assert early.body["ignored"] == "already taken"

    ledger.pass_the_lease()
    retry = await slack_events.handle(signed(event), local, ledger=ledger)

    assert retry.status == 200, retry.body
    [chat_id] = await chats(local, session.session_id)
    assert retry.body["execution_id"] == chat_id
    assert started in ([], [chat_id])  # the chat the dead taker started is the one answered
    late = await slack_events.handle(signed(event), local, ledger=ledger)
    assert late.body["ignored"] == "already taken"  # settled: later retries change nothing
    await answer_chats(local, before, ledger)
    [answer] = thread_posts(slack_api, thread_ts)
    assert "The rollout at 09:12 dropped DB_URL." in answer["text"]
    assert await chats(local, session.session_id) == [chat_id]
    # The chat was created with its audit record, whichever taker created it.
    stored = await local.store.get_session(session.session_id)
    assert stored is not None and any(RESPONDER in key for key in stored.audit_keys)


async def test_by_default_only_a_reply_that_mentions_the_bot_is_a_question(
    local: Deps, slack_api: FakeSlack, ledger: FirestoreLedger, fake_gemini: FakeGemini
) -> None:
    session, thread_ts = await investigated(local, ledger, fake_gemini, slack_api)
    chatter = question(thread_ts, text="I rolled it back, DB_URL is there again")

    ignored = await slack_events.handle(signed(chatter), local, ledger=ledger)

    assert ignored.body["ignored"] == "does not mention tarsy"
    assert await chats(local, session.session_id) == []
    assert thread_posts(slack_api, thread_ts) == []
    # ``slack.thread_questions: all``: every person's reply in the thread is a question.
    everyone = replace(local, config=local.config.model_copy(
        update={"slack": SlackConfig(thread_questions="all")}))  # fmt: skip
    asked = await slack_events.handle(signed(question(thread_ts, text="why?")), everyone,
                                      ledger=ledger)  # fmt: skip
    assert asked.body["execution_id"] in await chats(local, session.session_id)


async def test_a_person_over_the_daily_chat_budget_is_refused_in_the_thread_with_the_figure(
    local: Deps, slack_api: FakeSlack, ledger: FirestoreLedger, fake_gemini: FakeGemini
) -> None:
    budgeted = replace(local, config=local.config.model_copy(
        update={"slack": SlackConfig(daily_chat_budget_usd=0.01)}))  # fmt: skip
    session, thread_ts = await investigated(budgeted, ledger, fake_gemini, slack_api)
    first = await slack_events.handle(signed(question(thread_ts)), budgeted, ledger=ledger)
    [chat_id] = await chats(local, session.session_id)
    assert first.body["execution_id"] == chat_id
    # What that chat has cost so far (as its steps' commits add it): 2 cents.
    await ledger._db.collection("executions").document(chat_id).update({"cost": 20_000_000})

    second = await slack_events.handle(signed(question(thread_ts)), budgeted, ledger=ledger)

    assert second.body["refused"] == "budget"
    [refusal] = thread_posts(slack_api, thread_ts)
    assert f"<@{RITA}>" in refusal["text"]
    assert "$0.0200" in refusal["text"] and "$0.01" in refusal["text"]
    assert await chats(local, session.session_id) == [chat_id]

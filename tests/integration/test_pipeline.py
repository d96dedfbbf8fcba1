"""The whole path: HTTP ingest → Pub/Sub push → step function → Firestore → api."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping

import pytest
from google.cloud import firestore

from tarsy.engine.messages import execution_id_for
from tarsy.models import ExecutionStatus, TimelineEventType
from tarsy.persistence.store import Store
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply
from tarsy_dev.localstack.stack import Stack

ALERT = {
    "alert_type": "generic",
    # Labels no alert_routes rule matches: the default chain (one call, then the summary).
    "data": {"labels": {"alertname": "PaymentsApiDown", "team": "payments"}},
    "runbook": "Check the pod's previous logs.",
}
WATCH_TIMEOUT_S = 60.0


def run_to_end(client: TarsyClient, alert: Mapping[str, object]) -> str:
    submitted = client.submit(dict(alert))
    *_, last = client.watch(submitted.session_id, poll_interval=0.2, timeout=WATCH_TIMEOUT_S)
    assert last.is_finished
    return submitted.session_id


async def test_alert_is_investigated_end_to_end(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store, stack: Stack
) -> None:
    fake_gemini.script(
        FakeReply(text="## Root cause\nThe config map lost its DB_URL key.", stream_chunks=3),
        FakeReply(text="payments-api is down: DB_URL vanished from its config map."),
    )
    submitted = client.submit(ALERT)
    assert submitted.status_url == f"{stack.signin_url}/sessions/{submitted.session_id}"

    *_, view = client.watch(submitted.session_id, poll_interval=0.2, timeout=WATCH_TIMEOUT_S)

    assert view.status is ExecutionStatus.COMPLETED
    analysis = "## Root cause\nThe config map lost its DB_URL key."
    assert view.session["final_analysis"] == analysis
    assert view.session["executive_summary"] == (
        "payments-api is down: DB_URL vanished from its config map."
    )
    assert view.session["tokens"]["total_tokens"] == 60
    assert view.session["chain_id"] == "default"
    assert view.session["routing"]["by"] == "default"
    assert [s["status"] for s in view.stages] == ["completed"]
    execution, summary = view.executions
    assert (execution["role"], summary["role"]) == ("agent", "summary")
    assert execution["status"] == summary["status"] == "completed"
    # Seed 003: a single call's answer is the final_analysis alone.
    assert [e["type"] for e in view.timeline] == ["final_analysis", "executive_summary"]
    assert view.timeline[0]["content"] == analysis

    # The real SDK sent the alert, delimited as untrusted data, and the agent's instructions.
    call, summary_call = fake_gemini.calls
    assert analysis in summary_call.last_user_text()
    assert call.streaming
    assert "PaymentsApiDown" in call.last_user_text()
    assert "BEGIN ALERT DATA" in call.last_user_text()
    assert call.system_text()

    # The interaction record keeps the request and the response.
    [interaction] = await store.list_llm_interactions(execution["execution_id"])
    assert interaction.response_text == analysis
    assert interaction.tokens.total_tokens == 30


def test_string_alert_data_is_accepted(client: TarsyClient, fake_gemini: FakeGemini) -> None:
    fake_gemini.script(FakeReply(text="plain text alert handled"))
    session_id = run_to_end(client, {"alert_type": "generic", "data": "disk 91% full on db-1"})
    view = client.session(session_id)
    assert view.session["final_analysis"] == "plain text alert handled"
    assert "disk 91% full on db-1" in fake_gemini.calls[0].last_user_text()


def test_model_error_fails_the_session_with_the_reason(
    client: TarsyClient, fake_gemini: FakeGemini
) -> None:
    fake_gemini.script(FakeReply(status=400, error_message="model not found: gemini-x"))
    session_id = run_to_end(client, ALERT)
    view = client.session(session_id)
    assert view.status is ExecutionStatus.FAILED
    assert "model not found" in view.session["error"]["message"]
    assert view.session["error"]["retryable"] is False
    assert not [e for e in view.timeline if e["type"] == TimelineEventType.FINAL_ANALYSIS]


def test_unknown_session_is_404(client: TarsyClient) -> None:
    from tarsy.errors import ApiError

    with pytest.raises(ApiError) as info:
        client.session("no-such-session")
    assert info.value.status == 404


async def test_alert_of_almost_1mb_is_stored_in_chunks_and_read_back_whole(
    client: TarsyClient, fake_gemini: FakeGemini, store: Store
) -> None:
    """Firestore documents hold 1 MiB; the alert and the prompt quoting it are spilled."""
    line = "pod payments-api-0 OOMKilled — échec de l'allocation mémoire\n"
    data = line * (1_000_000 // len(line.encode()))
    fake_gemini.script(FakeReply(text="memory limit too low"))
    session_id = run_to_end(client, {"alert_type": "generic", "data": data})

    view = client.session(session_id)
    assert view.status is ExecutionStatus.COMPLETED
    session = await store.get_session(session_id)
    assert session is not None and session.alert_data == data
    assert data in fake_gemini.calls[0].last_user_text()


def test_a_streaming_call_shows_its_progress_in_firestore(
    client: TarsyClient, fake_gemini: FakeGemini, stack: Stack
) -> None:
    """Thinking and text grow in executions/{eid}/progress/current, at most once a second."""
    text = "First finding. Second finding. Third finding. The conclusion."
    fake_gemini.script(
        FakeReply(text=text, thinking="Reading the alert.", stream_chunks=6, chunk_delay=0.6)
    )
    session_id = client.submit(ALERT).session_id
    progress = firestore.Client(project=stack.project_id).document(
        f"executions/{execution_id_for(session_id, 0, 0)}/progress/current"
    )
    seen: list[dict[str, object]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        snapshot = progress.get()
        if snapshot.exists:
            data = snapshot.to_dict() or {}
            if not seen or data["updated_at"] != seen[-1]["updated_at"]:
                seen.append(data)
        if client.session(session_id).is_finished:
            break
        time.sleep(0.1)

    assert client.session(session_id).status is ExecutionStatus.COMPLETED
    assert len(seen) >= 2, seen
    texts = [str(d["text"]) for d in seen]
    assert all(text.startswith(t) for t in texts)  # a growing prefix of the answer
    assert len(set(texts)) >= 2
    assert seen[0]["thinking"] == "Reading the alert."
    gaps = [
        (b["updated_at"] - a["updated_at"]).total_seconds()  # type: ignore[operator]
        for a, b in itertools.pairwise(seen)
    ]
    assert all(gap >= 0.9 for gap in gaps), gaps
    assert not progress.get().exists  # the commit replaced it with the real records

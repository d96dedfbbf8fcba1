"""The fake Gemini server: reply bodies, the labelled stand-in, and the HTTP surface (loopback)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tarsy.agent.prompts import delimit, user_prompt
from tarsy.models import Session
from tarsy_dev.fakes.fake_gemini import (
    STAND_IN_LABEL,
    FakeCall,
    FakeCodeExecution,
    FakeGemini,
    FakeReply,
    FakeToolCall,
    StandInResponder,
    _split,
    response_bodies,
)
from tarsy_dev.fakes.stand_in_server import _load_responder, without_usage

MODEL = "gemini-2.5-flash"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"


def parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts_: list[dict[str, Any]] = body["candidates"][0]["content"]["parts"]
    return parts_


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ─── response bodies ─────────────────────────────────────────────────────────


def test_plain_text_reply() -> None:
    [body] = response_bodies(FakeReply(text="hello"), MODEL, streaming=False)
    assert body == {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "hello"}]},
                "index": 0,
                "finishReason": "STOP",
            }
        ],
        "modelVersion": MODEL,
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 20,
            "totalTokenCount": 30,
        },
    }


def test_thinking_comes_first_and_counts_in_usage() -> None:
    reply = FakeReply(text="answer", thinking="hmm", thinking_tokens=5)
    [body] = response_bodies(reply, MODEL, streaming=False)
    assert parts(body) == [{"text": "hmm", "thought": True}, {"text": "answer"}]
    assert body["usageMetadata"] == {
        "promptTokenCount": 10,
        "candidatesTokenCount": 20,
        "totalTokenCount": 35,
        "thoughtsTokenCount": 5,
    }


def test_streaming_splits_into_bodies_with_usage_on_the_last() -> None:
    reply = FakeReply(text="abcdefgh", thinking="t", stream_chunks=3)
    bodies = response_bodies(reply, MODEL, streaming=True)
    assert [parts(b) for b in bodies] == [
        [{"text": "t", "thought": True}],
        [{"text": "abc"}],
        [{"text": "def"}],
        [{"text": "gh"}],
    ]
    assert ["usageMetadata" in b for b in bodies] == [False, False, False, True]
    assert ["finishReason" in b["candidates"][0] for b in bodies] == [False, False, False, True]


def test_stream_chunks_ignored_when_not_streaming() -> None:
    [body] = response_bodies(FakeReply(text="abcdef", stream_chunks=3), MODEL, streaming=False)
    assert parts(body) == [{"text": "abcdef"}]


@pytest.mark.parametrize(
    ("text", "pieces", "expected"),
    [
        ("abcdef", 1, ["abcdef"]),
        ("abcdef", 0, ["abcdef"]),
        ("abcdef", 2, ["abc", "def"]),
        ("abcdefg", 3, ["abc", "def", "g"]),
        ("ab", 5, ["ab"]),
    ],
)
def test_split(text: str, pieces: int, expected: list[str]) -> None:
    assert _split(text, pieces) == expected
    assert "".join(_split(text, pieces)) == text


def test_tool_calls_in_one_body_with_ids_and_signatures() -> None:
    reply = FakeReply(
        tool_calls=[
            FakeToolCall(name="k8s__get", args={"n": 1}, id="c1", thought_signature=b"sig"),
            FakeToolCall(name="k8s__logs"),
        ]
    )
    [body] = response_bodies(reply, MODEL, streaming=True)
    assert parts(body) == [
        {
            "functionCall": {"name": "k8s__get", "args": {"n": 1}, "id": "c1"},
            "thoughtSignature": b64(b"sig"),
        },
        {"functionCall": {"name": "k8s__logs", "args": {}}},
    ]


def test_turn_signature_goes_on_the_first_part_after_thoughts() -> None:
    with_thoughts = FakeReply(text="a", thinking="t", thought_signature=b"s1")
    [body] = response_bodies(with_thoughts, MODEL, streaming=False)
    assert parts(body) == [
        {"text": "t", "thought": True},
        {"text": "a", "thoughtSignature": b64(b"s1")},
    ]
    [body] = response_bodies(FakeReply(text="a", thought_signature=b"s2"), MODEL, streaming=False)
    assert parts(body) == [{"text": "a", "thoughtSignature": b64(b"s2")}]


def test_code_execution_parts() -> None:
    reply = FakeReply(code_executions=[FakeCodeExecution(code="print(2)", output="2\n")])
    [body] = response_bodies(reply, MODEL, streaming=False)
    assert parts(body) == [
        {"executableCode": {"language": "PYTHON", "code": "print(2)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}},
    ]


def test_grounding_on_the_last_candidate() -> None:
    reply = FakeReply(text="abcd", stream_chunks=2, grounding={"webSearchQueries": ["q"]})
    bodies = response_bodies(reply, MODEL, streaming=True)
    assert "groundingMetadata" not in bodies[0]["candidates"][0]
    assert bodies[-1]["candidates"][0]["groundingMetadata"] == {"webSearchQueries": ["q"]}


def test_no_content_is_one_empty_text_part() -> None:
    [body] = response_bodies(FakeReply(), MODEL, streaming=True)
    assert parts(body) == [{"text": ""}]


@pytest.mark.parametrize("streaming", [True, False])
def test_empty_reply_has_no_candidates(streaming: bool) -> None:
    bodies = response_bodies(FakeReply(text="ignored", empty=True), MODEL, streaming=streaming)
    assert len(bodies) == 1
    assert bodies[0]["candidates"] == []
    assert bodies[0]["usageMetadata"]["totalTokenCount"] == 30


# ─── recorded calls ──────────────────────────────────────────────────────────


def test_fake_call_helpers() -> None:
    call = FakeCall(
        model=MODEL,
        method="streamGenerateContent",
        path="/p",
        body={
            "systemInstruction": {"parts": [{"text": "sys-a"}, {"text": "sys-b"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "u1"}]},
                {"role": "model", "parts": [{"text": "m1"}, {"functionCall": {"name": "x__y"}}]},
                {"role": "user", "parts": [{"text": "u2a"}, {"text": "u2b"}]},
            ],
            "generationConfig": {"temperature": 0.5},
            "tools": [{"functionDeclarations": [{"name": "x__y"}, {"name": "x__z"}]}],
        },
    )
    assert call.streaming is True
    assert call.system_text() == "sys-asys-b"
    assert call.texts("user") == ["u1", "u2au2b"]
    assert call.last_user_text() == "u2au2b"
    assert call.generation_config() == {"temperature": 0.5}
    assert call.function_names() == ["x__y", "x__z"]
    assert call.model_parts() == [[{"text": "m1"}, {"functionCall": {"name": "x__y"}}]]


def test_fake_call_helpers_on_an_empty_body() -> None:
    call = FakeCall(model=MODEL, method="generateContent", path="/p", body={})
    assert call.streaming is False
    assert (call.system_text(), call.last_user_text()) == ("", "")
    assert (call.generation_config(), call.tools(), call.function_names()) == ({}, [], [])


# ─── the stand-in responder ──────────────────────────────────────────────────


def test_stand_in_is_labelled_and_restates_the_alert() -> None:
    call = FakeCall(
        model=MODEL,
        method="generateContent",
        path="/p",
        body={
            "contents": [{"role": "user", "parts": [{"text": "Alert type: X\n\npod api-0 down"}]}]
        },
    )
    reply = StandInResponder()(call)
    assert reply.text.startswith(STAND_IN_LABEL)
    assert "not a real LLM" in STAND_IN_LABEL
    assert "> Alert type: X\n> pod api-0 down" in reply.text
    assert reply.status == 200
    assert reply.output_tokens == 80


def test_stand_in_excerpt_is_bounded() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "line\n" * 2000}]}]}
    reply = StandInResponder()(FakeCall(model=MODEL, method="m", path="/p", body=body))
    assert "> …" in reply.text
    assert len(reply.text) < 2000


def test_load_responder() -> None:
    assert isinstance(
        _load_responder("tarsy_dev.fakes.fake_gemini:StandInResponder"), StandInResponder
    )
    with pytest.raises(SystemExit):
        _load_responder("tarsy_dev.fakes.fake_gemini")


# ─── the server over loopback ────────────────────────────────────────────────


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture(scope="module")
def module_http(fake: FakeGemini) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=5) as client:
        yield client


@pytest.fixture
def http(fake: FakeGemini, module_http: httpx.Client) -> httpx.Client:
    fake.reset()
    return module_http


def user_body(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


def test_url_is_loopback(fake: FakeGemini) -> None:
    assert fake.url.startswith("http://127.0.0.1:")
    assert int(fake.url.rsplit(":", 1)[1]) > 0


def test_script_first_then_responder(fake: FakeGemini, http: httpx.Client) -> None:
    fake.script(FakeReply(text="scripted"))
    first = http.post(GENERATE, json=user_body("q1"))
    second = http.post(GENERATE, json=user_body("q2"))
    assert parts(first.json()) == [{"text": "scripted"}]
    assert parts(second.json())[0]["text"].startswith(STAND_IN_LABEL)
    assert [c.last_user_text() for c in fake.calls] == ["q1", "q2"]
    assert fake.calls[0].model == MODEL
    assert fake.calls[0].method == "generateContent"


def test_vertex_style_path_and_custom_responder(
    fake: FakeGemini, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake, "responder", lambda call: FakeReply(text=f"echo {call.model}"))
    path = (
        "/v1beta1/projects/p/locations/us-central1/publishers/google/models/"
        f"{MODEL}:generateContent"
    )
    response = http.post(path, json=user_body("x"))
    assert parts(response.json()) == [{"text": f"echo {MODEL}"}]
    assert fake.calls[0].path == path


def test_stream_without_sse_is_a_json_array(fake: FakeGemini, http: httpx.Client) -> None:
    fake.script(FakeReply(text="abcd", stream_chunks=2))
    response = http.post(STREAM, json=user_body("q"))
    assert response.status_code == 200
    assert [parts(b) for b in response.json()] == [[{"text": "ab"}], [{"text": "cd"}]]


def test_stream_with_sse(fake: FakeGemini, http: httpx.Client) -> None:
    fake.script(FakeReply(text="abcd", stream_chunks=2))
    response = http.post(STREAM, params={"alt": "sse"}, json=user_body("q"))
    assert response.headers["content-type"] == "text/event-stream"
    events = [e for e in response.text.split("\r\n\r\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert [parts(json.loads(e.removeprefix("data: "))) for e in events] == [
        [{"text": "ab"}],
        [{"text": "cd"}],
    ]
    assert fake.calls[0].streaming


@pytest.mark.parametrize(
    ("status", "google_status"),
    [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"),
     (503, "UNAVAILABLE"), (418, "UNKNOWN")],
)  # fmt: skip
def test_error_replies(
    fake: FakeGemini, http: httpx.Client, status: int, google_status: str
) -> None:
    fake.script(FakeReply(status=status, error_message="nope", retry_after=2.5))
    response = http.post(GENERATE, json=user_body("q"))
    assert response.status_code == status
    assert response.json() == {
        "error": {"code": status, "message": "nope", "status": google_status}
    }
    assert response.headers["retry-after"] == "2.5"


def test_error_reply_default_message_and_no_retry_after(
    fake: FakeGemini, http: httpx.Client
) -> None:
    fake.script(FakeReply(status=503))
    response = http.post(STREAM, params={"alt": "sse"}, json=user_body("q"))
    assert response.json()["error"]["message"] == "Service Unavailable"
    assert "retry-after" not in response.headers


def test_unknown_route_is_404_and_not_recorded(fake: FakeGemini, http: httpx.Client) -> None:
    response = http.post("/v1beta/models/m:countTokens", json={})
    assert response.status_code == 404
    assert fake.calls == []


def test_non_json_body_is_400(fake: FakeGemini, http: httpx.Client) -> None:
    response = http.post(GENERATE, content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert fake.calls == []


def test_reset_forgets_script_and_calls(fake: FakeGemini, http: httpx.Client) -> None:
    fake.script(FakeReply(text="never served"))
    http.post(GENERATE, json=user_body("q"))
    fake.script(FakeReply(text="dropped"))
    fake.reset()
    assert fake.calls == []
    response = http.post(GENERATE, json=user_body("q"))
    assert parts(response.json())[0]["text"].startswith(STAND_IN_LABEL)


def test_the_stand_in_process_reports_no_tokens_so_nothing_is_costed() -> None:
    call = FakeCall(model=MODEL, method="generateContent", path="/p", body={})
    reply = without_usage(StandInResponder())(call)
    [body] = response_bodies(reply, MODEL, streaming=False)
    assert body["usageMetadata"] == {
        "promptTokenCount": 0,
        "candidatesTokenCount": 0,
        "totalTokenCount": 0,
    }
    assert reply.text == StandInResponder()(call).text


def test_the_stand_in_restates_the_alert_data_not_its_prompt_or_markers() -> None:
    session = Session(
        session_id="s",
        alert_type="HighRequestLatency",
        alert_data='{"service": "payments-api", "note": "a >>> b"}',
        chain_id="default",
    )
    prompt = user_prompt(session)
    assert "\u200b" in prompt  # the data's own ">>>" was defused
    call = FakeCall(
        model=MODEL,
        method="generateContent",
        path="/p",
        body={"contents": [{"role": "user", "parts": [{"text": prompt}]}]},
    )
    text = StandInResponder()(call).text
    assert '> {"service": "payments-api", "note": "a >>> b"}' in text
    assert "<<<" not in text and "\u200b" not in text
    assert "Write your analysis" not in text


def _asked(text: str) -> FakeCall:
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    return FakeCall(model=MODEL, method="m", path="/p", body=body)


def test_a_summary_of_a_stand_in_analysis_restates_the_alert_once_without_markers() -> None:
    analysis = StandInResponder()(_asked(delimit("ALERT DATA", "pod api-0 down"))).text
    quoted = "quoted: " + delimit("ALERT DATA", "x")
    summary = StandInResponder()(_asked("Summarize:\n" + delimit("FINAL ANALYSIS", quoted))).text
    assert "> pod api-0 down" in analysis
    assert "<<<" not in summary and "\u200b" not in summary and "> x" in summary

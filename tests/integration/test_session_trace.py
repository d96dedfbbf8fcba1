"""One session, one trace: ingest → every step → model and MCP calls, with the in-memory exporter.

The engine runs in process on the emulators (as in test_delivery), with the
real ``Bus`` in front of a publisher that queues instead of sending; each
queued message is delivered as the step function does it (attributes →
``pushed_message`` → ``telemetry.step_span`` → ``steps.handle``). The model is
the fake Gemini; the tool is the demo cluster over MCP.

Runs once the step engine is wired to :mod:`tarsy.telemetry` and
:mod:`tarsy.notify.session_end` (until then it is skipped, saying so).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tarsy import telemetry
from tarsy.app import Deps
from tarsy.bus import Bus, decode, pushed_message
from tarsy.commands import sessions as handlers
from tarsy.engine import steps
from tarsy.engine.sweeper import sweep
from tarsy.engine.transitions import ExecutionUpdate
from tarsy.http.request import HttpRequest
from tarsy.intake import ingest
from tarsy.models import ExecutionStatus, utcnow
from tarsy.persistence.store import Store
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.fakes.fake_gemini import FakeGemini, FakeReply, FakeToolCall

pytestmark = pytest.mark.skipif(
    "telemetry" not in vars(steps),
    reason="the step engine is not wired to tarsy.telemetry yet (see the call sites in the report)",
)

TOPIC = "projects/p/topics/tarsy-steps"


class QueuePublisher:
    """PublisherClient.publish(), queueing what would be sent."""

    def __init__(self) -> None:
        self.queue: list[tuple[bytes, dict[str, str], str]] = []
        self.count = 0

    def publish(self, topic: str, data: bytes, **attributes: str) -> Future[str]:
        self.count += 1
        self.queue.append((data, attributes, f"m{self.count}"))
        future: Future[str] = Future()
        future.set_result(f"m{self.count}")
        return future


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_providers(provider, MeterProvider(metric_readers=[reader]))
    yield exporter, reader
    telemetry.reset()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_session_is_one_trace_across_ingest_steps_model_and_tool_calls(
    deps: Deps,
    store: Store,
    fake_gemini: FakeGemini,
    spans: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, reader = spans
    publisher = QueuePublisher()
    local = replace(
        deps,
        bus=Bus(publisher, TOPIC),
        tools=MCPToolExecutor(deps.config, deps.settings, store),
    )
    fake_gemini.script(
        FakeReply(tool_calls=[FakeToolCall(name="kubernetes__pods_list", args={})]),
        FakeReply(text="The api pod's config map lost DB_URL."),
        FakeReply(text="Restore DB_URL."),
    )
    body = {"alert_type": "test-conclude", "data": {"pod": "api-0"}}
    assert deps.settings.api_key is not None
    request = HttpRequest(
        method="POST",
        path="/alerts",
        headers={
            "content-type": "application/json",
            "x-api-key": deps.settings.api_key.get_secret_value(),
        },
        body=json.dumps(body).encode(),
    )

    with telemetry.server_span("POST", "/alerts") as span:
        response = await ingest.handle(request, local.settings, local.config, store, local.bus)
        span.set_response(response.status, response.body.get("session_id"))
    assert response.status == 202, response.body
    session_id = response.body["session_id"]
    while publisher.queue:  # as the step function does with each push delivery
        data, attributes, message_id = publisher.queue.pop(0)
        pushed = pushed_message(
            {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes,
                         "messageId": message_id}}
        )  # fmt: skip
        message = decode(pushed.data)
        with telemetry.step_span(
            "tarsy-steps", pushed.trace_context, session_id=message.session_id,
            execution_id=message.execution_id, kind=message.kind, step=message.step,
            stage=message.stage, message_id=pushed.message_id,
        ):  # fmt: skip
            await steps.handle(message, local)

    session = await store.get_session(session_id)
    assert session is not None and session.status is ExecutionStatus.COMPLETED
    finished = list(exporter.get_finished_spans())
    by_name: dict[str, list[ReadableSpan]] = {}
    for s in finished:
        by_name.setdefault(s.name, []).append(s)
    [root] = by_name["POST /alerts"]
    assert root.parent is None
    assert {s.context.trace_id for s in finished if s.context} == {root.context.trace_id}
    processes = by_name["process tarsy-steps"]
    assert len(processes) == publisher.count == 4  # start, two iterations, the summary
    agents = by_name["invoke_agent concluding-agent"] + by_name["invoke_agent executive-summarizer"]
    chats = by_name["chat gemini-2.5-flash"]
    [tool] = by_name["tools/call pods_list"]
    assert len(agents) == len(chats) == 3
    process_ids = {p.context.span_id for p in processes if p.context}
    assert {parent_of(a) for a in agents} <= process_ids
    assert {parent_of(c) for c in chats} == {a.context.span_id for a in agents if a.context}
    assert parent_of(tool) in {a.context.span_id for a in agents if a.context}
    assert (
        tool.attributes is not None and tool.attributes["gen_ai.operation.name"] == "execute_tool"
    )
    for chat in chats:
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.provider.name"] == "gcp.gemini"
        tokens = chat.attributes["gen_ai.usage.input_tokens"]
        assert isinstance(tokens, int) and tokens > 0
    # Counted once, although on_session_end ran after every message.
    metrics = reader.get_metrics_data()
    assert metrics is not None
    ended = [
        p.value
        for r in metrics.resource_metrics
        for sc in r.scope_metrics
        for m in sc.metrics
        if m.name == "tarsy.sessions.ended"
        for p in m.data.data_points
        if isinstance(p, NumberDataPoint)
    ]
    assert ended == [1]


# ─── every later hop continues the session's trace (issue 26, item 3) ─────────


async def run_queue(publisher: QueuePublisher, deps: Deps) -> None:
    """Deliver every queued message as the step function does."""
    while publisher.queue:
        data, attributes, message_id = publisher.queue.pop(0)
        pushed = pushed_message(
            {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes,
                         "messageId": message_id}}
        )  # fmt: skip
        message = decode(pushed.data)
        with telemetry.step_span(
            "tarsy-steps", pushed.trace_context, session_id=message.session_id,
            execution_id=message.execution_id, kind=message.kind, step=message.step,
            stage=message.stage, message_id=pushed.message_id,
        ):  # fmt: skip
            await steps.handle(message, deps)


async def ingested(deps: Deps, store: Store, body: dict[str, object]) -> str:
    assert deps.settings.api_key is not None
    request = HttpRequest(
        method="POST",
        path="/alerts",
        headers={
            "content-type": "application/json",
            "x-api-key": deps.settings.api_key.get_secret_value(),
        },
        body=json.dumps(body).encode(),
    )
    with telemetry.server_span("POST", "/alerts"):
        response = await ingest.handle(request, deps.settings, deps.config, store, deps.bus)
    assert response.status == 202, response.body
    return str(response.body["session_id"])


def trace_of(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


async def test_chat_resume_and_the_sweeper_continue_the_sessions_trace(
    deps: Deps,
    store: Store,
    fake_gemini: FakeGemini,
    spans: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    exporter, _ = spans
    publisher = QueuePublisher()
    local = replace(deps, bus=Bus(publisher, TOPIC))
    fake_gemini.responder = lambda call: FakeReply(
        tool_calls=[FakeToolCall(name="kubernetes__pods_list", args={})]
    )
    session_id = await ingested(local, store, {"alert_type": "test-pause", "data": "api-0"})
    await run_queue(publisher, local)
    paused = await store.get_session(session_id)
    assert paused is not None and paused.status is ExecutionStatus.PAUSED
    [root] = [s for s in exporter.get_finished_spans() if s.name == "POST /alerts"]
    session_trace = trace_of(root)
    exporter.clear()

    fake_gemini.responder = lambda call: FakeReply(text="the config map lost DB_URL")
    with telemetry.server_span("POST", "/sessions/{session_id}/resume"):
        await handlers.resume(local, session_id, handlers.ResumeRequest(extra_iterations=1))
    await run_queue(publisher, local)
    with telemetry.server_span("POST", "/sessions/{session_id}/chat"):
        await handlers.chat(local, session_id, handlers.ChatRequest(question="which key?"))
    await run_queue(publisher, local)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    # A chat whose next step was lost: the sweeper publishes it again.
    [chat] = [e for e in await store.list_executions(session_id) if e.role == "chat"]
    await store.update_execution(chat.execution_id, ExecutionUpdate(due_at=utcnow()))
    with telemetry.server_span("POST", "/sweep"):
        report = await sweep(local)
    assert chat.execution_id in report.republished
    await run_queue(publisher, local)

    finished = list(exporter.get_finished_spans())
    requests = [s for s in finished if s.kind is SpanKind.SERVER]
    hops = [s for s in finished if s.kind is not SpanKind.SERVER]
    assert {s.name for s in requests} == {
        "POST /sessions/{session_id}/resume",
        "POST /sessions/{session_id}/chat",
        "POST /sweep",
    }
    sends = [s for s in hops if s.name == "send tarsy-steps"]
    assert len(sends) >= 3  # the resume, the chat, the sweeper's re-publish
    # Every publish and every step they led to is a span of the session's one trace.
    assert {trace_of(s) for s in hops} == {session_trace}
    assert all(trace_of(r) != session_trace for r in requests)
    [sweeping] = [r for r in requests if r.name == "POST /sweep"]
    assert [link.context.trace_id for link in sweeping.links] == [session_trace]

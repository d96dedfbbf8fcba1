"""Traces and metrics with the in-memory exporter: one session is one trace across Pub/Sub hops."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import SecretStr

from tarsy import telemetry
from tarsy.bus import Bus, PushedMessage, decode, encode, pushed_message
from tarsy.config.schema import LLMProviderConfig, SecretRef
from tarsy.errors import LeaseHeldError, LLMError
from tarsy.models import StepMessage, TokenUsage
from tarsy.settings import Settings

TOPIC_PATH = "projects/p/topics/tarsy-steps"


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer_provider = provider
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        [found] = [s for s in self.finished() if s.name == name]
        return found

    def points(self, metric: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def metric_unit(self, metric: str) -> str | None:
        data = self.metrics.get_metrics_data()
        assert data is not None
        [unit] = [
            m.unit
            for r in data.resource_metrics
            for s in r.scope_metrics
            for m in s.metrics
            if m.name == metric
        ]
        return unit


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    installed = Telemetry()
    telemetry.use_providers(installed.tracer_provider, installed.meter_provider)
    yield installed
    telemetry.reset()
    installed.tracer_provider.shutdown()
    installed.meter_provider.shutdown()


class FakePublisher:
    """pubsub_v1.PublisherClient's publish(): records data and attributes, answers an id."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, dict[str, str]]] = []

    def publish(self, topic: str, data: bytes, **attributes: str) -> Future[str]:
        assert topic == TOPIC_PATH
        self.sent.append((data, attributes))
        future: Future[str] = Future()
        future.set_result(f"msg-{len(self.sent)}")
        return future


def delivery(data: bytes, attributes: dict[str, str], message_id: str) -> PushedMessage:
    """What the step function reads from a push delivery's CloudEvent data."""
    return pushed_message(
        {
            "message": {
                "data": base64.b64encode(data).decode(),
                "attributes": attributes,
                "messageId": message_id,
            }
        }
    )


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


# ─── one trace across the hops ────────────────────────────────────────────────


async def run_step(
    publisher: FakePublisher, bus: Bus, index: int, *, tools: bool, publish: StepMessage | None
) -> None:
    """What the step function does with published message ``index``: one iteration."""
    data, attributes = publisher.sent[index]
    pushed = delivery(data, attributes, f"msg-{index + 1}")
    message = decode(pushed.data)
    with telemetry.step_span(
        "tarsy-steps",
        pushed.trace_context,
        session_id=message.session_id,
        execution_id=message.execution_id,
        kind=message.kind,
        step=message.step,
        message_id=pushed.message_id,
    ):
        if message.kind == "iterate":
            with telemetry.agent_span(
                "kubernetes-investigator",
                session_id=message.session_id,
                execution_id=message.execution_id,
                step=message.step,
                iteration=message.step,
            ) as agent:
                # As the step engine does: the model is known once the turn is prepared.
                agent.set_model(provider_name=telemetry.PROVIDER_GEMINI, model="gemini-2.5-flash")
                with telemetry.model_call_span(
                    provider_name=telemetry.PROVIDER_GEMINI,
                    model="gemini-2.5-flash",
                    conversation_id=message.execution_id,
                ) as call:
                    call.record_usage(input_tokens=900, output_tokens=100, reasoning_tokens=50)
                if tools:
                    with telemetry.mcp_tool_span(
                        "pods_log", server="kubernetes", call_id="call-1", transport="http",
                        server_address="127.0.0.1", server_port=9000,
                    ):  # fmt: skip
                        pass
                    with telemetry.mcp_tool_span(
                        "pods_get", server="kubernetes", call_id="call-2", transport="stdio"
                    ) as tool:
                        tool.tool_error("pod not found")
        if publish is not None:
            await bus.publish(publish)


async def test_one_session_is_one_trace_from_ingest_through_every_step(otel: Telemetry) -> None:
    publisher = FakePublisher()
    bus = Bus(publisher, TOPIC_PATH)
    session_id, execution_id = "sess-1", "sess-1-s00-a00"
    iterate = [
        StepMessage(session_id=session_id, execution_id=execution_id, step=n, kind="iterate")
        for n in (1, 2)
    ]

    # ingest: the request span is the root; start_session is published under it.
    with telemetry.server_span("POST", "/alerts", incoming={}) as request:
        await bus.publish(StepMessage(session_id=session_id, kind="start_session"))
        request.set_response(202, session_id)
    # step function, three deliveries: the stage start, then two iterations.
    await run_step(publisher, bus, 0, tools=False, publish=iterate[0])
    await run_step(publisher, bus, 1, tools=True, publish=iterate[1])
    await run_step(publisher, bus, 2, tools=False, publish=None)

    spans = otel.finished()
    assert len(spans) == 1 + 3 + 3 + 2 + 2 + 2  # request, sends, processes, agents, chats, tools
    assert {ids(s)[0] for s in spans} == {ids(otel.span("POST /alerts"))[0]}

    root = otel.span("POST /alerts")
    assert root.parent is None and root.kind is SpanKind.SERVER
    assert root.attributes is not None and root.attributes["tarsy.session.id"] == session_id
    sends = [s for s in spans if s.name == "send tarsy-steps"]
    processes = [s for s in spans if s.name == "process tarsy-steps"]
    assert [s.kind for s in sends] == [SpanKind.PRODUCER] * 3
    assert [s.kind for s in processes] == [SpanKind.CONSUMER] * 3
    # send → process → (agent → chat, tools) and process → send → process ...
    assert parent_id(sends[0]) == ids(root)[1]
    for send, process in zip(sends, processes, strict=True):
        assert parent_id(process) == ids(send)[1]
        assert process.parent is not None and process.parent.is_remote
    assert parent_id(sends[1]) == ids(processes[0])[1]
    assert parent_id(sends[2]) == ids(processes[1])[1]
    agents = [s for s in spans if s.name == "invoke_agent kubernetes-investigator"]
    assert [parent_id(a) for a in agents] == [ids(processes[1])[1], ids(processes[2])[1]]
    chats = [s for s in spans if s.name == "chat gemini-2.5-flash"]
    assert [parent_id(c) for c in chats] == [ids(a)[1] for a in agents]
    tools = [s for s in spans if s.name.startswith("tools/call ")]
    assert {parent_id(t) for t in tools} == {ids(agents[0])[1]}
    # The message ids Pub/Sub gave are on both ends.
    assert [s.attributes and s.attributes["messaging.message.id"] for s in sends] == [
        "msg-1",
        "msg-2",
        "msg-3",
    ]
    assert [s.attributes and s.attributes["messaging.message.id"] for s in processes] == [
        "msg-1",
        "msg-2",
        "msg-3",
    ]


async def test_spans_carry_the_genai_mcp_and_messaging_attribute_names(otel: Telemetry) -> None:
    publisher = FakePublisher()
    bus = Bus(publisher, TOPIC_PATH)
    message = StepMessage(session_id="s", execution_id="e", step=1, kind="iterate")
    await bus.publish(message)
    await run_step(publisher, bus, 0, tools=True, publish=None)

    chat = otel.span("chat gemini-2.5-flash")
    assert chat.kind is SpanKind.CLIENT
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.request.stream": True,
        "gen_ai.conversation.id": "e",
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 150,  # reasoning tokens are output tokens too
        "gen_ai.usage.reasoning.output_tokens": 50,
    }
    agent = otel.span("invoke_agent kubernetes-investigator")
    assert agent.kind is SpanKind.INTERNAL
    attributes = dict(agent.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "kubernetes-investigator"
    assert attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert attributes["gen_ai.request.model"] == "gemini-2.5-flash"

    log = otel.span("tools/call pods_log")
    assert log.kind is SpanKind.CLIENT
    assert dict(log.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "pods_log",
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.call.id": "call-1",
        "network.transport": "tcp",
        "server.address": "127.0.0.1",
        "server.port": 9000,
        "tarsy.mcp.server": "kubernetes",
    }
    assert log.status.status_code is StatusCode.UNSET
    failed = otel.span("tools/call pods_get")
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.attributes["network.transport"] == "pipe"
    assert failed.status.status_code is StatusCode.ERROR

    send = otel.span("send tarsy-steps")
    assert send.attributes is not None
    assert send.attributes["messaging.system"] == "gcp_pubsub"
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.destination.name"] == "tarsy-steps"
    process = otel.span("process tarsy-steps")
    assert process.attributes is not None
    assert process.attributes["messaging.operation.type"] == "process"
    assert process.attributes["tarsy.execution.id"] == "e"
    assert process.attributes["tarsy.step"] == 1
    assert process.attributes["tarsy.step.outcome"] == "ok"


async def test_metrics_token_usage_operation_duration_step_duration_sessions(
    otel: Telemetry,
) -> None:
    publisher = FakePublisher()
    bus = Bus(publisher, TOPIC_PATH)
    await bus.publish(StepMessage(session_id="s", execution_id="e", step=1, kind="iterate"))
    await run_step(publisher, bus, 0, tools=True, publish=None)
    telemetry.record_session_end("completed", chain_id="kubernetes")
    telemetry.record_session_end("failed", chain_id="kubernetes")
    telemetry.record_session_end("completed", chain_id="kubernetes")

    tokens = {
        p.attributes["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")
    }
    assert {k: v.sum for k, v in tokens.items()} == {"input": 900, "output": 150}
    assert tokens["input"].attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.token.type": "input",
    }
    assert otel.metric_unit("gen_ai.client.token.usage") == "{token}"
    [duration] = otel.points("gen_ai.client.operation.duration")
    assert isinstance(duration, HistogramDataPoint) and duration.count == 1
    assert otel.metric_unit("gen_ai.client.operation.duration") == "s"
    assert tuple(duration.explicit_bounds) == telemetry.DURATION_BUCKETS
    mcp = {
        p.attributes["gen_ai.tool.name"]: p for p in otel.points("mcp.client.operation.duration")
    }
    assert mcp["pods_get"].attributes["error.type"] == "tool_error"
    assert "error.type" not in mcp["pods_log"].attributes
    [step] = otel.points("tarsy.step.duration")
    assert step.attributes == {"tarsy.step.kind": "iterate", "tarsy.step.outcome": "ok"}
    ended = {p.attributes["tarsy.session.status"]: p for p in otel.points("tarsy.sessions.ended")}
    assert all(isinstance(p, NumberDataPoint) for p in ended.values())
    assert {k: v.value for k, v in ended.items()} == {"completed": 2, "failed": 1}


# ─── errors ───────────────────────────────────────────────────────────────────


def test_a_failed_model_call_is_an_error_with_its_type(otel: Telemetry) -> None:
    with pytest.raises(TimeoutError):
        with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="gemini-2.5-pro"):
            raise TimeoutError("deadline")
    with telemetry.model_call_span(provider_name="gcp.vertex_ai", model="gemini-2.5-pro") as call:
        call.fail("rate_limit", "429 after 3 retries")

    spans = [s for s in otel.finished() if s.name == "chat gemini-2.5-pro"]
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR, StatusCode.ERROR]
    assert [s.attributes and s.attributes["error.type"] for s in spans] == [
        "TimeoutError",
        "rate_limit",
    ]
    assert [e.name for e in spans[0].events] == ["exception"]
    errors = {p.attributes["error.type"] for p in otel.points("gen_ai.client.operation.duration")}
    assert errors == {"TimeoutError", "rate_limit"}
    assert otel.points("gen_ai.client.token.usage") == []  # no usage, no token points


def test_a_step_redelivered_for_a_held_lease_is_a_retry_not_an_error(otel: Telemetry) -> None:
    with pytest.raises(LeaseHeldError):
        with telemetry.step_span(
            "tarsy-steps", {}, session_id="s", execution_id="e", kind="iterate", step=3,
            retry_on=(LeaseHeldError,),
        ):  # fmt: skip
            raise LeaseHeldError("leased until later")
    with pytest.raises(RuntimeError):
        with telemetry.step_span(
            "tarsy-steps", {}, session_id="s", execution_id="e", kind="iterate", step=4
        ):
            raise RuntimeError("boom")

    retried, failed = otel.finished()
    assert retried.status.status_code is StatusCode.UNSET
    assert retried.attributes is not None and retried.attributes["tarsy.step.outcome"] == "retry"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["tarsy.step.outcome"] == "error"
    outcomes = sorted(
        p.attributes["tarsy.step.outcome"] for p in otel.points("tarsy.step.duration")
    )
    assert outcomes == ["error", "retry"]


class Answer:
    def __init__(self, usage: TokenUsage) -> None:
        self.usage = usage


async def test_a_traced_model_call_records_usage_and_the_llm_error_kind(otel: Telemetry) -> None:
    async def answer() -> Answer:
        return Answer(TokenUsage(input_tokens=40, output_tokens=8, thinking_tokens=2))

    async def quota() -> Answer:
        raise LLMError("rate_limit", "429 Too Many Requests", code="429")

    result = await telemetry.traced_model_call(
        answer(), provider_name="gcp.vertex_ai", model="gemini-2.5-pro", conversation_id="e"
    )
    with pytest.raises(LLMError):
        await telemetry.traced_model_call(
            quota(), provider_name="gcp.vertex_ai", model="gemini-2.5-flash"
        )

    assert result.usage.input_tokens == 40
    ok, failed = otel.finished()
    assert ok.attributes is not None and failed.attributes is not None
    assert (
        ok.attributes["gen_ai.usage.input_tokens"],
        ok.attributes["gen_ai.usage.output_tokens"],
    ) == (40, 10)
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.attributes["error.type"] == "rate_limit"
    assert failed.status.status_code is StatusCode.ERROR
    assert "gen_ai.usage.input_tokens" not in failed.attributes


def test_a_5xx_answer_fails_the_request_span(otel: Telemetry) -> None:
    with telemetry.server_span("POST", "/alerts") as request:
        request.set_response(503)
    span = otel.span("POST /alerts")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "503"


# ─── trace context on the bus ─────────────────────────────────────────────────


def test_an_incoming_trace_is_linked_not_continued(otel: Telemetry) -> None:
    incoming = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}
    with telemetry.server_span("POST", "/alerts", incoming=incoming):
        pass
    span = otel.span("POST /alerts")
    assert span.parent is None
    assert span.context is not None
    assert span.context.trace_id != 0x4BF92F3577B34DA6A3CE929D0E0E4736
    [link] = span.links
    assert link.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736


def test_messages_carry_w3c_trace_context_and_only_that(otel: Telemetry) -> None:
    message = StepMessage(session_id="s", kind="start_session")
    data, attributes = encode(message, {"traceparent": "00-ab-cd-01", "baggage": "x=1"})
    assert attributes == {
        "session_id": "s",
        "kind": "start_session",
        "step": "0",
        "traceparent": "00-ab-cd-01",
    }
    assert encode(message)[1] == {"session_id": "s", "kind": "start_session", "step": "0"}
    assert decode(data) == message


def test_a_malformed_traceparent_starts_a_new_trace(otel: Telemetry) -> None:
    with telemetry.step_span(
        "tarsy-steps", {"traceparent": "not-a-traceparent"}, session_id="s",
        execution_id=None, kind="start_session",
    ):  # fmt: skip
        pass
    [span] = otel.finished()
    assert span.parent is None


def test_push_deliveries_are_read_tolerantly() -> None:
    assert pushed_message(None) == PushedMessage()
    assert pushed_message({"message": {"data": "%%%"}}).data == b""
    pushed = pushed_message(
        {"message": {"data": base64.b64encode(b"{}").decode(), "attributes": {"k": 1},
                     "message_id": 42}}
    )  # fmt: skip
    assert (pushed.data, pushed.attributes, pushed.message_id) == (b"{}", {"k": "1"}, "42")
    assert pushed.trace_context == {}


def test_without_providers_nothing_is_recorded_and_nothing_is_injected() -> None:
    telemetry.reset()
    assert not telemetry.exporting()
    with telemetry.model_call_span(provider_name="gcp.gemini", model="m") as call:
        call.record_usage(input_tokens=1, output_tokens=1)
        assert not call.span.is_recording()
        assert telemetry.inject_trace_context() == {}


def test_setup_with_no_exporter_installs_nothing() -> None:
    telemetry.reset()
    try:
        config = telemetry.setup(Settings(), "tarsy-step")
        assert not config.exports and not telemetry.exporting()
        # Once per process: a second call changes nothing.
        assert telemetry.setup(Settings(telemetry_cloud=True), "tarsy-step") is config
        assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    finally:
        telemetry.reset()


@pytest.mark.parametrize(
    ("provider", "settings", "expected"),
    [
        (LLMProviderConfig(model="gemini-2.5-flash"), Settings(), "gcp.vertex_ai"),
        (
            LLMProviderConfig(model="gemini-2.5-flash"),
            Settings(GEMINI_API_KEY=SecretStr("k")),
            "gcp.gemini",
        ),
        (
            LLMProviderConfig(model="gemini-2.5-flash", api_key=SecretRef(env="LLM_KEY")),
            Settings(),
            "gcp.gemini",
        ),
        (
            LLMProviderConfig(model="gemini-2.5-flash", vertex_project="other"),
            Settings(GEMINI_API_KEY=SecretStr("k")),
            "gcp.vertex_ai",
        ),
        (LLMProviderConfig(model="claude-sonnet-4-5"), Settings(), "gcp.vertex_ai"),
    ],
)
def test_provider_name_follows_the_endpoint(
    provider: LLMProviderConfig, settings: Settings, expected: str
) -> None:
    assert telemetry.genai_provider_name(provider, settings) == expected

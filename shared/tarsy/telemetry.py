"""OpenTelemetry traces and metrics, named as the GenAI, MCP and messaging conventions say.

One session is one trace. The ingest request's span is its root; every publish
is a ``send {topic}`` PRODUCER span whose W3C trace context (``traceparent``,
``tracestate``) travels in the Pub/Sub message attributes (:mod:`tarsy.bus`);
the step function continues it in a ``process {topic}`` CONSUMER span, under
which one iteration of an agent (``invoke_agent {agent}``), its model call
(``chat {model}``) and its MCP tool calls (``tools/call {tool}``) nest. What
that step publishes is a child of it, and so on to the executive summary.

Exporters: none by default, and then nothing but the OpenTelemetry API is
loaded (its no-op tracer still carries an incoming trace context through). The
SDK and an exporter are loaded only when :func:`setup` finds one configured:
Google Cloud Trace and Cloud Monitoring (``TARSY_TELEMETRY_CLOUD``), OTLP over
HTTP (``OTEL_EXPORTER_OTLP_ENDPOINT``), or both. Sampling is decided once per
trace, at its root (``TARSY_TRACE_SAMPLE_RATIO``), and followed by every hop.

The helpers take plain values and are context managers, so the step engine
wraps what it already does::

    with telemetry.model_call_span(provider_name=..., model=...) as span:
        result = await provider.generate(...)
        span.record_usage(input_tokens=..., output_tokens=..., reasoning_tokens=...)

Metrics: ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``
(per model call), ``mcp.client.operation.duration`` (per MCP call),
``tarsy.step.duration`` (per step message) and ``tarsy.sessions.ended`` (per
session, by terminal status).

Metric log lines (``TARSY_METRIC_LOGS``): the same three events (a step, a
model call, a session end) also as one structured log line each, with the
field ``tarsy_metric`` naming the event (:data:`METRIC_STEP`,
:data:`METRIC_MODEL_CALL`, :data:`METRIC_SESSION_END`). Cloud Logging turns
them into the log-based metrics that Terraform's alert policies and dashboard
read (``infra/monitoring.tf``): they exist whether or not an exporter is
configured, and Terraform creates them, so an alert policy never names a
metric that no function has written yet. The field names are a contract with
``infra/monitoring.tf`` (``tests/infra`` checks both sides).

Names checked against the OpenTelemetry semantic-conventions-genai repository
(gen-ai-spans.md, gen-ai-agent-spans.md, gen-ai-metrics.md, mcp.md) and the
messaging conventions for Google Cloud Pub/Sub; all of them are still at
Development stability.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue
from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.models import TokenUsage

if TYPE_CHECKING:
    from tarsy.config.schema import LLMProviderConfig
    from tarsy.settings import Settings

logger = logging.getLogger(__name__)

R = TypeVar("R")

INSTRUMENTATION_SCOPE = "tarsy"

# ─── attribute names ──────────────────────────────────────────────────────────

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
MCP_METHOD_NAME = "mcp.method.name"
NETWORK_TRANSPORT = "network.transport"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
# tarsy's own, under its namespace.
TARSY_SESSION_ID = "tarsy.session.id"
TARSY_SESSION_STATUS = "tarsy.session.status"
TARSY_EXECUTION_ID = "tarsy.execution.id"
TARSY_CHAIN_ID = "tarsy.chain.id"
TARSY_STEP = "tarsy.step"
TARSY_STEP_KIND = "tarsy.step.kind"
TARSY_STEP_OUTCOME = "tarsy.step.outcome"
TARSY_STAGE = "tarsy.stage"
TARSY_ITERATION = "tarsy.iteration"
TARSY_MCP_SERVER = "tarsy.mcp.server"

# Metric log lines: the event names and their fields (read by infra/monitoring.tf).
METRIC_FIELD = "tarsy_metric"
METRIC_STEP = "step"  # kind, outcome, seconds
METRIC_MODEL_CALL = "model_call"  # model, provider, outcome, error_type, seconds, *_tokens
METRIC_SESSION_END = "session_end"  # status, chain, total_tokens, cost_usd

# Well-known values.
OPERATION_INVOKE_AGENT = "invoke_agent"
OPERATION_CHAT = "chat"
OPERATION_EXECUTE_TOOL = "execute_tool"
PROVIDER_GEMINI = "gcp.gemini"  # generativelanguage.googleapis.com (the Gemini API)
PROVIDER_VERTEX_AI = "gcp.vertex_ai"  # aiplatform.googleapis.com (the backends name the rest)
MESSAGING_GCP_PUBSUB = "gcp_pubsub"
MCP_TOOLS_CALL = "tools/call"
MCP_TOOL_ERROR = "tool_error"  # error.type of a CallToolResult with isError (mcp.md)

ModelOperation = Literal["chat", "generate_content"]
StepOutcome = Literal["ok", "error", "retry"]

# Explicit bucket boundaries the conventions give for the two gen_ai.client metrics.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip
# A step is one model turn plus tools: up to the step function's timeout (540 s).
STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640)

# W3C Trace Context only, whatever the global propagator is: what the bus carries is fixed.
_W3C = TraceContextTextMapPropagator()
TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")


# ─── configuration and setup ──────────────────────────────────────────────────


class TelemetryConfig(DeferredModel):
    """Where a function's telemetry goes, from its settings."""

    model_config = ConfigDict(frozen=True)

    service_name: str = Field(description="service.name of the spans and metrics")
    project_id: str = Field(description="Google Cloud project of Cloud Trace and Monitoring")
    cloud: bool = Field(default=False, description="export to Cloud Trace and Cloud Monitoring")
    otlp_endpoint: str | None = Field(default=None, description="OTLP/HTTP base URL")
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0, description="traces kept, at root")

    @property
    def exports(self) -> bool:
        """Whether any exporter is configured (otherwise nothing but the API is loaded)."""
        return self.cloud or bool(self.otlp_endpoint)

    @classmethod
    def from_settings(cls, settings: Settings, service: str) -> TelemetryConfig:
        """The configuration of ``service`` (``tarsy-step``, ...) from the process settings."""
        return cls(
            service_name=service,
            project_id=settings.project_id,
            cloud=settings.telemetry_cloud,
            otlp_endpoint=settings.otlp_endpoint or None,
            sample_ratio=settings.trace_sample_ratio,
        )


class _Instruments:
    """The tracer and the metric instruments of one pair of providers."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider,
        meter_provider: metrics.MeterProvider,
        flush: Callable[[int], object] | None = None,
    ) -> None:
        self.tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE)
        meter = meter_provider.get_meter(INSTRUMENTATION_SCOPE)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.mcp_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="The duration of the MCP request as observed by the sender.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.step_duration = meter.create_histogram(
            "tarsy.step.duration",
            unit="s",
            description="Wall time of one step message in the step function, by kind and outcome.",
            explicit_bucket_boundaries_advisory=STEP_BUCKETS,
        )
        self.sessions_ended = meter.create_counter(
            "tarsy.sessions.ended",
            unit="{session}",
            description="Sessions that reached a terminal status, by status and chain.",
        )
        self._flush = flush

    def flush(self, timeout_millis: int) -> None:
        if self._flush is not None:
            self._flush(timeout_millis)


_lock = threading.Lock()
_configured: TelemetryConfig | None = None
_instruments: _Instruments | None = None
_exporting = False
_metric_logs = False
# Its own logger, kept at INFO whatever the root level: the lines are data, not chatter.
_metric_logger = logging.getLogger("tarsy.metrics")


def _current() -> _Instruments:
    """The instruments in use: those installed, else the global (by default no-op) providers."""
    global _instruments
    with _lock:
        if _instruments is None:
            _instruments = _Instruments(trace.get_tracer_provider(), metrics.get_meter_provider())
        return _instruments


def setup(settings: Settings, service: str) -> TelemetryConfig:
    """Install the SDK and its exporters once per process, when any is configured.

    Safe to call on every invocation: only the first call does anything. An
    exporter that cannot be created (no credentials, say) is logged and left
    out; telemetry never fails a function.

    Args:
        settings: The process settings (``TARSY_TELEMETRY_CLOUD``,
            ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``TARSY_TRACE_SAMPLE_RATIO``).
        service: The ``service.name`` of this function: ``tarsy-ingest``,
            ``tarsy-step``, ``tarsy-api``.

    Returns:
        The configuration in force in this process.
    """
    global _configured, _instruments, _exporting
    with _lock:
        if _configured is not None:
            return _configured
        config = TelemetryConfig.from_settings(settings, service)
        _configured = config
    enable_metric_logs(settings.metric_logs)
    if not config.exports:
        return config
    try:
        installed = _install_sdk(config)
    except Exception:
        logger.exception("telemetry exporters could not be set up; continuing without them")
        return config
    with _lock:
        _instruments, _exporting = installed, True
    return config


def _install_sdk(config: TelemetryConfig) -> _Instruments:
    """Providers with the configured exporters, also made the global ones."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create(
        {
            "service.name": config.service_name,
            "service.namespace": "tarsy",
            "service.instance.id": uuid.uuid4().hex,
            "cloud.provider": "gcp",
            "cloud.account.id": config.project_id,
        }
    )
    tracer_provider = TracerProvider(
        resource=resource, sampler=ParentBased(TraceIdRatioBased(config.sample_ratio))
    )
    readers: list[MetricReader] = []
    # A minute between metric exports: Cloud Monitoring refuses points of one series
    # closer than a few seconds, and an instance's series is its own (unique label).
    interval = 60_000
    if config.cloud:
        try:
            from opentelemetry.exporter.cloud_monitoring import CloudMonitoringMetricsExporter
            from opentelemetry.exporter.cloud_trace import CloudTraceSpanExporter

            tracer_provider.add_span_processor(
                BatchSpanProcessor(
                    CloudTraceSpanExporter(project_id=config.project_id)  # type: ignore[no-untyped-call]
                )
            )
            exporter = CloudMonitoringMetricsExporter(
                project_id=config.project_id, add_unique_identifier=True
            )
            readers.append(PeriodicExportingMetricReader(exporter, interval))
        except Exception:
            logger.exception("Cloud Trace / Cloud Monitoring exporters unavailable")
    if config.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        base = config.otlp_endpoint.rstrip("/")
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces"))
        )
        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=f"{base}/v1/metrics"), interval
            )
        )
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    logger.info(
        "telemetry: exporting traces and metrics (cloud=%s, otlp=%s, sample ratio %s)",
        config.cloud,
        bool(config.otlp_endpoint),
        config.sample_ratio,
    )
    return _Instruments(tracer_provider, meter_provider, flush=tracer_provider.force_flush)


def use_providers(
    tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider
) -> None:
    """Send this module's spans and metrics to these providers (tests, embedding).

    The global providers can be set only once per process; this replaces only
    what this module uses, as often as needed.
    """
    global _instruments, _exporting
    with _lock:
        _instruments, _exporting = _Instruments(tracer_provider, meter_provider), True


def reset() -> None:
    """Forget what :func:`setup` and :func:`use_providers` installed (tests)."""
    global _configured, _instruments, _exporting, _metric_logs
    with _lock:
        _configured, _instruments, _exporting, _metric_logs = None, None, False, False


def enable_metric_logs(enabled: bool = True) -> None:
    """Write (or stop writing) the metric log lines; :func:`setup` applies the setting."""
    global _metric_logs
    with _lock:
        _metric_logs = enabled
    if enabled:
        _metric_logger.setLevel(logging.INFO)


def metric_logs() -> bool:
    """Whether the metric log lines are written (``TARSY_METRIC_LOGS``)."""
    with _lock:
        return _metric_logs


def log_metric(event: str, **values: str | int | float | None) -> None:
    """Write one metric log line: ``tarsy_metric`` = ``event``, plus ``values``.

    Does nothing unless metric log lines are on. ``None`` values are left out.
    """
    if not metric_logs():
        return
    entry: dict[str, object] = {METRIC_FIELD: event}
    entry.update({k: v for k, v in values.items() if v is not None})
    _metric_logger.info("metric %s", event, extra={"fields": entry})


def exporting() -> bool:
    """Whether spans and metrics go anywhere (an exporter, or providers given by a test)."""
    with _lock:
        return _exporting


def flush(timeout_seconds: float = 5.0) -> None:
    """Export the spans still buffered (end of an invocation: the CPU may be taken away).

    Does nothing when no exporter is configured. Never raises.
    """
    try:
        _current().flush(int(timeout_seconds * 1000))
    except Exception:
        logger.warning("flushing telemetry failed", exc_info=True)


# ─── trace context across Pub/Sub ─────────────────────────────────────────────


def inject_trace_context(context: Context | None = None) -> dict[str, str]:
    """The W3C trace context of ``context`` (default: the current one), as message attributes.

    Empty when there is no valid span context (nothing to continue).
    """
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context)
    return carrier


def extract_trace_context(carrier: Mapping[str, str]) -> Context:
    """The context that the W3C ``traceparent``/``tracestate`` in ``carrier`` describe.

    Malformed or missing values give an empty context (a new trace starts).
    """
    return _W3C.extract({k: carrier[k] for k in TRACE_CONTEXT_KEYS if k in carrier})


@contextmanager
def in_session_trace(carrier: Mapping[str, str]) -> Iterator[None]:
    """Make the session's trace (its stored ``carrier``) current for the block.

    A publish inside it (a chat, a resume, a re-score, a sweeper's re-publish)
    is then a span of the session's trace, not of the request that caused it.
    """
    if not carrier.get("traceparent"):
        yield
        return
    token = otel_context.attach(extract_trace_context(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)


def link_current_span(carrier: Mapping[str, str]) -> None:
    """Link the current span (a sweep, say) to the trace of the session in ``carrier``."""
    linked = trace.get_current_span(extract_trace_context(carrier)).get_span_context()
    if linked.is_valid:
        trace.get_current_span().add_link(linked)


# ─── spans ────────────────────────────────────────────────────────────────────


class SpanHandle:
    """The span of one operation, as the code inside it sees it."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.error_type: str | None = None
        self.retried = False

    def set(self, key: str, value: AttributeValue) -> None:
        """Set one attribute."""
        self.span.set_attribute(key, value)

    def fail(self, error_type: str, description: str | None = None) -> None:
        """Mark the operation failed without an exception (a failure it returns)."""
        self.error_type = error_type
        self.span.set_attribute(ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, description))


class ServerSpan(SpanHandle):
    """An HTTP request served by a function."""

    def set_response(self, status: int, session_id: str | None = None) -> None:
        """Record the response status (5xx fails the span) and the session it concerns."""
        self.set(HTTP_RESPONSE_STATUS_CODE, status)
        if session_id:
            self.set(TARSY_SESSION_ID, session_id)
        if status >= 500:
            self.fail(str(status))


class PublishSpan(SpanHandle):
    """One Pub/Sub publish; :attr:`carrier` is what the message's attributes must carry."""

    def __init__(self, span: Span) -> None:
        super().__init__(span)
        self.carrier = inject_trace_context(trace.set_span_in_context(span))

    def set_message_id(self, message_id: str) -> None:
        """Record the id Pub/Sub gave the message."""
        self.set(MESSAGING_MESSAGE_ID, message_id)


class AgentSpan(SpanHandle):
    """One iteration of an agent."""

    def set_model(self, *, provider_name: str, model: str) -> None:
        """Record the provider (``gen_ai.provider.name``) and model the iteration uses."""
        self.set(GEN_AI_PROVIDER_NAME, provider_name)
        self.set(GEN_AI_REQUEST_MODEL, model)


class ModelCallSpan(SpanHandle):
    """One model call; its usage feeds the span and ``gen_ai.client.token.usage``."""

    def __init__(self, span: Span) -> None:
        super().__init__(span)
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def record_usage(
        self, *, input_tokens: int, output_tokens: int, reasoning_tokens: int = 0
    ) -> None:
        """Record the call's tokens.

        Args:
            input_tokens: Prompt tokens.
            output_tokens: Response tokens, thinking excluded (as tarsy counts them).
            reasoning_tokens: Thinking tokens; the conventions count them in
                ``gen_ai.usage.output_tokens`` too, and apart in
                ``gen_ai.usage.reasoning.output_tokens``.
        """
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens + reasoning_tokens
        self.set(GEN_AI_USAGE_INPUT_TOKENS, self.input_tokens)
        self.set(GEN_AI_USAGE_OUTPUT_TOKENS, self.output_tokens)
        if reasoning_tokens:
            self.set(GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, reasoning_tokens)


class ToolSpan(SpanHandle):
    """One MCP tool call."""

    def tool_error(self, description: str | None = None) -> None:
        """The tool answered with ``isError``: the call worked, the tool did not."""
        self.fail(MCP_TOOL_ERROR, description)


def error_type_of(exc: BaseException) -> str:
    """``error.type`` of an exception: its ``kind`` when it has one (LLMError), else its class."""
    kind = getattr(exc, "kind", None)
    return kind if isinstance(kind, str) and kind else type(exc).__qualname__


@contextmanager
def _operation(
    handle_type: type[SpanHandle],
    name: str,
    kind: SpanKind,
    attributes: Mapping[str, AttributeValue],
    *,
    context: Context | None = None,
    links: list[Link] | None = None,
    expected: tuple[type[BaseException], ...] = (),
    on_end: Callable[[SpanHandle, float], None] | None = None,
) -> Iterator[SpanHandle]:
    """A current span around a block: errors recorded, ``on_end(handle, seconds)`` after.

    An exception of an ``expected`` type is recorded as an event only; the span
    keeps an unset status (a duplicate delivery that Pub/Sub retries, say).
    """
    tracer = _current().tracer
    started = time.perf_counter()
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=dict(attributes),
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        handle = handle_type(span)
        try:
            yield handle
        except expected as exc:
            span.add_event("retry", {"exception.type": type(exc).__qualname__})
            handle.retried = True
            raise
        except BaseException as exc:
            span.record_exception(exc)
            handle.fail(error_type_of(exc), str(exc) or None)
            raise
        finally:
            if on_end is not None:
                try:
                    on_end(handle, time.perf_counter() - started)
                except Exception:
                    logger.warning("recording a metric failed", exc_info=True)


@contextmanager
def server_span(
    method: str, route: str, *, incoming: Mapping[str, str] | None = None
) -> Iterator[ServerSpan]:
    """A function's HTTP request, as the root of a new trace.

    A ``traceparent`` the request came with (Google's front end adds one, most
    often unsampled) becomes a link, not the parent: each session's trace is
    its own and sampled by this deployment's ratio.

    Args:
        method: The HTTP method.
        route: The low-cardinality route (``/alerts``, ``/sessions/{id}``).
        incoming: The request headers, lower-cased names.
    """
    links: list[Link] = []
    if incoming:
        remote = trace.get_current_span(extract_trace_context(incoming)).get_span_context()
        if remote.is_valid:
            links.append(Link(remote))
    attributes = {HTTP_REQUEST_METHOD: method, HTTP_ROUTE: route}
    with _operation(
        ServerSpan, f"{method} {route}", SpanKind.SERVER, attributes,
        context=Context(), links=links,
    ) as handle:  # fmt: skip
        assert isinstance(handle, ServerSpan)
        yield handle


def _step_attributes(
    session_id: str, execution_id: str | None, kind: str, step: int, stage: int
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {TARSY_SESSION_ID: session_id, TARSY_STEP_KIND: kind}
    if execution_id:
        attributes[TARSY_EXECUTION_ID] = execution_id
        attributes[TARSY_STEP] = step
    else:
        attributes[TARSY_STAGE] = stage
    return attributes


@contextmanager
def publish_span(
    topic: str,
    *,
    session_id: str,
    execution_id: str | None,
    kind: str,
    step: int = 0,
    stage: int = 0,
) -> Iterator[PublishSpan]:
    """A publish of one step message: ``send {topic}``, PRODUCER.

    Yields the span, whose :attr:`PublishSpan.carrier` holds the W3C trace
    context to put in the message attributes (empty when nothing is traced).
    """
    attributes = {
        MESSAGING_SYSTEM: MESSAGING_GCP_PUBSUB,
        MESSAGING_OPERATION_NAME: "send",
        MESSAGING_OPERATION_TYPE: "send",
        MESSAGING_DESTINATION_NAME: topic,
        **_step_attributes(session_id, execution_id, kind, step, stage),
    }
    with _operation(PublishSpan, f"send {topic}", SpanKind.PRODUCER, attributes) as handle:
        assert isinstance(handle, PublishSpan)
        yield handle


@contextmanager
def step_span(
    topic: str,
    carrier: Mapping[str, str],
    *,
    session_id: str,
    execution_id: str | None,
    kind: str,
    step: int = 0,
    stage: int = 0,
    message_id: str | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
) -> Iterator[SpanHandle]:
    """One step message handled by the step function: ``process {topic}``, CONSUMER.

    Its parent is the publish whose trace context ``carrier`` (the message's
    attributes) holds. On exit, ``tarsy.step.duration`` records the step with
    its kind and outcome (``ok``, ``error``, or ``retry`` for an exception of a
    ``retry_on`` type, which is not marked as an error).
    """
    attributes = {
        MESSAGING_SYSTEM: MESSAGING_GCP_PUBSUB,
        MESSAGING_OPERATION_NAME: "process",
        MESSAGING_OPERATION_TYPE: "process",
        MESSAGING_DESTINATION_NAME: topic,
        **_step_attributes(session_id, execution_id, kind, step, stage),
    }
    if message_id:
        attributes[MESSAGING_MESSAGE_ID] = message_id

    def record(handle: SpanHandle, seconds: float) -> None:
        outcome: StepOutcome = "ok"
        if handle.retried:
            outcome = "retry"
        elif handle.error_type is not None:
            outcome = "error"
        handle.set(TARSY_STEP_OUTCOME, outcome)
        _current().step_duration.record(
            seconds, {TARSY_STEP_KIND: kind, TARSY_STEP_OUTCOME: outcome}
        )
        log_metric(METRIC_STEP, kind=kind, outcome=outcome, seconds=round(seconds, 4))

    with _operation(
        SpanHandle, f"process {topic}", SpanKind.CONSUMER, attributes,
        context=extract_trace_context(carrier), expected=retry_on, on_end=record,
    ) as handle:  # fmt: skip
        yield handle


@contextmanager
def agent_span(
    agent: str,
    *,
    session_id: str,
    execution_id: str,
    step: int,
    iteration: int | None = None,
    provider_name: str | None = None,
    model: str | None = None,
) -> Iterator[AgentSpan]:
    """One iteration of an agent (one step of its execution): ``invoke_agent {agent}``.

    INTERNAL: the agent runs in this process. ``gen_ai.agent.id`` and
    ``gen_ai.conversation.id`` are the execution id (its conversation is the
    execution's ``messages``). The provider and model may be given later, with
    :meth:`AgentSpan.set_model`, once the execution's configuration is resolved.
    """
    attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION_NAME: OPERATION_INVOKE_AGENT,
        GEN_AI_AGENT_NAME: agent,
        GEN_AI_AGENT_ID: execution_id,
        GEN_AI_CONVERSATION_ID: execution_id,
        TARSY_SESSION_ID: session_id,
        TARSY_EXECUTION_ID: execution_id,
        TARSY_STEP: step,
    }
    if iteration is not None:
        attributes[TARSY_ITERATION] = iteration
    with _operation(
        AgentSpan, f"{OPERATION_INVOKE_AGENT} {agent}", SpanKind.INTERNAL, attributes
    ) as handle:
        assert isinstance(handle, AgentSpan)
        if provider_name is not None and model is not None:
            handle.set_model(provider_name=provider_name, model=model)
        yield handle


@contextmanager
def model_call_span(
    *,
    provider_name: str,
    model: str,
    operation: ModelOperation = "chat",
    conversation_id: str | None = None,
    stream: bool = True,
) -> Iterator[ModelCallSpan]:
    """One model call, retries included: ``chat {model}``, CLIENT.

    On exit, ``gen_ai.client.operation.duration`` records the call (with
    ``error.type`` when it failed) and ``gen_ai.client.token.usage`` its input
    and output tokens, when :meth:`ModelCallSpan.record_usage` gave them.

    Args:
        provider_name: ``gen_ai.provider.name`` (see :func:`genai_provider_name`).
        model: The model requested.
        operation: ``chat`` (the default, as the issue names it) or
            ``generate_content``, the value the conventions list for Gemini's
            generateContent.
        conversation_id: The execution id, when known.
        stream: Whether the call streams.
    """
    attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_PROVIDER_NAME: provider_name,
        GEN_AI_REQUEST_MODEL: model,
    }
    if stream:
        attributes[GEN_AI_REQUEST_STREAM] = True
    if conversation_id:
        attributes[GEN_AI_CONVERSATION_ID] = conversation_id
    metric_attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_PROVIDER_NAME: provider_name,
        GEN_AI_REQUEST_MODEL: model,
    }

    def record(handle: SpanHandle, seconds: float) -> None:
        instruments = _current()
        duration_attributes = dict(metric_attributes)
        if handle.error_type is not None:
            duration_attributes[ERROR_TYPE] = handle.error_type
        instruments.operation_duration.record(seconds, duration_attributes)
        assert isinstance(handle, ModelCallSpan)
        for token_type, count in (("input", handle.input_tokens), ("output", handle.output_tokens)):
            if count is not None:
                instruments.token_usage.record(
                    count, {**metric_attributes, GEN_AI_TOKEN_TYPE: token_type}
                )
        log_metric(
            METRIC_MODEL_CALL,
            model=model,
            provider=provider_name,
            outcome="ok" if handle.error_type is None else "error",
            error_type=handle.error_type,
            seconds=round(seconds, 4),
            input_tokens=handle.input_tokens,
            output_tokens=handle.output_tokens,
        )

    with _operation(
        ModelCallSpan, f"{operation} {model}", SpanKind.CLIENT, attributes, on_end=record
    ) as handle:
        assert isinstance(handle, ModelCallSpan)
        yield handle


@contextmanager
def mcp_tool_span(
    tool: str,
    *,
    server: str,
    call_id: str | None = None,
    transport: Literal["http", "stdio"] = "http",
    server_address: str | None = None,
    server_port: int | None = None,
) -> Iterator[ToolSpan]:
    """One MCP tool call: ``tools/call {tool}``, CLIENT, with the GenAI execute_tool attributes.

    The MCP conventions make this the tool's execute_tool span too (one span,
    both sets of attributes). On exit, ``mcp.client.operation.duration`` records it.

    Args:
        tool: The tool's name on its server (without the ``server.`` prefix).
        server: The configured MCP server id (``tarsy.mcp.server``).
        call_id: The model's id for this call (``gen_ai.tool.call.id``).
        transport: ``http`` (streamable HTTP, ``network.transport`` tcp) or
            ``stdio`` (pipe).
        server_address: The HTTP server's host, when known.
        server_port: Its port.
    """
    attributes: dict[str, AttributeValue] = {
        MCP_METHOD_NAME: MCP_TOOLS_CALL,
        GEN_AI_OPERATION_NAME: OPERATION_EXECUTE_TOOL,
        GEN_AI_TOOL_NAME: tool,
        GEN_AI_TOOL_TYPE: "extension",
        NETWORK_TRANSPORT: "pipe" if transport == "stdio" else "tcp",
        TARSY_MCP_SERVER: server,
    }
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    if server_address:
        attributes[SERVER_ADDRESS] = server_address
        if server_port is not None:
            attributes[SERVER_PORT] = server_port

    def record(handle: SpanHandle, seconds: float) -> None:
        metric: dict[str, AttributeValue] = {
            MCP_METHOD_NAME: MCP_TOOLS_CALL,
            GEN_AI_TOOL_NAME: tool,
        }
        if handle.error_type is not None:
            metric[ERROR_TYPE] = handle.error_type
        _current().mcp_duration.record(seconds, metric)

    with _operation(
        ToolSpan, f"{MCP_TOOLS_CALL} {tool}", SpanKind.CLIENT, attributes, on_end=record
    ) as handle:
        assert isinstance(handle, ToolSpan)
        yield handle


async def traced_model_call(
    call: Awaitable[R],
    *,
    provider_name: str,
    model: str,
    conversation_id: str | None = None,
    operation: ModelOperation = "chat",
) -> R:
    """Await one model call inside a :func:`model_call_span`.

    The result's ``usage`` (a :class:`~tarsy.models.TokenUsage`, as on
    ``LLMResult``) is recorded; an exception's ``kind`` (``LLMError``) is the
    span's ``error.type``, and the exception goes on. So a call site changes
    one expression::

        result = await telemetry.traced_model_call(
            provider.generate(request, progress, budget=budget),
            provider_name=..., model=..., conversation_id=...,
        )
    """
    with model_call_span(
        provider_name=provider_name,
        model=model,
        operation=operation,
        conversation_id=conversation_id,
    ) as span:
        result = await call
        usage = getattr(result, "usage", None)
        if isinstance(usage, TokenUsage):
            span.record_usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                reasoning_tokens=usage.thinking_tokens,
            )
        return result


# ─── plain functions ──────────────────────────────────────────────────────────


def record_session_end(
    status: str, *, chain_id: str, total_tokens: int | None = None, cost_usd: float | None = None
) -> None:
    """Count one session that reached terminal ``status`` (call once per session).

    ``total_tokens`` and ``cost_usd`` (what the whole session spent) go into its
    metric log line.
    """
    _current().sessions_ended.add(1, {TARSY_SESSION_STATUS: status, TARSY_CHAIN_ID: chain_id})
    log_metric(
        METRIC_SESSION_END,
        status=status,
        chain=chain_id,
        total_tokens=total_tokens,
        cost_usd=cost_usd,
    )


def genai_provider_name(config: LLMProviderConfig, settings: Settings) -> str:
    """``gen_ai.provider.name`` of a configured LLM provider: its backend says (no secret read).

    ``gcp.gemini`` / ``gcp.vertex_ai`` for the Google types (by the endpoint the
    calls reach), ``openai``, ``anthropic``, ``x_ai``, and ``openai_compatible``
    for a self-hosted server.
    """
    from tarsy.llm.backends import backend_for

    return backend_for(config.type).provider_name(config, settings)

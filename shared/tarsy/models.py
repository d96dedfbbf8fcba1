"""Data models shared by every layer: what is stored in Firestore and what travels on Pub/Sub.

Field names match the Firestore layout in the design brief, so a document in the
console reads the same as the model that wrote it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal, TypedDict

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
    model_validator,
)

from tarsy._pydantic import DeferredModel
from tarsy.money import Money as Money  # re-exported: the models' cost type

# ─── statuses ─────────────────────────────────────────────────────────────────


class ExecutionStatus(StrEnum):
    """Status of a session, stage or agent execution (seed 003, plus ``paused``)."""

    PENDING = "pending"
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    PAUSED = "paused"

    @property
    def is_terminal(self) -> bool:
        """Whether nothing more happens to a record in this status (paused can resume)."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {
        ExecutionStatus.COMPLETED,
        ExecutionStatus.FAILED,
        ExecutionStatus.TIMED_OUT,
        ExecutionStatus.CANCELLED,
    }
)


def utcnow() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class _Model(DeferredModel):
    model_config = ConfigDict(extra="ignore", use_enum_values=False)


# ─── errors and usage ─────────────────────────────────────────────────────────


class ErrorInfo(_Model):
    """An error as recorded and as streamed by providers (seed 003 ``ErrorInfo``)."""

    message: str
    code: str = ""
    retryable: bool = False


class TokenUsage(_Model):
    """Token counts of one LLM call, or totals over many."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    thinking_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
        )


# ─── alert submission ─────────────────────────────────────────────────────────

# An MCP server id as the configuration spells it; a tool name as an MCP server lists it.
_SERVER_NAME = r"^[\w\-]+$"
_TOOL_NAME = r"^[\w\-.:/]+$"


class MCPServerSelection(_Model):
    """One MCP server an alert chooses, and optionally which of its tools (TARSy's shape).

    ``tools`` unset or empty: every tool the server lists.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=_SERVER_NAME)
    tools: list[Annotated[str, Field(min_length=1, max_length=200, pattern=_TOOL_NAME)]] | None = (
        Field(default=None, max_length=500)
    )


class MCPSelection(_Model):
    """The alert's ``mcp``: the servers (and tools) every execution of its session uses.

    It replaces the servers the chain configures for its agents and its chat;
    an empty ``servers`` list runs the session without MCP tools.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: list[MCPServerSelection] = Field(max_length=100)

    @field_validator("servers")
    @classmethod
    def _distinct_servers(cls, value: list[MCPServerSelection]) -> list[MCPServerSelection]:
        names = [server.name for server in value]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"servers named more than once: {', '.join(repeated)}")
        return value


class AlertSubmission(_Model):
    """Body of ``POST /alerts``.

    ``data`` is opaque: a string or a JSON object, passed to the model as text.
    """

    model_config = ConfigDict(extra="forbid")

    alert_type: str = Field(min_length=1, max_length=200, pattern=r"^[\w.\-/: ]+$")
    data: str | dict[str, Any] = Field(description="The alert payload, as text or a JSON object.")
    # Runbook text, or an http(s) URL fetched when the session starts (tarsy.tools.runbooks).
    runbook: str | None = Field(default=None, max_length=200_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    mcp: MCPSelection | None = None

    @field_validator("data")
    @classmethod
    def _data_not_empty(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        if not value:
            raise ValueError("must not be empty")
        return value

    def data_as_text(self) -> str:
        """Return the alert data as the text the model reads."""
        if isinstance(self.data, str):
            return self.data
        return json.dumps(self.data, indent=2, sort_keys=True, ensure_ascii=False)


# ─── sessions, stages, executions ─────────────────────────────────────────────


class ChainRouting(_Model):
    """Why a session runs its chain (``tarsy.config.routing``), for the people reading it.

    ``by``: a chain claims the alert type (``alert_type``), the alert's source
    names a chain (``source``: ``alert_sources.<source>.chain``), a rule of
    ``alert_routes`` matched the alert (``rule``, named in ``rule``), or nothing
    did (``default``, the chain without tools). ``reason`` says it in words.
    """

    by: Literal["alert_type", "source", "rule", "default"]
    rule: str | None = None
    reason: str


class GatherSummary(_Model):
    """What an agent's gather step did (evidence first), for the people and the evaluations."""

    calls: int = 0
    detections: int = 0
    elapsed_ms: float = 0.0
    stopped: str = Field(default="", description="why gathering ended (complete, a budget)")
    brief_chars: int = Field(default=0, description="the findings and evidence the opening got")


# ─── feedback ─────────────────────────────────────────────────────────────────

# What a responder says of an analysis: it found the cause, part of it, or not.
Verdict = Literal["right", "partly_right", "wrong"]
VERDICTS: tuple[Verdict, ...] = ("right", "partly_right", "wrong")
ROOT_CAUSE_CHARS = 4000


class Feedback(_Model):
    """A responder's judgement of a session's analysis, and the real cause if they wrote it.

    The latest feedback replaces the one before on the session; each one is also
    an audit record (``feedback``), so none is lost.
    """

    verdict: Verdict = Field(description="right, partly_right or wrong")
    root_cause: str | None = Field(
        default=None,
        max_length=ROOT_CAUSE_CHARS,
        description="the real root cause, as the responder wrote it (secrets masked)",
    )
    by: str = Field(description="the verified e-mail of who gave it")
    at: datetime = Field(default_factory=utcnow)

    @property
    def corrected(self) -> bool:
        """Whether the responder wrote a cause the analysis did not (fully) find."""
        return self.verdict != "right" and bool(self.root_cause)


# ─── memory of earlier incidents ──────────────────────────────────────────────


class RecalledSession(_Model):
    """An earlier session of the same alert, as a new session's investigation is told of it.

    Written on the new session as it starts (tarsy.memory): what the earlier one
    concluded and what people said of it, so every opening of the session, a
    replay, and the page read the same history.
    """

    session_id: str
    alert_type: str
    status: ExecutionStatus
    created_at: datetime
    matched_by: Literal["fingerprint", "workload"] = Field(
        description="the same alert fingerprint, or the same alert name on the same workload"
    )
    workload: str = Field(default="", description="namespace/workload they share, if any")
    conclusion: str = Field(default="", description="its executive summary or analysis, cut")
    feedback: Feedback | None = None


class Session(_Model):
    """``sessions/{session_id}``: one investigation of one alert."""

    session_id: str
    alert_type: str
    alert_data: str
    runbook: str | None = None
    # When a runbook URL was fetched at start_session (the alert's, else its chain's
    # runbook_url): the URL, and the text fetched or why there is none (tarsy.tools.runbooks).
    runbook_url: str | None = None
    runbook_text: str | None = None
    runbook_error: str | None = None
    # The alert's choice of MCP servers and tools, for every execution (tarsy.tools.selection).
    mcp: MCPSelection | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Where the alert came from (Alertmanager, ...); "api" for tarsy's own POST /alerts.
    source: str = "api"
    # The W3C trace context of the request that created it: every later hop (a chat,
    # a resume, a re-score, the sweeper's re-publishes) continues this trace.
    trace_context: dict[str, str] = Field(default_factory=dict)
    chain_id: str
    # How chain_id was chosen (absent on sessions created before routing was recorded).
    routing: ChainRouting | None = None
    status: ExecutionStatus = ExecutionStatus.PENDING
    current_stage: int | None = None
    final_analysis: str | None = None
    executive_summary: str | None = None
    # The findings of the gather phase's checks (tarsy.evidence), one sentence each: they
    # stand in the executive summary when the model does not finish the investigation.
    findings: list[str] = Field(default_factory=list)
    gather: GatherSummary | None = None
    error: ErrorInfo | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost: Money = 0
    cancel_requested: bool = False
    # What people did to it, as keys the session list filters on (tarsy.access.audit).
    audit_keys: list[str] = Field(default_factory=list)
    deadline: datetime | None = None
    # The LLM judge's score (0-100) and its report (tarsy.agent.scoring.SessionScore as a
    # mapping: the four categories with reasons, missing tools); or why scoring failed.
    score: int | None = None
    score_report: dict[str, Any] | None = None
    score_error: str | None = None
    # While a stage start is awaited (at ingest, between stages): which stage, and by
    # when its start must have run; the sweeper re-publishes it when overdue.
    awaiting_stage: int | None = None
    due_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    # Why a completed session ended before its chain did: "budget" when its spend
    # crossed the chain's max_tokens / max_cost_usd (the stages left were skipped).
    completion_reason: Literal["budget"] | None = None
    # When the alert's own source said it is over (Alertmanager/Grafana "resolved",
    # PagerDuty incident.resolved, CloudWatch OK); the investigation itself goes on.
    resolved_at: datetime | None = None
    # Investigate again: the session this one runs again (its alert, today's configuration),
    # and the sessions that ran this one again, newest last. Linked both ways.
    investigation_of: str | None = None
    investigated_again_as: list[str] = Field(default_factory=list)
    # Feedback (tarsy.feedback): the latest responder's verdict and corrected cause; the
    # verdict also at the top level, where the session list filters on it.
    feedback: Feedback | None = None
    verdict: Verdict | None = None
    # Memory (tarsy.memory): the keys under which later alerts find this session (its
    # fingerprint; its alert name on its workload), and the earlier sessions it recalled.
    memory_keys: list[str] = Field(default_factory=list)
    recalled: list[RecalledSession] = Field(default_factory=list)
    # Retention (tarsy.persistence.retention): when the sweeper is next to stamp expire_at on the
    # session and every record of it (set as it ends or takes a chat question; None once
    # stamped). Firestore TTL deletes each document after its expire_at.
    retention_due: datetime | None = None
    expire_at: datetime | None = None


ExecutionRole = Literal["agent", "synthesis", "summary", "chat", "scoring", "sub_agent"]


class Stage(_Model):
    """``sessions/{sid}/stages/{index}``: one stage of the chain."""

    index: int
    name: str
    status: ExecutionStatus = ExecutionStatus.PENDING
    parallel_type: Literal["single", "multi_agent", "replica"] = "single"
    agents: list[str] = Field(default_factory=list)
    execution_ids: list[str] = Field(default_factory=list)
    success_policy: Literal["all", "any"] = "all"
    # Filled when the last agent finishes: {execution_id: final status}.
    finished_executions: dict[str, str] = Field(default_factory=dict)
    synthesis_execution_id: str | None = None
    error: ErrorInfo | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None

    @property
    def expected_executions(self) -> int:
        """How many agent executions the stage waits for."""
        return len(self.execution_ids)


class SubAgentWait(_Model):
    """What a parent's step that messaged sub-agents waits for (on the execution)."""

    step: int = Field(description="the step that sent the messages")
    call_ids: list[str] = Field(description="message_agent calls still to be answered")
    deadline: datetime = Field(description="unanswered calls then get an error observation")


class ThreadReply(_Model):
    """Where a chat question was asked in Slack, and so where its answer goes.

    See :mod:`tarsy.notify.slack_thread`.
    """

    channel: str
    thread_ts: str
    event_id: str
    asked_by: str = Field(description="the asker's e-mail, as Slack gave it")


class AgentExecution(_Model):
    """``executions/{execution_id}``: one agent's run inside one stage.

    ``step`` is the number of the next step to run; a step message whose
    ``step`` differs from it is a duplicate or stale. ``published_step`` is the
    highest step whose message is known to have been published.
    """

    execution_id: str
    session_id: str
    stage: int
    # agent: one of the stage's agents; synthesis: merges a parallel stage;
    # summary: the executive summary after the last stage.
    role: ExecutionRole = "agent"
    agent: str
    agent_index: int = 0
    strategy: str
    provider: str
    status: ExecutionStatus = ExecutionStatus.PENDING
    step: int = 0
    published_step: int = -1
    iteration: int = 0
    max_iterations: int = 20
    consecutive_failures: int = 0
    # Set by a cancel: touching the execution voids a running step's commit precondition.
    cancel_requested: bool = False
    lease_owner: str | None = None
    lease_until: datetime | None = None
    # When the next step must have been claimed (or the running step renewed its
    # lease); None once nothing more is due. The sweeper re-publishes past it.
    due_at: datetime | None = None
    # Re-publishes of the current step since it was last claimed (by the sweeper or a
    # duplicate's heal); each waits twice as long as the one before. Reset by a claim.
    republished: int = 0
    final_analysis: str | None = None
    error: ErrorInfo | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost: Money = 0
    created_at: datetime = Field(default_factory=utcnow)
    completed_at: datetime | None = None
    # Sub-agents (seed 004). A sub_agent execution is one conversation: the agent
    # that messaged it, the message_agent call it is answering and that call's step.
    parent_execution_id: str | None = None
    parent_tool_call_id: str | None = None
    parent_step: int | None = None
    depth: int = 0
    # Set while this execution waits for the answers of the sub-agents it messaged.
    awaiting: SubAgentWait | None = None
    # Evidence first: the execution's next step is its gather phase (tarsy.evidence), which
    # runs the collectors and rewrites the opening before the first model call.
    gather_pending: bool = False
    # A chat question asked in the session's Slack thread: its answer is posted there, once.
    reply_to: ThreadReply | None = None


# ─── conversation ─────────────────────────────────────────────────────────────

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(_Model):
    """A tool invocation requested by the model. ``name`` is canonical ``server.tool``."""

    id: str
    name: str
    arguments: str = "{}"


class ConversationMessage(_Model):
    """``executions/{eid}/messages/{seq}``: one message of the agent's conversation."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None


# ─── timeline ─────────────────────────────────────────────────────────────────


class TimelineEventType(StrEnum):
    """The eight timeline event types of seed 003, and tarsy's detections."""

    LLM_THINKING = "llm_thinking"
    LLM_RESPONSE = "llm_response"
    LLM_TOOL_CALL = "llm_tool_call"
    MCP_TOOL_CALL = "mcp_tool_call"
    MCP_TOOL_SUMMARY = "mcp_tool_summary"
    FINAL_ANALYSIS = "final_analysis"
    USER_QUESTION = "user_question"
    EXECUTIVE_SUMMARY = "executive_summary"
    # A finding of the gather phase's plain-code checks (tarsy.evidence.detections).
    DETECTION = "detection"


# Fields every event has at the top of its stored document; the rest are under ``metadata``.
_TOP_LEVEL = ("type", "content", "created_at")
# Keys older documents used before seed 003's names.
_OLD_KEYS = {"tool": "tool_name", "server": "server_name"}


class _TimelineEventBase(_Model):
    """An event of ``executions/{eid}/timeline/{seq}``: one thing a watcher sees happen.

    The stored document keeps the shape every session was written in:
    ``{type, content, created_at, metadata: {...}}``, the type's own fields
    under ``metadata`` (absent when unset); in code each is an attribute. The
    reader is tolerant: a document written before these models (a field
    missing, a key under its older name, keys no model knows) still loads.
    """

    # Built in code, a misspelt field is an error; read from a document, unknown keys are dropped.
    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    content: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    # What the step adds to the first event of a turn: any type can carry them.
    unavailable_servers: dict[str, str] | None = None
    runbook_error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_stored(cls, data: Any) -> Any:
        """Read a document: its type's fields from ``metadata``, the rest from the top level.

        Only ``type``, ``content`` and ``created_at`` are read from the top level: the
        api serves each event with its execution's ``stage`` and ``agent`` beside them.
        """
        if not isinstance(data, dict) or "metadata" not in data:
            return data
        stored: dict[str, Any] = data.get("metadata") or {}
        metadata = {_OLD_KEYS.get(k, k): v for k, v in stored.items()}
        # A key under its new name wins over the same key under its old one.
        metadata.update({k: v for k, v in stored.items() if k in _OLD_KEYS.values()})
        read = {k: v for k, v in metadata.items() if k in cls.model_fields and k not in _TOP_LEVEL}
        return {**read, **{k: v for k, v in data.items() if k in _TOP_LEVEL}}

    @model_serializer(mode="wrap")
    def _to_stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Nest the type's own fields under ``metadata``, leaving out the unset (None) ones."""
        data: dict[str, Any] = handler(self)
        stored = {k: data.pop(k) for k in _TOP_LEVEL if k in data}
        stored["metadata"] = {k: v for k, v in data.items() if v is not None}
        return stored


class _TurnNotes(_Model):
    """What an iteration notes on the events of the model's reply (thinking, response, analysis).

    Every field is optional: each strategy notes what applies to its turn.
    """

    iteration: int | None = None
    # The parts of the provider's metadata a watcher should see (seed 000).
    native_tools_suppressed: list[str] | None = None
    # ReAct: what the parser made of the reply, and the fallbacks it needed.
    react_kind: str | None = None
    parser_fallbacks: list[str] | None = None
    # Schema actions: the action chosen, or why the reply did not fit the schema.
    action: str | None = None
    schema_error: str | None = None
    # A conclusion forced by max_iterations, a loop or the budget, and the calls it dropped.
    forced_conclusion: str | None = None
    ignored_tool_calls: list[str] | None = None
    # An answer sent back: it named no evidence, or it was not written as asked.
    nudge: str | None = None
    answer_error: str | None = None
    # Why the reply could not be used (a malformed ReAct answer, a reply cut short).
    error: str | None = None
    # The compact path (tarsy.agent.compact): "answer" (the conclusion call after the
    # evidence), "not_enough" (it asked for the follow-up) or "follow_up" (a tool turn).
    compact: str | None = None


class TurnNotes(TypedDict, total=False):
    """:class:`_TurnNotes` as a strategy gathers them before the events exist."""

    iteration: int
    native_tools_suppressed: list[str]
    react_kind: str
    parser_fallbacks: list[str]
    action: str
    schema_error: str
    forced_conclusion: str
    ignored_tool_calls: list[str]
    nudge: str
    answer_error: str
    error: str
    compact: str


class LLMThinkingEvent(_TimelineEventBase, _TurnNotes):
    """The model's thinking (``source``: native thinking parts, or a ReAct ``Thought:``)."""

    type: Literal[TimelineEventType.LLM_THINKING] = TimelineEventType.LLM_THINKING
    source: Literal["native", "react"] | None = None


class LLMResponseEvent(_TimelineEventBase, _TurnNotes):
    """A reply that is neither a tool call nor the analysis: code run, or a reply not used."""

    type: Literal[TimelineEventType.LLM_RESPONSE] = TimelineEventType.LLM_RESPONSE
    # "code_execution": the content shows code the model ran in the provider's sandbox.
    source: Literal["code_execution"] | None = None
    code_executions: list[CodeExecution] | None = None
    # A reply cut at the output limit ("truncated") or by a filter ("blocked").
    cut_short: str | None = None
    finish_reason: str | None = None


class LLMToolCallEvent(_TimelineEventBase):
    """A tool call as the model asked for it; ``arguments`` is the JSON text the model wrote."""

    type: Literal[TimelineEventType.LLM_TOOL_CALL] = TimelineEventType.LLM_TOOL_CALL
    call_id: str = ""
    tool_name: str = ""
    server_name: str = ""
    arguments: str = "{}"
    # A repeated call, not run: how often it repeated and what the model was told instead.
    loop_detected: bool | None = None
    repeats: int | None = None
    observation: str | None = None
    # A message to a sub-agent: its name and the conversation it went to.
    sub_agent: str | None = None
    conversation_id: str | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_text(cls, value: Any) -> Any:
        """A record holding the arguments as an object (or nothing) reads as their JSON text."""
        if value is None:
            return "{}"
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
        return value


class MCPToolCallEvent(_TimelineEventBase):
    """A tool's result; ``arguments`` are the parsed arguments the tool was called with.

    A call of the gather step (evidence first) is ``gathered``, names the
    ``collector`` that planned it and the ``evidence_label`` the brief cites it by.
    """

    type: Literal[TimelineEventType.MCP_TOOL_CALL] = TimelineEventType.MCP_TOOL_CALL
    call_id: str = ""
    tool_name: str = ""
    server_name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False
    duration_ms: float | None = None
    shown_as: Literal["full", "summarized", "truncated"] = "full"
    gathered: bool | None = None
    collector: str | None = None
    evidence_label: str | None = None
    sub_agent: str | None = None
    conversation_id: str | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_object(cls, value: Any) -> Any:
        """Older records may hold the arguments as the model's JSON text, or nothing."""
        if value is None:
            return {}
        if isinstance(value, str):
            try:
                parsed = json.loads(value or "{}")
            except ValueError:
                return {"raw": value}
            return parsed if isinstance(parsed, dict) else {"raw": value}
        return value


class MCPToolSummaryEvent(_TimelineEventBase):
    """The summary a model made of a long tool result (the model reads it instead)."""

    type: Literal[TimelineEventType.MCP_TOOL_SUMMARY] = TimelineEventType.MCP_TOOL_SUMMARY
    call_id: str = ""
    tool_name: str = ""
    server_name: str = ""
    original_tokens: int | None = None
    summary_tokens: int = 0


class FinalAnalysisEvent(_TimelineEventBase, _TurnNotes):
    """An agent's final analysis (or a chat's answer)."""

    type: Literal[TimelineEventType.FINAL_ANALYSIS] = TimelineEventType.FINAL_ANALYSIS
    agent: str | None = None


class UserQuestionEvent(_TimelineEventBase):
    """A question: a chat's (``chat``: its number) or a parent agent's message to a sub-agent."""

    type: Literal[TimelineEventType.USER_QUESTION] = TimelineEventType.USER_QUESTION
    chat: int | None = None
    from_agent: str | None = None
    call_id: str | None = None


class ExecutiveSummaryEvent(_TimelineEventBase):
    """The session's executive summary."""

    type: Literal[TimelineEventType.EXECUTIVE_SUMMARY] = TimelineEventType.EXECUTIVE_SUMMARY
    agent: str | None = None


class EventSubject(_Model):
    """The Kubernetes object a detection is about (empty namespace: cluster-scoped)."""

    kind: str
    name: str
    namespace: str = ""

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        """Older records hold the subject as its text, ``Kind namespace/name``."""
        if not isinstance(data, str):
            return data
        kind, _, where = data.partition(" ")
        namespace, _, name = where.rpartition("/")
        return {"kind": kind, "name": name, "namespace": namespace}


class Severity(IntEnum):
    """How a detection's finding weighs: the likely cause, a symptom, or context.

    Its value orders findings (likely causes first) and is what older stored
    timelines hold (1, 2, 3); :attr:`word` is how the brief names it.
    """

    LIKELY_CAUSE = 1
    SYMPTOM = 2
    CONTEXT = 3

    @property
    def word(self) -> str:
        """The severity as the brief writes it."""
        return self.name.lower().replace("_", " ")


class DetectionEvent(_TimelineEventBase):
    """A finding of the gather step's plain-code checks; ``content`` is its sentence.

    ``severity`` weighs it (:class:`Severity`). ``evidence`` are the gathered
    calls' ids, ``evidence_labels`` the labels the brief cites them by.
    """

    type: Literal[TimelineEventType.DETECTION] = TimelineEventType.DETECTION
    check: str = ""
    subject: EventSubject | None = None
    severity: Severity = Severity.SYMPTOM
    evidence: list[str] = Field(default_factory=list)
    evidence_labels: list[str] = Field(default_factory=list)


# One model per type; adding a type is a model here, then what the type checker names
# (every ``match`` over events ends in ``assert_never``).
TimelineEvent = Annotated[
    LLMThinkingEvent
    | LLMResponseEvent
    | LLMToolCallEvent
    | MCPToolCallEvent
    | MCPToolSummaryEvent
    | FinalAnalysisEvent
    | UserQuestionEvent
    | ExecutiveSummaryEvent
    | DetectionEvent,
    Field(discriminator="type"),
]

# Built on first use, like the models (tarsy._pydantic): ingest never reads a timeline.
_TIMELINE_EVENT: TypeAdapter[TimelineEvent] = TypeAdapter(
    TimelineEvent, config=ConfigDict(defer_build=True)
)


def timeline_event(document: Mapping[str, Any]) -> TimelineEvent:
    """Read a stored (or served) timeline document into its event model."""
    return _TIMELINE_EVENT.validate_python(dict(document))


class AuditEvent(_Model):
    """``sessions/{sid}/audit/{id}``: one thing a person (or a machine) did to a session.

    Written by the api after the action succeeded, never for a refused one.
    """

    action: str = Field(
        description="cancel, cancel_agent, resume, chat, score, investigate or feedback"
    )
    actor: str = Field(description="the verified e-mail of who did it")
    role: str = Field(description="the role they held")
    target: str | None = Field(default=None, description="the execution it named, if any")
    detail: str = Field(
        default="", description="what they asked (a chat) or said (feedback), shortened"
    )
    at: datetime = Field(default_factory=utcnow)


# ─── interaction records ──────────────────────────────────────────────────────


class FailedProvider(_Model):
    """A provider a call fell back from, and why."""

    provider: str
    model: str
    error: ErrorInfo
    attempts: int = 1


class CodeExecution(_Model):
    """Code the model ran in the provider's sandbox (Gemini's code_execution), and its result."""

    code: str = ""
    outcome: str = ""
    output: str = ""


class LLMInteraction(_Model):
    """``executions/{eid}/llm_interactions/{step}``: the full record of one LLM call.

    A step's own call is ``{step:04d}``; each call that summarized one of its
    large tool results is ``{step:04d}-summary-{n:02d}``, with ``kind``
    ``tool_summary`` and the ``tool_call_id`` of the call whose result it condensed.
    """

    step: int
    model: str
    provider: str
    request: dict[str, Any]
    kind: Literal["iteration", "tool_summary"] = "iteration"
    tool_call_id: str | None = None
    response_text: str = ""
    thinking_text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    code_executions: list[CodeExecution] = Field(default_factory=list)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost: Money = 0
    duration_ms: float = 0.0
    attempts: int = 1
    # Why the reply ended, in the vendor's words (STOP, length, max_tokens, SAFETY, ...).
    finish_reason: str | None = None
    # The call's failure, or why its reply was not used (cut at the token limit, blocked).
    error: ErrorInfo | None = None
    # The configured provider that answered (or failed last), and those that failed
    # before it when the call fell back (their errors stay here, never in the prompt).
    provider_name: str = ""
    failed_providers: list[FailedProvider] = Field(default_factory=list)
    # Provider notes: grounding metadata, suppressed native tools, ...
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The record is made as the call begins: this is when the call started.
    created_at: datetime = Field(default_factory=utcnow)


class MCPInteraction(_Model):
    """``executions/{eid}/mcp_interactions/{step-n}``: one tool call, in full."""

    step: int
    call_id: str
    server: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    is_error: bool = False
    error: str | None = None
    duration_ms: float = 0.0
    # What the model was shown when that differs from ``result``: "summarized" or "truncated".
    shown_as: Literal["full", "summarized", "truncated"] = "full"
    masked: dict[str, int] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)


# ─── Pub/Sub ──────────────────────────────────────────────────────────────────

# The kinds the engine publishes: a session's start (stage 0), a later stage's
# start (``stage``), one iteration (``step``) of one execution, and an execution's
# gather phase (its first step, before the first model call: tarsy.evidence).
StepKind = Literal["start_session", "start_stage", "iterate", "gather"]


class StepMessage(_Model):
    """The payload of every message on the steps topic.

    A message carries enough to be re-run alone: everything else is read from
    Firestore by its ids. ``step`` is an execution's step number (``iterate``);
    ``stage`` is a stage index (``start_stage``); each is 0 where it means nothing.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: str = Field(min_length=1)
    execution_id: str = ""
    step: int = Field(default=0, ge=0)
    stage: int = Field(default=0, ge=0)
    kind: StepKind

    @property
    def runs_step(self) -> bool:
        """Whether this message runs a step of an execution (``iterate`` or ``gather``)."""
        return self.kind in ("iterate", "gather")

    def dedup_key(self) -> str:
        """Return a key that is equal for duplicates of one logical message."""
        return f"{self.session_id}/{self.execution_id}/{self.kind}/{self.stage}/{self.step}"


# ─── alert fingerprints ───────────────────────────────────────────────────────


class AlertFingerprint(_Model):
    """``alert_fingerprints/{dedup_key}``: the session one alert occurrence started.

    Created in the same batch as that session, with ``create()``: the batch of
    every other delivery of the same occurrence fails, so concurrent deliveries
    start one session between them. A later firing of the same fingerprint
    replaces the document once the session it names has ended and the source's
    dedup window has passed. ``resolve_key`` is what a resolution looks the
    session up by (see ``tarsy.intake.sources.normalized``).
    """

    source: str
    fingerprint: str = Field(description="the sender's identity of this occurrence")
    alert_key: str = Field(description="the sender's identity across firing and resolution")
    resolve_key: str
    session_id: str
    created_at: datetime = Field(default_factory=utcnow)
    # For a Firestore TTL policy: the session's deadline plus the dedup window, past
    # which the claim cannot stop a repeat any more (unless the session was resumed).
    expire_at: datetime

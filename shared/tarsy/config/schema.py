"""The configuration schema.

Resolution order for one agent execution (seed 003): system defaults → agent
definition → chain → stage → stage-agent, the most specific level winning.
TARSy's own top-level keys (``agents``, ``agent_chains``, ``llm_providers``,
``mcp_servers``, ``defaults``) are accepted as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AliasChoices, ConfigDict, Field, model_validator

from tarsy._pydantic import DeferredModel
from tarsy.config.routing import AlertRoute, route_errors
from tarsy.errors import ConfigError, FailureKind
from tarsy.evidence.catalog import (
    Collector,
    EvidenceChoice,
    EvidenceSelection,
    EvidenceSettings,
    selection_of,
)
from tarsy.intake.sources.config import AlertSourcesConfig
from tarsy.intake.sources.normalized import SOURCE_NAMES
from tarsy.models import ChainRouting
from tarsy.tools.masking import MaskingConfig

NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_\-]*$"

IterationStrategy = Literal[
    "single-call",
    "react",
    "native-thinking",
    "synthesis",
    "synthesis-native-thinking",
    "chat",
    "native-tools",
    "schema-actions",
]
# The client library of the Google types (google, vertexai): google-genai or LangChain.
Backend = Literal["google-native", "langchain"]
# Who serves the model (TARSy's provider types, plus any OpenAI-compatible server).
ProviderType = Literal["google", "vertexai", "openai", "anthropic", "xai", "openai-compatible"]
GOOGLE_TYPES: tuple[ProviderType, ...] = ("google", "vertexai")
# A type's own strategy for tool-using agents (else the system default): a self-hosted
# model calls tools through schema-constrained replies, not native tool calls.
TOOL_STRATEGY_OF_TYPE: dict[ProviderType, IterationStrategy] = {
    "openai-compatible": "schema-actions"
}
NativeTool = Literal["google_search", "code_execution", "url_context"]
# At max_iterations: one more call without tools for the final answer, or pause for a resume.
OnMaxIterations = Literal["conclude", "pause"]
# How a call may use the tools it is offered (seed 001 R6): the model decides ("auto"),
# must call one ("required"), must not ("none", returned calls are never run), or must
# call the one named function (canonical ``server.tool``).
TOOL_CHOICE_PATTERN = r"^(auto|required|none|[\w\-]+\.[\w\-]+)$"
ToolChoice = Annotated[str, Field(pattern=TOOL_CHOICE_PATTERN)]
# Same tool, same arguments, this many times in one execution: a loop (0 turns it off).
DEFAULT_LOOP_THRESHOLD = 3


class _Strict(DeferredModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryPolicy(_Strict):
    """Transport retries of one LLM provider (see ``tarsy.llm.retry`` for who retries what)."""

    max_retries: int = Field(default=3, ge=0, le=10)
    initial_delay: float = Field(default=1.0, ge=0, description="first backoff (s)")
    max_delay: float = Field(default=30.0, ge=0, description="longest backoff or Retry-After")
    empty_response_delay: float = Field(default=3.0, ge=0, description="wait after an empty reply")
    timeout: float = Field(default=300.0, gt=0, description="one call's deadline (s)")


class SecretRef(_Strict):
    """A value kept out of the config file: an environment variable or a Secret Manager secret.

    ``secret`` is ``projects/P/secrets/S/versions/V`` or just ``S`` (the function's
    project, latest version).
    """

    env: str | None = None
    secret: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.env is None) == (self.secret is None):
            raise ValueError("give exactly one of 'env' or 'secret'")
        return self


# An outage or overload, after the transport retries: another provider may answer.
FALLBACK_ON: tuple[FailureKind, ...] = ("rate_limit", "server", "timeout", "connection", "empty")


class LLMProviderConfig(_Strict):
    """One named LLM provider: who serves which model, with which credentials and settings.

    ``type`` picks the backend (:mod:`tarsy.llm.backends`); the settings below
    the common ones belong to some types only, and configuration load refuses a
    setting its type does not take. A config without ``type`` is a Google one
    (the shape before provider types: ``backend`` alone), so existing files load.
    """

    type: ProviderType = "google"
    model: str = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    # Credentials of this provider alone (TARSy's ``api_key_env: NAME`` is accepted);
    # unset, a Google type uses the process settings (GEMINI_API_KEY, else Vertex AI in
    # TARSY_VERTEX_PROJECT / TARSY_VERTEX_LOCATION) and the others their vendor's
    # variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, XAI_API_KEY; none for a compatible server).
    api_key: SecretRef | None = Field(
        default=None, description="API key (an env var or a Secret Manager secret)"
    )
    base_url: str | None = Field(
        default=None,
        description="this provider's endpoint: a proxy, or a self-hosted server's /v1 URL",
    )
    # Providers tried in order, forward only, when a call still fails after the
    # transport retries with one of ``fallback_on`` (TARSy ADR-0003/0027/0030).
    fallback: list[str] = Field(default_factory=list)
    fallback_on: list[FailureKind] = Field(
        default_factory=lambda: list(FALLBACK_ON),
        description="failure kinds that move a call to the next fallback provider",
    )
    # ── google, vertexai ──
    backend: Backend = Field(
        default="langchain", description="client library of a Google type (google, vertexai)"
    )
    native_tools: list[NativeTool] = Field(default_factory=list)
    thinking: bool = Field(default=True, description="ask for thoughts (google-native)")
    thinking_budget: int | None = Field(
        default=None, ge=0, description="override the model family's thinking budget"
    )
    thinking_level: Literal["LOW", "HIGH"] | None = Field(
        default=None, description="override the Gemini 3 thinking level"
    )
    vertex_project: str | None = Field(default=None, min_length=1)
    vertex_location: str | None = Field(default=None, min_length=1)
    # ── openai, xai, openai-compatible ──
    organization: str | None = Field(default=None, description="OpenAI organization id")
    # What a self-hosted server's model can do, when it differs from the type's
    # assumption (tool calling and structured output on, context window unknown).
    tool_calling: bool | None = None
    structured_output: bool | None = None
    context_window: int | None = Field(default=None, gt=0)
    # The served model's profile, when its name does not say (tarsy.llm.backends.open_weights):
    # a small model takes the compact path; its reading speed sizes that path's opening.
    small: bool | None = None
    prompt_tokens_per_second: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _tarsy_shape(cls, data: Any) -> Any:
        """Accept TARSy's ``api_key_env: NAME``, and configs written before provider types.

        Without ``type``, a Claude model is Claude on Vertex AI (``vertexai``) and
        anything else is ``google``, which is what such a config meant.
        """
        if isinstance(data, dict) and "type" not in data:
            model = str(data.get("model") or "").removeprefix("models/")
            data = {**data, "type": "vertexai" if model.startswith("claude-") else "google"}
        if isinstance(data, dict) and "api_key_env" in data:
            data = dict(data)
            if "api_key" in data:
                raise ValueError("give either 'api_key' or 'api_key_env', not both")
            data["api_key"] = {"env": data.pop("api_key_env")}
        return data

    @model_validator(mode="after")
    def _one_endpoint(self) -> LLMProviderConfig:
        if self.api_key is not None and (self.vertex_project or self.vertex_location):
            raise ValueError(
                "give api_key (Gemini API) or vertex_project/vertex_location (Vertex AI), not both"
            )
        return self

    @property
    def is_google(self) -> bool:
        """Whether a Google type (Gemini API or Vertex AI) serves this provider."""
        return self.type in GOOGLE_TYPES


# Where a model name's part ends: a price keyed by a prefix applies to names that go on
# from here (``gemini-2.5-flash`` → ``gemini-2.5-flash-001``, ``claude-sonnet-4-5@2025…``).
_NAME_BOUNDARIES = ("-", "@")


def _names_family(prefix: str, model: str) -> bool:
    """Whether the pricing key ``prefix`` is ``model`` or a whole-part prefix of it."""
    if model == prefix:
        return True
    if not model.startswith(prefix):
        return False
    return prefix.endswith(_NAME_BOUNDARIES) or model[len(prefix)] in _NAME_BOUNDARIES


class ModelPrice(_Strict):
    """USD per million tokens; thinking tokens are billed as output."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class MCPRetryPolicy(_Strict):
    """Retries of one MCP server's connections and calls on transient failures.

    Transient: the server cannot be reached (connection refused or reset), it
    answers 5xx, 408 or 429 (a Cloud Run service starting or overloaded), or a
    call or connection times out. A tool that answers with an error is not
    retried: that is an observation for the model. Attempts share the step's
    budget, and no retry starts that could not finish inside it.
    """

    max_attempts: int = Field(default=3, ge=1, le=10, description="attempts in all, the first too")
    initial_delay: float = Field(default=0.5, ge=0, description="first backoff (s)")
    max_delay: float = Field(default=5.0, ge=0, description="longest backoff (s)")


# How the executor authenticates to an http MCP server besides ``headers``:
# "google-id-token" sends a Google-signed ID token for ``audience`` (a Cloud Run service
# that only lets its invokers in), minted from the function's own identity (the
# metadata server on Google Cloud, GOOGLE_APPLICATION_CREDENTIALS elsewhere).
MCPAuth = Literal["none", "google-id-token"]


class MCPServerConfig(_Strict):
    """One MCP server the agents may use (TARSy's ``mcp_servers`` entries load as they are)."""

    transport: Literal["http", "stdio"] = "http"
    # A literal URL, or one the deployment supplies ({env: NAME}).
    url: str | SecretRef | None = Field(default=None, description="streamable HTTP endpoint (http)")
    headers: dict[str, str | SecretRef] = Field(default_factory=dict)
    auth: MCPAuth = "none"
    audience: str | None = Field(
        default=None,
        min_length=1,
        description="ID token audience (google-id-token); default: the URL's scheme and host",
    )
    retry: MCPRetryPolicy = Field(default_factory=MCPRetryPolicy)
    command: str | None = Field(default=None, description="program to run (stdio)")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str | SecretRef] = Field(default_factory=dict)
    enabled: bool = True
    description: str = ""
    connect_timeout: float = Field(default=10.0, gt=0)
    call_timeout: float = Field(default=60.0, gt=0)
    tool_list_ttl: float = Field(default=300.0, ge=0, description="seconds a tool list is reused")
    keep_warm: bool = Field(
        default=True,
        description=(
            "keep one connection per step process across steps; off for a server whose "
            "cached state must not outlive a step (one whose cluster is swapped under it)"
        ),
    )
    # Results larger than this many tokens (about 4 characters each) are summarized into
    # at most ``summary_max_tokens`` (TARSy's defaults: 5,000 → 1,000), or cut to
    # ``max_result_tokens`` when summarizing is off or fails. TARSy's
    # ``summarization: {enabled, size_threshold_tokens, summary_max_token_limit}`` is accepted.
    max_result_tokens: int = Field(default=5000, gt=0)
    summary_max_tokens: int = Field(default=1000, gt=0)
    summarize_large_results: bool = True
    # What is masked in this server's results before the model or Firestore sees them
    # (TARSy's ``data_masking`` key is accepted).
    masking: MaskingConfig = Field(
        default_factory=MaskingConfig, validation_alias=AliasChoices("masking", "data_masking")
    )

    @model_validator(mode="before")
    @classmethod
    def _tarsy_shape(cls, data: Any) -> Any:
        """Accept TARSy's ``transport: {type: stdio, ...}`` and ``summarization: {...}``."""
        if isinstance(data, dict) and isinstance(data.get("summarization"), dict):
            data = dict(data)
            summarization = dict(data.pop("summarization"))
            for theirs, ours in (
                ("enabled", "summarize_large_results"),
                ("size_threshold_tokens", "max_result_tokens"),
                ("summary_max_token_limit", "summary_max_tokens"),
            ):
                if theirs in summarization:
                    data.setdefault(ours, summarization.pop(theirs))
            if summarization:
                raise ValueError(f"unknown summarization keys: {sorted(summarization)}")
        if isinstance(data, dict) and isinstance(data.get("transport"), dict):
            data = dict(data)
            transport = dict(data.pop("transport"))
            kind = transport.pop("type", "http")
            data["transport"] = "http" if kind in ("http", "streamable-http", "sse") else kind
            for key, value in transport.items():
                data.setdefault(key, value)
        return data

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerConfig:
        if self.transport == "http" and not self.url:
            raise ValueError("an http MCP server needs 'url'")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs 'command'")
        if self.auth != "none" and self.transport != "http":
            raise ValueError(f"auth {self.auth!r} is for http MCP servers")
        return self


class Defaults(_Strict):
    """System-wide defaults, the lowest level of the hierarchy."""

    llm_provider: str = "default"
    iteration_strategy: IterationStrategy = "single-call"
    max_iterations: int = Field(default=20, ge=1, le=200)
    on_max_iterations: OnMaxIterations = "conclude"
    loop_detection_threshold: int = Field(default=DEFAULT_LOOP_THRESHOLD, ge=0)
    # A session still running this long after it was accepted is timed out by the sweeper.
    session_timeout_seconds: float = Field(default=1800.0, gt=0)
    # A session's spend past which its running executions make their conclusion call.
    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    # Sub-agents (seed 004): how deep conversations may nest (1: a sub-agent messages
    # no one), how many one turn may message at once, and how long a parent waits for
    # an answer before it gets an error observation instead.
    max_sub_agent_depth: int = Field(default=1, ge=1, le=3)
    max_concurrent_sub_agents: int = Field(default=5, ge=1, le=20)
    sub_agent_timeout_seconds: float = Field(default=300.0, gt=0)


class CompactPathSettings(_Strict):
    """The compact path's budgets (the ``compact_path`` section; merged by key like defaults).

    A small model on a CPU reads a prompt at tens of tokens a second and writes
    at about ten (``docs/models.md``): the opening it reads and the answer it
    writes are both bounded here (:mod:`tarsy.agent.compact`).
    """

    # The opening is what the model reads in this time at its declared reading speed.
    read_seconds: float = Field(default=60.0, gt=0, le=3600)
    # The brief's size when the model's reading speed is unknown (and at most, always,
    # the ``evidence.brief_tokens`` budget).
    brief_tokens: int = Field(default=1500, ge=100)
    # The conclusion call's output limit: a short fixed structure, not a report (the
    # evidence part quotes a few findings word for word).
    output_tokens: int = Field(default=600, ge=64, le=8192)
    # Tool calls the follow-up may make when the model says the evidence is not enough.
    follow_up_calls: int = Field(default=3, ge=0, le=20)


class AgentDefinition(_Strict):
    """A named agent: what it is told and what it may use."""

    description: str = ""
    instructions: str = ""
    custom_instructions: str = ""
    iteration_strategy: IterationStrategy | None = None
    llm_provider: str | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=200)
    on_max_iterations: OnMaxIterations | None = None
    mcp_servers: list[str] = Field(default_factory=list)
    # The tool_choice of this agent's calls (a conclusion call always uses "none").
    tool_choice: ToolChoice = "auto"
    loop_detection_threshold: int | None = Field(default=None, ge=0)
    # Agents this one may message with the ``message_agent`` tool (seed 004).
    sub_agents: list[str] = Field(default_factory=list)
    # The gather phase before the first model call (tarsy.evidence): "on" (every collector
    # that applies), "off", or {collectors: [...], disable: [...]}. Unset: the chain's, else on.
    evidence: EvidenceChoice | None = None
    # The compact path (tarsy.agent.compact): true or false; unset, a small model takes it.
    compact_path: bool | None = None


class StageAgentConfig(_Strict):
    """An agent as placed in one stage, with per-placement overrides."""

    name: str = Field(pattern=NAME_PATTERN)
    iteration_strategy: IterationStrategy | None = None
    llm_provider: str | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=200)
    on_max_iterations: OnMaxIterations | None = None
    mcp_servers: list[str] | None = None
    evidence: EvidenceChoice | None = None
    compact_path: bool | None = None


class SynthesisConfig(_Strict):
    """The agent that merges a parallel stage's results."""

    agent: str = Field(default="synthesizer", pattern=NAME_PATTERN)
    iteration_strategy: Literal["synthesis", "synthesis-native-thinking"] = "synthesis"
    llm_provider: str | None = None


class StageConfig(_Strict):
    """One stage of a chain. ``agent: name`` is shorthand for one stage agent.

    Several agents (or one agent with ``replicas: N``) run in parallel and need
    ``parallel: true``; a synthesis agent then merges their results.
    ``success_policy`` says whether the stage goes on when some agents failed.
    """

    name: str = Field(min_length=1)
    agents: list[StageAgentConfig] = Field(min_length=1)
    parallel: bool = False
    replicas: int = Field(default=1, ge=1, le=10)
    success_policy: Literal["all", "any"] = "all"
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    max_iterations: int | None = Field(default=None, ge=1, le=200)

    @model_validator(mode="after")
    def _parallel_declared(self) -> StageConfig:
        if self.replicas > 1 and len(self.agents) > 1:
            raise ValueError("'replicas' repeats a single agent; list one agent with it")
        if (len(self.agents) > 1 or self.replicas > 1) and not self.parallel:
            raise ValueError(
                "a stage with several agents runs them in parallel: set parallel: true"
            )
        return self

    @property
    def placed_agents(self) -> list[StageAgentConfig]:
        """The stage's agents with replicas expanded."""
        return self.agents * self.replicas

    @property
    def is_parallel(self) -> bool:
        """Whether more than one execution runs in this stage."""
        return len(self.placed_agents) > 1

    @model_validator(mode="before")
    @classmethod
    def _agent_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and "agent" in data:
            data = dict(data)
            if "agents" in data:
                raise ValueError("give either 'agent' or 'agents', not both")
            data["agents"] = [{"name": data.pop("agent")}]
        return data


class ChainConfig(_Strict):
    """An agent chain: the stages that investigate the alert types it matches."""

    alert_types: list[str] = Field(default_factory=list)
    description: str = ""
    stages: list[StageConfig] = Field(min_length=1)
    llm_provider: str | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=200)
    session_timeout_seconds: float | None = Field(default=None, gt=0)
    # The session's token and cost budget (else the defaults'; none unless set).
    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    # After the last stage: a single-call summary of the final analysis for people.
    executive_summary: bool = True
    # The gather phase for this chain's agents, unless an agent or stage agent says otherwise.
    evidence: EvidenceChoice | None = None
    summary_agent: str = Field(default="executive-summarizer", pattern=NAME_PATTERN)
    # An LLM judge scores every finished session of the chain (fail-open).
    scoring: bool = False
    scoring_agent: str = Field(default="session-judge", pattern=NAME_PATTERN)
    # Answers follow-up questions on a finished session (POST /sessions/{id}/chat).
    chat_agent: str = Field(default="chat-assistant", pattern=NAME_PATTERN)
    # The runbook of alerts that bring none, fetched when a session starts (tarsy.tools.runbooks).
    runbook_url: str | None = Field(
        default=None, pattern=r"^https?://\S+$", description="default runbook URL (http/https)"
    )
    # Where this chain's sessions are announced in Slack, instead of TARSY_SLACK_CHANNEL.
    slack_channel: str | None = Field(
        default=None, min_length=1, description="Slack channel id for this chain's notifications"
    )


class ResolvedAgentConfig(_Strict):
    """Everything one execution needs from configuration, hierarchy applied."""

    agent: str
    instructions: str
    custom_instructions: str
    iteration_strategy: IterationStrategy
    provider_name: str
    provider: LLMProviderConfig
    max_iterations: int
    on_max_iterations: OnMaxIterations = "conclude"
    mcp_servers: list[str]
    # Per server, the only tools offered (the alert's selection); a server not named
    # here offers every tool it lists.
    mcp_tools: dict[str, list[str]] = Field(default_factory=dict)
    tool_choice: ToolChoice = "auto"
    loop_detection_threshold: int = DEFAULT_LOOP_THRESHOLD
    # The session's budget (its chain's, else the defaults'); None: unlimited.
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    # Whom ``message_agent`` reaches, and its limits (see Defaults).
    sub_agents: list[str] = Field(default_factory=list)
    max_sub_agent_depth: int = 1
    max_concurrent_sub_agents: int = 5
    sub_agent_timeout_seconds: float = 300.0
    # The collectors this agent's gather phase may run; None: no gather phase.
    evidence: EvidenceSelection | None = None
    # The compact path's budgets when this agent takes it (tarsy.agent.compact); None: it
    # keeps its tools from the first call.
    compact: CompactPathSettings | None = None


class SessionBudget(_Strict):
    """A chain's session budget, the defaults' where the chain sets none."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None


DEFAULT_CHAIN = "default"


class SlackConfig(_Strict):
    """Questions asked in a session's Slack thread (:mod:`tarsy.intake.slack_events`).

    Policy only: the bot token, channel and signing secret are settings (secrets).
    """

    # "mentions": only a reply that mentions the bot is a question; "all": every human reply.
    thread_questions: Literal["mentions", "all"] = "mentions"
    # What one person's thread questions may cost per UTC day, in US dollars; None: no limit.
    daily_chat_budget_usd: float | None = Field(default=None, gt=0)


class TarsyConfig(_Strict):
    """The whole configuration, validated with cross-references checked."""

    defaults: Defaults = Field(default_factory=Defaults)
    llm_providers: dict[str, LLMProviderConfig] = Field(default_factory=dict)
    agents: dict[str, AgentDefinition] = Field(default_factory=dict)
    agent_chains: dict[str, ChainConfig] = Field(default_factory=dict)
    mcp_servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    # Masking of alert data at ingest, before it is stored or shown to a model.
    alert_masking: MaskingConfig = Field(default_factory=MaskingConfig)
    # Keyed by model name; the longest key that prefixes a model's name applies.
    pricing: dict[str, ModelPrice] = Field(default_factory=dict)
    # A hosted model with no price: reported at load ("warn") or refused ("refuse").
    unpriced_models: Literal["warn", "refuse"] = "warn"
    # Native alert sources (POST /alerts/{source}): alert type, dedup window, trust.
    alert_sources: AlertSourcesConfig = Field(default_factory=AlertSourcesConfig)
    # Label rules choosing the chain of an alert no chain claims by type (tarsy.config.routing).
    alert_routes: list[AlertRoute] = Field(default_factory=list)
    # Evidence first (tarsy.evidence): the collectors by name, and the gather phase's budgets.
    collectors: dict[str, Collector] = Field(default_factory=dict)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    # The compact path of small models (tarsy.agent.compact): its budgets.
    compact_path: CompactPathSettings = Field(default_factory=CompactPathSettings)
    # Questions in a session's Slack thread: which replies are questions, a daily budget.
    slack: SlackConfig = Field(default_factory=SlackConfig)

    def price_for(self, model: str) -> ModelPrice | None:
        """The price of ``model``: exact name, else the longest prefix ending at a boundary.

        A prefix names a family only where a name part ends (``-``, or ``@`` before a
        Vertex AI version): ``gpt-5`` prices ``gpt-5-2025-08-07`` but not ``gpt-5.2``,
        a different model at a different price.
        """
        matches = [name for name in self.pricing if _names_family(name, model)]
        return self.pricing[max(matches, key=len)] if matches else None

    def reference_errors(self) -> list[tuple[str, str]]:
        """Return ``(location, message)`` for every reference to something undefined."""
        problems = self._provider_problems() + self._server_id_problems()
        problems += self._agent_problems()
        problems.extend(
            (f"agents.{cycle[0]}.sub_agents", "circular sub-agent dependency: " + " → ".join(cycle))
            for cycle in sub_agent_cycles({n: a.sub_agents for n, a in self.agents.items()})
        )
        if DEFAULT_CHAIN not in self.agent_chains:
            problems.append(("agent_chains", f"the {DEFAULT_CHAIN!r} chain is required"))
        problems.extend(route_errors(self.alert_routes, self.agent_chains))
        for name in SOURCE_NAMES:
            source_chain = self.alert_sources.for_source(name).chain
            if source_chain is not None and source_chain not in self.agent_chains:
                problems.append((f"alert_sources.{name}.chain", f"unknown chain {source_chain!r}"))
        problems += self._collector_problems()
        claimed: dict[str, str] = {}
        for chain_id, chain in self.agent_chains.items():
            problems += self._chain_problems(chain_id, chain, claimed)
        return problems

    def _collector_problems(self) -> list[tuple[str, str]]:
        """Collectors naming an unknown server or target source; selections naming no collector."""
        from tarsy.evidence.targets import source_named

        problems: list[tuple[str, str]] = []
        for name, collector in self.collectors.items():
            if not re.fullmatch(r"[a-z][a-z0-9\-]*", name):
                problems.append((f"collectors.{name}", "collector names use a-z, 0-9 and '-'"))
            if collector.server not in self.mcp_servers:
                problems.append(
                    (f"collectors.{name}.server", f"unknown MCP server {collector.server!r}")
                )
            if source_named(collector.for_each) is None:
                problems.append(
                    (f"collectors.{name}.for_each", f"unknown target source {collector.for_each!r}")
                )
        choices: list[tuple[str, EvidenceChoice | None]] = [
            (f"agents.{n}.evidence", a.evidence) for n, a in self.agents.items()
        ]
        choices += [
            (f"agent_chains.{n}.evidence", c.evidence) for n, c in self.agent_chains.items()
        ]
        for where, choice in choices:
            if not isinstance(choice, EvidenceSelection):
                continue
            for name in [*(choice.collectors or []), *choice.disable]:
                if name not in self.collectors:
                    problems.append((where, f"unknown collector {name!r}"))
        return problems

    def _unknown_provider(self, location: str, name: str | None) -> list[tuple[str, str]]:
        if name is not None and name not in self.llm_providers:
            return [(location, f"unknown LLM provider {name!r}")]
        return []

    def _unknown_servers(self, location: str, names: list[str] | None) -> list[tuple[str, str]]:
        return [
            (f"{location}.{n}", f"unknown MCP server {name!r}")
            for n, name in enumerate(names or [])
            if name not in self.mcp_servers
        ]

    def _unknown_agent(self, location: str, name: str) -> list[tuple[str, str]]:
        return [] if name in self.agents else [(location, f"unknown agent {name!r}")]

    def _provider_problems(self) -> list[tuple[str, str]]:
        problems = self._unknown_provider("defaults.llm_provider", self.defaults.llm_provider)
        for name, provider in self.llm_providers.items():
            for n, fallback in enumerate(provider.fallback):
                where = f"llm_providers.{name}.fallback.{n}"
                problems += self._unknown_provider(where, fallback)
                if fallback == name:
                    problems.append((where, "a provider cannot fall back on itself"))
        return problems

    def _server_id_problems(self) -> list[tuple[str, str]]:
        # Gemini function names are server__tool: an id with "__" or a trailing "_"
        # could not be told apart from its tool names on the way back.
        return [
            (
                f"mcp_servers.{name}",
                "server ids may use letters, digits, _ and - (no '__', no trailing '_')",
            )
            for name in self.mcp_servers
            if not re.fullmatch(r"[\w\-]+", name) or "__" in name or name.endswith("_")
        ]

    def _agent_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        for name, agent in self.agents.items():
            problems += self._unknown_provider(f"agents.{name}.llm_provider", agent.llm_provider)
            problems += self._unknown_servers(f"agents.{name}.mcp_servers", agent.mcp_servers)
            for n, sub_agent in enumerate(agent.sub_agents):
                problems += self._unknown_agent(f"agents.{name}.sub_agents.{n}", sub_agent)
            forced_server = agent.tool_choice.split(".", 1)[0]
            if "." in agent.tool_choice and forced_server not in agent.mcp_servers:
                problems.append(
                    (
                        f"agents.{name}.tool_choice",
                        f"{agent.tool_choice!r} is not a tool of this agent's MCP servers",
                    )
                )
        return problems

    def _chain_problems(
        self, chain_id: str, chain: ChainConfig, claimed: dict[str, str]
    ) -> list[tuple[str, str]]:
        """One chain's references; ``claimed`` (alert type → chain) grows as chains are read."""
        where = f"agent_chains.{chain_id}"
        problems: list[tuple[str, str]] = []
        routed = any(r.enabled and r.chain == chain_id for r in self.alert_routes) or any(
            self.alert_sources.for_source(name).chain == chain_id for name in SOURCE_NAMES
        )
        if not chain.alert_types and chain_id != DEFAULT_CHAIN and not routed:
            problems.append(
                (f"{where}.alert_types", "the chain matches no alert type and no alert_routes rule")
            )
        for alert_type in chain.alert_types:
            if alert_type in claimed:
                problems.append(
                    (
                        f"{where}.alert_types",
                        f"alert type {alert_type!r} is already handled by chain "
                        f"{claimed[alert_type]!r}",
                    )
                )
            claimed.setdefault(alert_type, chain_id)
        problems += self._unknown_provider(f"{where}.llm_provider", chain.llm_provider)
        problems += self._unknown_agent(f"{where}.chat_agent", chain.chat_agent)
        if chain.scoring:
            problems += self._unknown_agent(f"{where}.scoring_agent", chain.scoring_agent)
        if chain.executive_summary:
            problems += self._unknown_agent(f"{where}.summary_agent", chain.summary_agent)
        stage_names = [stage.name for stage in chain.stages]
        for duplicate in sorted({n for n in stage_names if stage_names.count(n) > 1}):
            problems.append((f"{where}.stages", f"duplicate stage name {duplicate!r}"))
        for n, stage in enumerate(chain.stages):
            problems += self._stage_problems(f"{where}.stages.{n}", stage)
        return problems

    def _stage_problems(self, where: str, stage: StageConfig) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if stage.is_parallel:
            problems += self._unknown_agent(f"{where}.synthesis.agent", stage.synthesis.agent)
            problems += self._unknown_provider(
                f"{where}.synthesis.llm_provider", stage.synthesis.llm_provider
            )
        for a, stage_agent in enumerate(stage.agents):
            at = f"{where}.agents.{a}"
            problems += self._unknown_agent(f"{at}.name", stage_agent.name)
            problems += self._unknown_provider(f"{at}.llm_provider", stage_agent.llm_provider)
            problems += self._unknown_servers(f"{at}.mcp_servers", stage_agent.mcp_servers)
        return problems

    def chain(self, chain_id: str) -> ChainConfig:
        """The chain ``chain_id``; a ConfigError when this configuration no longer has it.

        A session names its chain at ingest; a redeployed configuration may have
        dropped it since, which no retry can fix.
        """
        try:
            return self.agent_chains[chain_id]
        except KeyError:
            raise ConfigError(f"chain {chain_id!r} is not in the configuration") from None

    def session_timeout(self, chain_id: str) -> float:
        """Seconds a session of this chain may run before it is timed out."""
        chain_timeout = self.chain(chain_id).session_timeout_seconds
        return chain_timeout or self.defaults.session_timeout_seconds

    def session_budget(self, chain_id: str) -> SessionBudget:
        """The token and cost budget of a session of this chain."""
        chain = self.chain(chain_id)
        return SessionBudget(
            max_tokens=_maybe(chain.max_tokens, self.defaults.max_tokens),
            max_cost_usd=_maybe(chain.max_cost_usd, self.defaults.max_cost_usd),
        )

    def chain_for(self, alert_type: str, labels: Mapping[str, str] | None = None) -> str:
        """Return the id of the chain that handles the alert (see :meth:`route`)."""
        return self.route(alert_type, labels)[0]

    def route(
        self,
        alert_type: str,
        labels: Mapping[str, str] | None = None,
        *,
        fields: Mapping[str, str] | None = None,
        source: str | None = None,
    ) -> tuple[str, ChainRouting]:
        """The chain of an alert and why (the order is ``tarsy.config.routing``'s).

        Args:
            alert_type: The alert's type.
            labels: The alert's labels (``tarsy.config.routing.alert_labels``), if any.
            fields: Its data's top-level text fields (``tarsy.config.routing.alert_fields``).
            source: The native source it came through (``alertmanager``...), if any.

        Returns:
            The chain id and the routing to record on the session.
        """
        for chain_id, chain in self.agent_chains.items():
            if alert_type in chain.alert_types:
                reason = f"chain {chain_id!r} lists alert type {alert_type!r}"
                return chain_id, ChainRouting(by="alert_type", reason=reason)
        if source in SOURCE_NAMES:
            source_chain = self.alert_sources.for_source(source).chain
            if source_chain is not None:
                reason = f"alert_sources.{source}.chain names {source_chain!r} for {source} alerts"
                return source_chain, ChainRouting(by="source", reason=reason)
        for rule in self.alert_routes:
            why = rule.explain(labels or {}, fields)
            if why is not None and rule.chain is not None:
                return rule.chain, ChainRouting(by="rule", rule=rule.name, reason=why)
        unclaimed = [f"no chain lists alert type {alert_type!r}"]
        if source in SOURCE_NAMES:
            unclaimed.append(f"alert_sources.{source} names no chain")
        reason = (
            ", ".join(unclaimed)
            + " and no alert_routes rule matched: the default chain (no tools) serves it"
        )
        return DEFAULT_CHAIN, ChainRouting(by="default", reason=reason)

    def resolve(self, chain_id: str, stage_index: int, agent_index: int) -> ResolvedAgentConfig:
        """Apply the hierarchy for one stage agent of one chain."""
        chain = self.chain(chain_id)
        stage = chain.stages[stage_index]
        placed = stage.placed_agents[agent_index]
        definition = self.agents[placed.name]
        provider_name = _first(
            placed.llm_provider,
            chain.llm_provider,
            definition.llm_provider,
            self.defaults.llm_provider,
        )
        return ResolvedAgentConfig(
            agent=placed.name,
            instructions=definition.instructions,
            custom_instructions=definition.custom_instructions,
            iteration_strategy=_first(
                placed.iteration_strategy,
                definition.iteration_strategy,
                self._default_strategy(
                    provider_name,
                    placed.mcp_servers
                    if placed.mcp_servers is not None
                    else definition.mcp_servers,
                ),
            ),
            provider_name=provider_name,
            provider=self.llm_providers[provider_name],
            max_iterations=_first(
                placed.max_iterations,
                stage.max_iterations,
                chain.max_iterations,
                definition.max_iterations,
                self.defaults.max_iterations,
            ),
            on_max_iterations=_first(
                placed.on_max_iterations,
                definition.on_max_iterations,
                self.defaults.on_max_iterations,
            ),
            mcp_servers=list(
                placed.mcp_servers if placed.mcp_servers is not None else definition.mcp_servers
            ),
            tool_choice=definition.tool_choice,
            loop_detection_threshold=self._loop_threshold(definition),
            max_tokens=_maybe(chain.max_tokens, self.defaults.max_tokens),
            max_cost_usd=_maybe(chain.max_cost_usd, self.defaults.max_cost_usd),
            evidence=selection_of(
                _first(placed.evidence, chain.evidence, definition.evidence, "on")
            ),
            compact=self._compact(
                self.llm_providers[provider_name], placed.compact_path, definition.compact_path
            ),
            **self._sub_agent_limits(definition),
        )

    def _compact(
        self, provider: LLMProviderConfig, *choices: bool | None
    ) -> CompactPathSettings | None:
        """The compact path's budgets if the agent takes it: as it says, else if it is small."""
        # Imported here: the backends import this module.
        from tarsy.llm.backends import capabilities_of

        takes = next((c for c in choices if c is not None), None)
        if takes is None:
            takes = capabilities_of(provider).small
        return self.compact_path if takes else None

    def _sub_agent_limits(self, definition: AgentDefinition) -> dict[str, Any]:
        return {
            "sub_agents": list(definition.sub_agents),
            "max_sub_agent_depth": self.defaults.max_sub_agent_depth,
            "max_concurrent_sub_agents": self.defaults.max_concurrent_sub_agents,
            "sub_agent_timeout_seconds": self.defaults.sub_agent_timeout_seconds,
        }

    def resolve_sub_agent(self, chain_id: str, name: str) -> ResolvedAgentConfig:
        """The configuration of agent ``name`` answering another agent's messages.

        A sub-agent is not placed in a stage: its definition, then the chain's
        and the defaults' levels apply.
        """
        chain = self.chain(chain_id)
        definition = self.agents.get(name)
        if definition is None:
            raise ConfigError(f"sub-agent {name!r} is not in the configuration")
        provider_name = _first(
            definition.llm_provider, chain.llm_provider, self.defaults.llm_provider
        )
        return ResolvedAgentConfig(
            agent=name,
            instructions=definition.instructions,
            custom_instructions=definition.custom_instructions,
            iteration_strategy=_first(
                definition.iteration_strategy,
                self._default_strategy(provider_name, definition.mcp_servers),
            ),
            provider_name=provider_name,
            provider=self.llm_providers[provider_name],
            max_iterations=_first(definition.max_iterations, self.defaults.max_iterations),
            on_max_iterations="conclude",  # a parent waits for it: it must answer
            mcp_servers=list(definition.mcp_servers),
            tool_choice=definition.tool_choice,
            loop_detection_threshold=self._loop_threshold(definition),
            max_tokens=_maybe(chain.max_tokens, self.defaults.max_tokens),
            max_cost_usd=_maybe(chain.max_cost_usd, self.defaults.max_cost_usd),
            **self._sub_agent_limits(definition),
        )

    def _default_strategy(self, provider_name: str, mcp_servers: list[str]) -> IterationStrategy:
        """The system default, or the provider type's own for a tool-using agent.

        A self-hosted model (``openai-compatible``) calls tools through
        schema-constrained replies unless the agent says otherwise.
        """
        provider = self.llm_providers.get(provider_name)
        if mcp_servers and provider is not None and provider.type in TOOL_STRATEGY_OF_TYPE:
            return TOOL_STRATEGY_OF_TYPE[provider.type]
        return self.defaults.iteration_strategy

    def _loop_threshold(self, definition: AgentDefinition) -> int:
        return _first(definition.loop_detection_threshold, self.defaults.loop_detection_threshold)

    def resolve_role(
        self,
        chain_id: str,
        stage_index: int | None,
        role: Literal["synthesis", "summary", "chat", "scoring"],
    ) -> ResolvedAgentConfig:
        """The configuration of a synthesis, summary or chat agent of a chain."""
        chain = self.chain(chain_id)
        strategy: IterationStrategy
        if role == "chat":
            definition = self.agents[chain.chat_agent]
            # The chat may use every tool the chain's agents used.
            servers = sorted(
                {
                    server
                    for index, stage in enumerate(chain.stages)
                    for n in range(len(stage.placed_agents))
                    for server in self.resolve(chain_id, index, n).mcp_servers
                }
            )
            provider_name = _first(definition.llm_provider, self.defaults.llm_provider)
            return ResolvedAgentConfig(
                agent=chain.chat_agent,
                instructions=definition.instructions,
                custom_instructions=definition.custom_instructions,
                iteration_strategy="chat",
                provider_name=provider_name,
                provider=self.llm_providers[provider_name],
                max_iterations=definition.max_iterations or self.defaults.max_iterations,
                on_max_iterations="conclude",
                mcp_servers=servers,
                tool_choice=definition.tool_choice,
                loop_detection_threshold=self._loop_threshold(definition),
            )
        if role == "synthesis":
            assert stage_index is not None
            synthesis = chain.stages[stage_index].synthesis
            name, strategy, provider_override = (
                synthesis.agent,
                synthesis.iteration_strategy,
                synthesis.llm_provider,
            )
        elif role == "scoring":
            name, strategy, provider_override = chain.scoring_agent, "single-call", None
        else:
            name, strategy, provider_override = chain.summary_agent, "single-call", None
        definition = self.agents[name]
        provider_name = _first(
            provider_override, chain.llm_provider, definition.llm_provider,
            self.defaults.llm_provider,
        )  # fmt: skip
        return ResolvedAgentConfig(
            agent=name,
            instructions=definition.instructions,
            custom_instructions=definition.custom_instructions,
            iteration_strategy=strategy,
            provider_name=provider_name,
            provider=self.llm_providers[provider_name],
            max_iterations=1,
            mcp_servers=[],
        )


def sub_agent_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every cycle of ``sub_agents`` references, each once, as ``[a, b, ..., a]`` (pure).

    A cycle would let two agents message each other without end (seed 004's
    ``test_zap_detects_circular_sub_agent_dependency``). Names not in ``graph``
    are reported elsewhere as unknown.
    """
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def visit(name: str, path: list[str]) -> None:
        for nxt in graph.get(name, []):
            if nxt in path:
                cycle = [*path[path.index(nxt) :], nxt]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    cycles.append(cycle)
            elif nxt in graph:
                visit(nxt, [*path, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return cycles


T = TypeVar("T")


def _maybe(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def _first(*values: T | None) -> T:
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value at any level of the hierarchy")

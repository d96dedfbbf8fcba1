"""The provider interface: one request model, one streamed chunk union, capability flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import ConfigDict, Field, field_validator

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig, ToolChoice
from tarsy.llm.tool_names import is_canonical
from tarsy.models import ConversationMessage, TokenUsage, ToolCall


class ToolDefinition(DeferredModel):
    """A tool offered to the model. ``name`` is canonical ``server.tool`` (or a built-in's)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @field_validator("name")
    @classmethod
    def _canonical(cls, name: str) -> str:
        if not is_canonical(name):
            raise ValueError(f"tool name {name!r} is not of the form 'server.tool'")
        return name


class GenerateRequest(DeferredModel):
    """Everything one LLM call needs; providers keep no conversation state."""

    execution_id: str
    messages: list[ConversationMessage]
    config: LLMProviderConfig
    tools: list[ToolDefinition] = Field(default_factory=list)
    thought_signatures: dict[str, str] = Field(
        default_factory=dict,
        description="Opaque signatures from earlier turns, keyed by the provider.",
    )
    # How the model may use ``tools`` (seed 001 R6): "auto", "required", "none" or one
    # canonical ``server.tool``; None leaves the provider's default (auto). Without
    # tools there is nothing to configure and providers send no function-calling config.
    tool_choice: ToolChoice | None = None
    # A JSON schema every reply must match (structured output: ``response_format`` on
    # OpenAI-style APIs, ``response_json_schema`` on Gemini); None: free text.
    response_schema: dict[str, Any] | None = None


class Capabilities(DeferredModel):
    """What a model can do on its backend (seed 002's ``Supports``), checked before use.

    The flags are what strategies may require; ``context_window`` and
    ``max_output_tokens`` (tokens, None: unknown) are the model's limits: the
    window fits requests, and a provider asking for more output than the model
    writes is refused at configuration load.

    ``small`` and ``prompt_tokens_per_second`` are the model's profile, which
    picks its path (:mod:`tarsy.agent.compact`): a small model (8B parameters
    or fewer) follows evidence but cannot plan a search, so it takes the
    compact path by default; the reading speed (None: unknown, a hosted model
    reads fast) sizes the compact path's opening.
    """

    model_config = ConfigDict(frozen=True)

    streaming: bool = True
    thinking: bool = False
    function_calling: bool = False
    native_tools: bool = False
    code_execution: bool = False
    structured_output: bool = False
    context_window: int | None = None
    max_output_tokens: int | None = None
    small: bool = False
    prompt_tokens_per_second: float | None = None


# Why a reply ended, the same on every backend: a natural stop, tool calls, the output
# token limit, a safety or content filter, or something else the vendor reported.
FinishReason = Literal["stop", "tool_calls", "length", "blocked", "other"]
_FINISH_REASONS: dict[str, FinishReason] = {
    # OpenAI, xAI and compatible servers
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "blocked",
    # Anthropic
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "blocked",
    # Gemini (FinishReason and BlockedReason enum names)
    "finish_reason_unspecified": "other",
    "safety": "blocked",
    "recitation": "blocked",
    "blocklist": "blocked",
    "prohibited_content": "blocked",
    "spii": "blocked",
    "image_safety": "blocked",
    "language": "blocked",
    "malformed_function_call": "other",
}


def finish_reason(raw: str | None) -> FinishReason | None:
    """The product's finish reason for a vendor's (None when the vendor said nothing)."""
    if not raw:
        return None
    key = raw.rsplit(".", 1)[-1].lower()
    return _FINISH_REASONS.get(key, "other")


# ─── streamed chunks ──────────────────────────────────────────────────────────


class TextChunk(DeferredModel):
    """A piece of the model's answer text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingChunk(DeferredModel):
    """A piece of the model's native reasoning."""

    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallChunk(DeferredModel):
    """A complete tool call (arguments are never streamed piecewise)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str


class CodeExecutionChunk(DeferredModel):
    """Code the model ran in the provider's sandbox, and its result."""

    type: Literal["code_execution"] = "code_execution"
    code: str = ""
    outcome: str = ""
    output: str = ""


class UsageChunk(DeferredModel):
    """Token usage of the call."""

    type: Literal["usage"] = "usage"
    usage: TokenUsage


class FinalChunk(DeferredModel):
    """The last chunk of an attempt: provider state to persist, and provider notes."""

    type: Literal["final"] = "final"
    provider_state: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Why the reply ended (normalized), and the vendor's own word for it.
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None


Chunk = Annotated[
    TextChunk | ThinkingChunk | ToolCallChunk | CodeExecutionChunk | UsageChunk | FinalChunk,
    Field(discriminator="type"),
]


# Called as a call streams with the current attempt's chunks so far (a retried
# attempt starts again from none), so a watcher can see thinking and text grow.
Progress = Callable[[Sequence["Chunk"]], Awaitable[None]]
# A ``time.monotonic()`` deadline shared by every attempt of a call (the step's budget).
Budget = float | None


class LLMProvider(Protocol):
    """A backend: one async call that streams to ``progress`` and returns the whole answer.

    ``generate`` raises :class:`~tarsy.errors.LLMError` once the transport
    retries are spent; implementations get it from :class:`StreamingProvider`.
    """

    name: str

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        """Answer ``request``; ``budget`` is a ``time.monotonic()`` deadline for all attempts."""
        ...


# ─── collecting a stream ──────────────────────────────────────────────────────


class LLMResult(DeferredModel):
    """A whole response, assembled from its chunks."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    code_executions: list[CodeExecutionChunk] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    attempts: int = 1
    provider_state: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None

    @property
    def cut_short(self) -> bool:
        """Whether the reply was cut at the token limit or blocked: not a whole answer."""
        return self.finish_reason in ("length", "blocked")


def assemble(chunks: Sequence[Chunk], attempts: int = 1) -> LLMResult:
    """Assemble one attempt's chunks into an LLMResult."""
    result = LLMResult(attempts=attempts)
    text: list[str] = []
    thinking: list[str] = []
    for chunk in chunks:
        match chunk:
            case TextChunk():
                text.append(chunk.text)
            case ThinkingChunk():
                thinking.append(chunk.text)
            case ToolCallChunk():
                result.tool_calls.append(
                    ToolCall(id=chunk.call_id, name=chunk.name, arguments=chunk.arguments)
                )
            case CodeExecutionChunk():
                last = result.code_executions[-1] if result.code_executions else None
                if last is not None and not chunk.code and last.code and not last.outcome:
                    # Gemini sends the code and its result as two parts: one record.
                    result.code_executions[-1] = last.model_copy(
                        update={"outcome": chunk.outcome, "output": chunk.output}
                    )
                else:
                    result.code_executions.append(chunk)
            case UsageChunk():
                result.usage = chunk.usage
            case FinalChunk():
                result.provider_state = chunk.provider_state
                result.metadata = chunk.metadata
                result.finish_reason = chunk.finish_reason
                result.raw_finish_reason = chunk.raw_finish_reason
    result.text, result.thinking = "".join(text), "".join(thinking)
    return result


def has_content(chunks: Sequence[Chunk]) -> bool:
    """Whether an attempt produced an answer (text, a tool call or code execution)."""
    return any(isinstance(c, TextChunk | ToolCallChunk | CodeExecutionChunk) for c in chunks)

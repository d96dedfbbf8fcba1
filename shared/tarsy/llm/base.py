"""The provider interface: one request model, one streamed chunk union, capability flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tarsy.config.schema import LLMProviderConfig, ToolChoice
from tarsy.llm.tool_names import is_canonical
from tarsy.models import ConversationMessage, TokenUsage, ToolCall


class ToolDefinition(BaseModel):
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


class GenerateRequest(BaseModel):
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


class Capabilities(BaseModel):
    """What a provider can do, checked by strategies before they rely on it."""

    model_config = ConfigDict(frozen=True)

    streaming: bool = True
    thinking: bool = False
    function_calling: bool = False
    native_tools: bool = False
    code_execution: bool = False


# ─── streamed chunks ──────────────────────────────────────────────────────────


class TextChunk(BaseModel):
    """A piece of the model's answer text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingChunk(BaseModel):
    """A piece of the model's native reasoning."""

    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallChunk(BaseModel):
    """A complete tool call (arguments are never streamed piecewise)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str


class CodeExecutionChunk(BaseModel):
    """Code the model ran in the provider's sandbox, and its result."""

    type: Literal["code_execution"] = "code_execution"
    code: str = ""
    outcome: str = ""
    output: str = ""


class UsageChunk(BaseModel):
    """Token usage of the call."""

    type: Literal["usage"] = "usage"
    usage: TokenUsage


class FinalChunk(BaseModel):
    """The last chunk of an attempt: provider state to persist, and provider notes."""

    type: Literal["final"] = "final"
    provider_state: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


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
    capabilities: Capabilities

    async def generate(
        self, request: GenerateRequest, progress: Progress | None = None, *, budget: Budget = None
    ) -> LLMResult:
        """Answer ``request``; ``budget`` is a ``time.monotonic()`` deadline for all attempts."""
        ...


# ─── collecting a stream ──────────────────────────────────────────────────────


class LLMResult(BaseModel):
    """A whole response, assembled from its chunks."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    code_executions: list[CodeExecutionChunk] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    attempts: int = 1
    provider_state: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


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
    result.text, result.thinking = "".join(text), "".join(thinking)
    return result


def has_content(chunks: Sequence[Chunk]) -> bool:
    """Whether an attempt produced an answer (text, a tool call or code execution)."""
    return any(isinstance(c, TextChunk | ToolCallChunk | CodeExecutionChunk) for c in chunks)

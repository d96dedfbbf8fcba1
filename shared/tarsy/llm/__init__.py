"""LLM providers behind one streaming interface (seed 000, seed 003 GenerateRequest/Response)."""

from tarsy.llm.base import (
    Capabilities,
    Chunk,
    CodeExecutionChunk,
    ErrorChunk,
    FinalChunk,
    GenerateRequest,
    LLMProvider,
    LLMResult,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolDefinition,
    UsageChunk,
    collect,
)
from tarsy.llm.registry import get_provider

__all__ = [
    "Capabilities",
    "Chunk",
    "CodeExecutionChunk",
    "ErrorChunk",
    "FinalChunk",
    "GenerateRequest",
    "LLMProvider",
    "LLMResult",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "ToolDefinition",
    "UsageChunk",
    "collect",
    "get_provider",
]

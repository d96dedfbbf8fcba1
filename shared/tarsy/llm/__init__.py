"""LLM providers behind one streaming interface (seed 000, seed 003 GenerateRequest/Response)."""

from tarsy.llm.base import (
    Capabilities,
    Chunk,
    CodeExecutionChunk,
    FinalChunk,
    GenerateRequest,
    LLMProvider,
    LLMResult,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolDefinition,
    UsageChunk,
    assemble,
)
from tarsy.llm.provider import StreamingProvider
from tarsy.llm.registry import get_provider

__all__ = [
    "Capabilities",
    "Chunk",
    "CodeExecutionChunk",
    "FinalChunk",
    "GenerateRequest",
    "LLMProvider",
    "LLMResult",
    "StreamingProvider",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "ToolDefinition",
    "UsageChunk",
    "assemble",
    "get_provider",
]

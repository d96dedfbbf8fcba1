"""What each backend can do, known without importing its SDK (used at config load)."""

from __future__ import annotations

from tarsy.llm.base import Capabilities

BACKEND_CAPABILITIES: dict[str, Capabilities] = {
    "google-native": Capabilities(
        streaming=True, thinking=True, function_calling=True, native_tools=True, code_execution=True
    ),
    "langchain": Capabilities(streaming=True, function_calling=True),
}

"""Fitting a conversation into the model's context window.

Design constraint: a long investigation must never fail because its own
history outgrew the model (a self-hosted 32k model fills up after a dozen tool
results; the server then refuses the call with a 400 and the session fails).
The stored conversation is never changed: only the request is fitted, by
replacing the content of the oldest tool results with a short note, oldest
first, until the estimate fits. No message is dropped, so every vendor's
pairing of tool calls and tool results still holds; the system prompt, the
alert (the first user message) and the latest exchange are never touched.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from tarsy._pydantic import DeferredModel
from tarsy.models import ConversationMessage
from tarsy.tools.base import estimate_tokens

# The estimate counts about four characters a token; YAML and JSON tokenize denser than
# prose, so only this share of the window is filled by estimate.
SAFE_SHARE = 0.8
# Reserved for the reply when the provider sets no max_output_tokens.
DEFAULT_REPLY_TOKENS = 2048
# The latest messages are the model's working memory: never elided.
KEEP_LATEST = 2
# A text strategy's observation starts with a line naming the call; it is kept if short.
MAX_HEADER_CHARS = 300
ELIDED = (
    "[This earlier tool result ({tokens} tokens) was removed to fit the model's context "
    "window; what it showed is in your later reasoning. Call the tool again if you need it.]"
)


class Fitted(DeferredModel):
    """The messages to send and how many tool results were elided to fit."""

    messages: list[ConversationMessage]
    elided: int = 0


def conversation_tokens(messages: Sequence[ConversationMessage]) -> int:
    """The estimated size of ``messages`` (content and tool-call arguments)."""
    return sum(
        estimate_tokens(m.content) + sum(estimate_tokens(c.arguments) for c in m.tool_calls)
        for m in messages
    )


def is_tool_result(message: ConversationMessage, index: int) -> bool:
    """A tool's output: a ``tool`` message, or a text strategy's observation (a later user turn)."""
    return message.role == "tool" or (message.role == "user" and index > 1)


def fit_to_window(
    messages: Sequence[ConversationMessage], window: int | None, reply_tokens: int | None
) -> Fitted:
    """``messages`` with the oldest tool results elided until they fit ``window`` (tokens).

    Args:
        messages: The conversation as the strategy built it (system, alert, turns).
        window: The model's context window; None (unknown) fits everything.
        reply_tokens: Room kept for the reply (the provider's ``max_output_tokens``).
    """
    budget = (
        None
        if window is None
        else int(window * SAFE_SHARE) - (reply_tokens or DEFAULT_REPLY_TOKENS)
    )
    fitted = list(messages)
    if budget is None or conversation_tokens(fitted) <= budget:
        return Fitted(messages=fitted)
    total = conversation_tokens(fitted)
    elided = 0
    for index in range(len(fitted) - KEEP_LATEST):
        message = fitted[index]
        if not is_tool_result(message, index):
            continue
        size = estimate_tokens(message.content)
        note = ELIDED.format(tokens=size)
        head, _, _ = message.content.partition("\n")
        if message.role == "user" and len(head) <= MAX_HEADER_CHARS:
            note = f"{head}\n{note}"  # "Observation from <tool> <arguments>:" stays
        if size <= estimate_tokens(note):
            continue
        fitted[index] = message.model_copy(update={"content": note})
        total -= size - estimate_tokens(note)
        elided += 1
        if total <= budget:
            break
    return Fitted(messages=fitted, elided=elided)

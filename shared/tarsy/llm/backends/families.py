"""What each model family can do: one table per backend, looked up by the model's name.

Design constraint: a capability is a fact about a model, not about a vendor.
``gemma-3`` on the Gemini API has no thinking, native tools or code execution
although ``gemini-2.5-flash`` on the same API has all three, so each backend
keeps a table of its families (a model-name prefix, the longest matching one
wins) with the limits its vendor's model pages state, and a model of no listed
family gets the table's conservative fallback. A server the user runs
(``openai-compatible``) has no table: what its model can do is declared in the
configuration.

The figures were read from the vendors' model pages on 2026-11-27 (through
the docs search of this project's tooling): ai.google.dev/gemini-api/docs/models,
platform.claude.com/docs/en/models/overview, developers.openai.com/api/docs/models,
docs.x.ai/developers/models. ``max_output_tokens`` is None where the page
states none.
"""

from __future__ import annotations

from dataclasses import dataclass

from tarsy.llm.base import Capabilities


@dataclass(frozen=True)
class Family:
    """Models whose name starts with ``prefix``, and what they can do."""

    prefix: str
    capabilities: Capabilities


def lookup(model: str, families: tuple[Family, ...], fallback: Capabilities) -> Capabilities:
    """The capabilities of the longest family prefix of ``model`` (``fallback`` when none)."""
    name = model.removeprefix("models/")
    matches = [f for f in families if name.startswith(f.prefix)]
    if not matches:
        return fallback
    return max(matches, key=lambda f: len(f.prefix)).capabilities


# ─── Gemini API and Vertex AI (google-native: everything the model offers) ────

_GEMINI_FULL = Capabilities(
    thinking=True,
    function_calling=True,
    native_tools=True,
    code_execution=True,
    structured_output=True,
    context_window=1_048_576,
    max_output_tokens=65_536,
)

GOOGLE_FAMILIES: tuple[Family, ...] = (
    # 2.0: thinking only as an experiment, 8,192 output tokens.
    Family(
        "gemini-2.0-flash",
        Capabilities(
            function_calling=True,
            native_tools=True,
            code_execution=True,
            structured_output=True,
            context_window=1_048_576,
            max_output_tokens=8_192,
        ),
    ),
    Family("gemini-2.5-", _GEMINI_FULL),
    Family("gemini-3", _GEMINI_FULL),
    # Gemma (open weights served by the Gemini API): text in and out, no thinking,
    # no native tools, no code execution, no function-calling config; ReAct works.
    Family("gemma-", Capabilities()),
)
# A Gemini name newer than the table (gemini-4-…): the family's abilities so far.
GEMINI_FALLBACK = _GEMINI_FULL
# A tuned model or a deployed endpoint: only what every Gemini serving path takes.
GOOGLE_UNKNOWN = Capabilities(function_calling=True)

# ─── Claude (Anthropic's API, and Vertex AI's Model Garden) ───────────────────

_CLAUDE_200K = Capabilities(function_calling=True, context_window=200_000)
CLAUDE_FAMILIES: tuple[Family, ...] = (
    Family(
        "claude-haiku-4-5",
        Capabilities(function_calling=True, context_window=200_000, max_output_tokens=64_000),
    ),
    Family("claude-sonnet-4", _CLAUDE_200K),
    Family("claude-opus-4", _CLAUDE_200K),
    # The fifth generation: 1M tokens of context, 128K of output.
    Family(
        "claude-sonnet-5",
        Capabilities(function_calling=True, context_window=1_000_000, max_output_tokens=128_000),
    ),
)
CLAUDE_FALLBACK = _CLAUDE_200K

# ─── OpenAI (chat completions: reasoning text is not exposed) ─────────────────

OPENAI_FAMILIES: tuple[Family, ...] = (
    Family("gpt-4.1", Capabilities(function_calling=True, structured_output=True,
                                   context_window=1_047_576)),
    Family("gpt-4o", Capabilities(function_calling=True, structured_output=True,
                                  context_window=128_000)),
    Family("gpt-5", Capabilities(function_calling=True, structured_output=True,
                                 context_window=400_000, max_output_tokens=128_000)),
    Family("o1", Capabilities(function_calling=True, structured_output=True,
                              context_window=200_000)),
    Family("o3", Capabilities(function_calling=True, structured_output=True,
                              context_window=200_000)),
    Family("o4", Capabilities(function_calling=True, structured_output=True,
                              context_window=200_000)),
)  # fmt: skip
OPENAI_FALLBACK = Capabilities(
    function_calling=True, structured_output=True, context_window=128_000
)

# ─── xAI (Grok on an OpenAI-compatible API) ───────────────────────────────────

XAI_FAMILIES: tuple[Family, ...] = (
    Family("grok-3", Capabilities(function_calling=True, structured_output=True,
                                  context_window=131_072)),
    Family("grok-4", Capabilities(function_calling=True, structured_output=True,
                                  context_window=256_000)),
    Family("grok-4.20", Capabilities(function_calling=True, structured_output=True,
                                     context_window=1_000_000)),
)  # fmt: skip
XAI_FALLBACK = Capabilities(function_calling=True, structured_output=True, context_window=131_072)

"""The open-weights families teams run themselves, and the profile read off a model's name.

Design constraint: a self-hosted server (vLLM, Ollama, llama.cpp, a LiteLLM
proxy) names its model however its operator likes (``Qwen/Qwen2.5-7B-Instruct``,
``qwen2.5:7b``, ``qwen2.5-coder-1.5b-instruct-q4_k_m``), so families are
recognised by a pattern anywhere in the lower-cased name, not by a prefix, and
the parameter count is read from the name (``1.5b``, ``7B``, ``30b-a3b``: the
first count, the whole model). What the configuration declares always wins
over what is read here (:mod:`tarsy.llm.backends.openai_compatible`).

A model of :data:`SMALL_PARAMETERS` billion parameters or fewer is *small*:
it follows evidence faithfully but does not plan a search (the field's
figures: Cloud-OpsBench's 8B model answered 27% of cases without a tool call;
HolmesGPT publishes no figure at or below 8B), so it takes the compact path
(:mod:`tarsy.agent.compact`). The context windows are the models' native
ones, read from the families' model cards on 2026-12-07 (Qwen 2.5 and 3:
32,768 native, longer only with YaRN scaling; Llama 3.1-3.3: 131,072; Llama 3:
8,192; Gemma 3: 131,072, its 1B 32,768; Gemma 2: 8,192; Mistral 7B and Small:
32,768; Mistral Nemo: 131,072; Phi-3 mini: 4,096 (its 128k variants say so in
their names); Phi-4: 16,384, Phi-4-mini: 131,072).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# At or below this many billion parameters a model is small (it follows, it does not plan).
SMALL_PARAMETERS = 8.0
_PARAMETERS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*b(?![a-z])")
_LONG_CONTEXT = re.compile(r"(?<!\d)128k(?![a-z0-9])")


@dataclass(frozen=True)
class OpenWeightsFamily:
    """Models whose lower-cased name matches ``pattern``, and what they are."""

    name: str
    pattern: re.Pattern[str]
    context_window: int
    # The size of the family's usual model, for names that state none (``mistral``).
    default_parameters: float


def _family(name: str, pattern: str, window: int, parameters: float) -> OpenWeightsFamily:
    return OpenWeightsFamily(name, re.compile(pattern), window, parameters)


# Most specific first: the first family whose pattern matches is the model's.
FAMILIES: tuple[OpenWeightsFamily, ...] = (
    _family("qwen3", r"qwen[-_ ]?3", 32_768, 8),
    _family("qwen2.5", r"qwen[-_ ]?2\.5", 32_768, 7),
    _family("llama3.x", r"llama[-_ ]?3\.[1-9]", 131_072, 8),
    _family("llama3", r"llama[-_ ]?3", 8_192, 8),
    _family("gemma3-1b", r"gemma[-_ ]?3[-_:]1b", 32_768, 1),
    _family("gemma3", r"gemma[-_ ]?3", 131_072, 4),
    _family("gemma2", r"gemma[-_ ]?2", 8_192, 9),
    _family("mistral-nemo", r"mistral[-_ ]?nemo", 131_072, 12),
    _family("mistral-small", r"mistral[-_ ]?small", 32_768, 24),
    _family("mistral", r"mistral", 32_768, 7),
    _family("phi4-mini", r"phi[-_ ]?4[-_:]mini", 131_072, 3.8),
    _family("phi4", r"phi[-_ ]?4", 16_384, 14),
    _family("phi3", r"phi[-_ ]?3", 4_096, 3.8),
)  # fmt: skip


@dataclass(frozen=True)
class OpenWeightsProfile:
    """What a served model's name says: its family, size, window and whether it is small."""

    family: str
    parameters: float
    context_window: int

    @property
    def small(self) -> bool:
        """Whether the model follows evidence rather than planning a search."""
        return self.parameters <= SMALL_PARAMETERS


def parameters_in(name: str) -> float | None:
    """The parameter count (billions) a model's name states, if it states one."""
    match = _PARAMETERS.search(name.lower())
    return float(match.group(1)) if match else None


def profile_of(model: str) -> OpenWeightsProfile | None:
    """The profile of a served model's name (None: no known open-weights family)."""
    name = model.lower().rsplit("/", 1)[-1]
    for family in FAMILIES:
        if family.pattern.search(name):
            window = family.context_window
            if _LONG_CONTEXT.search(name):
                window = max(window, 131_072)
            size = parameters_in(name)
            return OpenWeightsProfile(
                family=family.name,
                parameters=size if size is not None else family.default_parameters,
                context_window=window,
            )
    return None

"""The ``openai-compatible`` type: any server speaking OpenAI chat completions.

vLLM, Ollama, llama.cpp's ``llama-server``, a LiteLLM proxy. Design constraint:
the server is the user's, so nothing about its model is assumed from the name
(every name is accepted) and what the model can do is said in the config
(``tool_calling``, ``structured_output``, ``context_window``, ``small``,
``prompt_tokens_per_second``). Where the config is silent, the name of an
open-weights family a team runs itself (Qwen, Llama, Gemma, Mistral, Phi:
:mod:`tarsy.llm.backends.open_weights`) gives the window and whether the model
is small; a name of no known family is taken for a capable model. The API key is
optional. Small self-hosted models call tools reliably only through replies
constrained by a JSON schema, so a tool-using agent that names no strategy of
its own gets ``schema-actions``. A self-hosted model has no per-token price.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from tarsy._pydantic import DeferredModel
from tarsy.config.schema import LLMProviderConfig, ProviderType
from tarsy.llm.backends.base import Backend
from tarsy.llm.backends.open_weights import profile_of
from tarsy.llm.base import Capabilities, LLMProvider
from tarsy.settings import Settings


class CompatibleSettings(DeferredModel):
    """What the served model can do, when it differs from the type's assumptions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_calling: bool | None = None
    structured_output: bool | None = None
    context_window: int | None = Field(default=None, gt=0)
    small: bool | None = None
    prompt_tokens_per_second: float | None = Field(default=None, gt=0)


class OpenAICompatibleBackend(Backend):
    """A self-hosted or proxied OpenAI-compatible server (``base_url`` required)."""

    type: ClassVar[ProviderType] = "openai-compatible"
    settings_model = CompatibleSettings
    telemetry_name = "openai_compatible"
    self_hosted = True

    def capabilities(self, config: LLMProviderConfig) -> Capabilities:
        """Tool calling and structured output unless the config says the model lacks them.

        The window and the profile (small, reading speed): the config's, else
        what the model's name says of its open-weights family.
        """
        profile = profile_of(config.model)
        window = config.context_window
        if window is None and profile is not None:
            window = profile.context_window
        small = config.small
        if small is None:
            small = profile is not None and profile.small
        return Capabilities(
            function_calling=config.tool_calling is not False,
            structured_output=config.structured_output is not False,
            context_window=window,
            small=small,
            prompt_tokens_per_second=config.prompt_tokens_per_second,
        )

    def model_problem(self, model: str) -> str | None:
        """Every name: the server decides what it serves."""
        return None

    def config_problems(self, config: LLMProviderConfig) -> list[tuple[str, str]]:
        """Also: the server's URL is required."""
        problems = super().config_problems(config)
        if not config.base_url:
            problems.append(
                ("base_url", "an openai-compatible provider needs the server's URL (…/v1)")
            )
        return problems

    def create(self, config: LLMProviderConfig, settings: Settings) -> LLMProvider:
        """The OpenAI chat-completions adapter at the server's URL."""
        from tarsy.llm.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(self, settings)


OPENAI_COMPATIBLE = OpenAICompatibleBackend()

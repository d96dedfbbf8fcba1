"""The models an evaluation runs: the two scripted ones, or a real Gemini model.

``standin`` follows each scenario's playbook and must pass every scenario;
``sloppy`` calls irrelevant tools and concludes wrongly and must fail every
one. Together they test the harness and the scorer, not a model: whatever they
score is known in advance. ``local`` is the real open-weights model of
``make local-model`` (llama.cpp on this machine). Any other name is a Gemini
model (``gemini-2.5-pro``) reached with the credentials of the environment
(``GEMINI_API_KEY`` or Vertex AI).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from tarsy.settings import Settings
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeReply, Responder
from tarsy_dev.fakes.sloppy import SloppyModel
from tarsy_dev.fakes.standin import ScenarioStandIn

STANDIN = "standin"
SLOPPY = "sloppy"
SCRIPTED_NAMES = (STANDIN, SLOPPY)
LOCAL = "local"

HARNESS_NOTE = (
    "The scripted models (standin, sloppy) follow written scripts: their results measure the "
    "evaluation harness (the pipeline, the demo cluster, the scorer), not a language model. "
    "The stand-in must pass every scenario and the sloppy model fail every one. Their token "
    "counts are estimated from the text sizes (4 characters a token) and their cost is what "
    "those tokens would cost at the configured model's price."
)


class ModelUnderTest(BaseModel):
    """A model an evaluation runs."""

    name: str
    scripted: bool
    label: str = Field(description="How the report names it.")
    expected: Literal["pass", "fail"] | None = Field(
        default=None, description="A scripted model's known outcome on every scenario."
    )

    def responder(self, scenario: Scenario) -> Responder:
        """The fake model's answers for this scenario (scripted models only).

        Raises:
            ValueError: The model is a real one.
        """
        factory: dict[str, Callable[[Scenario], Responder]] = {
            STANDIN: ScenarioStandIn,
            SLOPPY: SloppyModel,
        }
        if self.name not in factory:
            raise ValueError(f"{self.name} is not a scripted model")
        return EstimatedTokens(factory[self.name](scenario))


def resolve_models(names: list[str], settings: Settings) -> list[ModelUnderTest]:
    """The models to run: the names given, or the default for this environment.

    With no names: the configured real model (``TARSY_DEFAULT_MODEL``) when
    credentials are set (``GEMINI_API_KEY`` or ``TARSY_VERTEX_PROJECT``), else the
    two scripted models.

    Args:
        names: From ``--model`` (repeatable), in order; duplicates are dropped.
        settings: The environment.

    Returns:
        The models, in order.

    Raises:
        ValueError: A real model was asked for without credentials.
    """
    real_credentials = settings.gemini_api_key is not None or settings.vertex_project is not None
    if not names:
        names = [settings.default_model] if real_credentials else list(SCRIPTED_NAMES)
    models: list[ModelUnderTest] = []
    for name in dict.fromkeys(names):
        if name == STANDIN:
            models.append(
                ModelUnderTest(
                    name=name, scripted=True, label="standin (scripted)", expected="pass"
                )
            )
        elif name == SLOPPY:
            models.append(
                ModelUnderTest(name=name, scripted=True, label="sloppy (scripted)", expected="fail")
            )
        elif name == LOCAL:
            models.append(ModelUnderTest(name=name, scripted=False, label="local (llama.cpp)"))
        elif not real_credentials:
            raise ValueError(
                f"model {name!r} needs GEMINI_API_KEY or TARSY_VERTEX_PROJECT; "
                f"without them only {' and '.join(SCRIPTED_NAMES)} can run"
            )
        else:
            models.append(ModelUnderTest(name=name, scripted=False, label=name))
    return models


class EstimatedTokens:
    """Wraps a scripted responder so its replies report plausible token counts.

    A scripted reply carries ``FakeReply``'s constant counts (10 in, 20 out);
    counting about 4 characters a token of the request and the reply makes the
    report's token and cost columns show how large the conversations really grow.
    """

    def __init__(self, responder: Responder) -> None:
        self.inner = responder

    def __call__(self, call: FakeCall) -> FakeReply:
        """The inner reply, with estimated token counts."""
        reply = self.inner(call)
        written = len(reply.text) + sum(
            len(json.dumps(c.args)) + len(c.name) for c in reply.tool_calls
        )
        return reply.model_copy(
            update={
                "input_tokens": max(1, len(json.dumps(call.body)) // 4),
                "output_tokens": max(1, written // 4),
                "thinking_tokens": len(reply.thinking) // 4,
            }
        )

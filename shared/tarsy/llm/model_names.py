"""Which model names a backend can serve, checked at config load without an SDK or a network.

Whether a model exists in a given project and region is only known by asking
Google, which config load cannot do. What it can catch is a name that no
backend of this product could ever serve (``gpt-4o``, ``gemini 2.5 pro``, a
Claude model on the google-native backend), so that a typo in the config or in
``TARSY_DEFAULT_MODEL`` fails ``make package`` (or a local run) instead of the
first alert.
"""

from __future__ import annotations

import re

# Gemini API ids (``gemini-2.5-flash``, ``models/gemini-2.5-pro``), tuned models,
# and Vertex AI resource names of Google models and deployed endpoints.
_GOOGLE_MODEL = re.compile(
    r"^(?:"
    r"(?:models/)?(?:gemini|gemma|learnlm)-[a-z0-9][a-z0-9.\-]*"
    r"|tunedModels/[a-z0-9][a-z0-9\-]*"
    r"|(?:projects/[^/\s]+/locations/[^/\s]+/)?publishers/google/models/[a-z0-9][a-z0-9.\-]*"
    r"|projects/[^/\s]+/locations/[^/\s]+/endpoints/[a-z0-9\-]+"
    r")$"
)

# Model Garden partner models on Vertex AI (``claude-sonnet-4@20250514``),
# served through langchain-google-vertexai only.
_PARTNER_MODEL = re.compile(r"^(?:models/)?claude-[a-z0-9][a-z0-9.@\-]*$")


def is_partner_model(model: str) -> bool:
    """Whether ``model`` is a Model Garden partner model rather than a Google model."""
    return _PARTNER_MODEL.match(model) is not None


def model_problem(backend: str, model: str) -> str | None:
    """Why ``backend`` cannot serve ``model``, or None when the name is one it serves."""
    if _GOOGLE_MODEL.match(model):
        return None
    if is_partner_model(model):
        if backend == "langchain":
            return None
        return (
            f"{model!r} is a Vertex AI partner model, which the {backend!r} backend cannot "
            "call; use backend: langchain"
        )
    served = "Gemini/Gemma ids (gemini-2.5-flash), Vertex AI model or endpoint names"
    if backend == "langchain":
        served += ", Claude on Vertex AI (claude-sonnet-4@20250514)"
    return f"{model!r} is not a model name the {backend!r} backend serves; expected {served}"

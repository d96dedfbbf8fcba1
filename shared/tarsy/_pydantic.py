"""The pydantic base of the library's models: validators built on first use (internal).

Design constraint: a function's cold start pays only for the models its path
uses. Pydantic builds a model's validator when its class is defined, unless
``defer_build`` is set; then it is built the first time the model validates,
dumps or makes a schema. Ingest never reads a timeline or writes a step's
commit, so it never builds those models. Every model of the library derives
from :class:`DeferredModel` (or sets ``defer_build`` on a base of its own).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DeferredModel(BaseModel):
    """A pydantic model whose validator and serializer are built on first use."""

    model_config = ConfigDict(defer_build=True)

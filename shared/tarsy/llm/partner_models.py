"""Which model names on Vertex AI are partner models (Claude) rather than Google's own.

Design constraint: a leaf module. Both the Google backend (capabilities, name
checks) and the LangChain provider (which chat model to build) ask it, so
neither has to import the other.
"""

from __future__ import annotations

import re

_PARTNER_MODEL = re.compile(r"^(?:models/)?claude-[a-z0-9][a-z0-9.@\-]*$")


def is_partner_model(model: str) -> bool:
    """Whether ``model`` is a Model Garden partner model rather than a Google model."""
    return _PARTNER_MODEL.match(model) is not None

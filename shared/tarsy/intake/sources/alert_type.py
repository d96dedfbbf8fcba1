"""Deriving an alert's ``alert_type`` (and so its chain) from the alert itself.

Native senders have no notion of tarsy's ``alert_type``; the deployment says
where to read it (``alert_type_from``, a dotted path into the normalized
``data``, e.g. ``labels.alertname``) or fixes it per route (``alert_type``).

Alert data is untrusted text and a label can hold anything, while an alert
type must match the rule ``POST /alerts`` enforces (it names chains and shows
up in logs and the console). So the value read is cleaned rather than
rejected — one odd label must not refuse a whole notification — and an alert
without the field gets the source's name, which no chain claims unless the
deployment wants it to: it runs the default chain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tarsy.intake.sources.config import ALERT_TYPE_MAX_LENGTH, SourceConfig

_NOT_ALLOWED = re.compile(r"[^\w.\-/: ]+")


def lookup(data: Mapping[str, Any], path: str) -> Any:
    """Return the value at a dotted ``path`` in nested mappings, or ``None``.

    Args:
        data: The normalized alert data.
        path: Dotted keys, e.g. ``labels.alertname``.

    Returns:
        The value, or ``None`` when any step is missing or not a mapping.
    """
    value: Any = data
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def clean_alert_type(value: object) -> str | None:
    """Turn a field's value into a valid alert type, if it can be one.

    Args:
        value: The value read from the alert.

    Returns:
        The value as text with disallowed characters replaced by ``_``,
        trimmed to the maximum length; ``None`` for an empty value or one
        that is not a string or number.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    text = _NOT_ALLOWED.sub("_", str(value)).strip()[:ALERT_TYPE_MAX_LENGTH].strip()
    return text if text.strip("_") else None


def derive_alert_type(data: Mapping[str, Any], config: SourceConfig) -> str:
    """Return the alert type of one alert as its source's config says.

    Args:
        data: The normalized alert data.
        config: The source's settings.

    Returns:
        ``config.alert_type`` when fixed; else the cleaned value at
        ``config.type_path``; else the source's name.
    """
    if config.alert_type is not None:
        return config.alert_type
    return clean_alert_type(lookup(data, config.type_path)) or config.source

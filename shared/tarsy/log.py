"""Logging set-up: Cloud Logging's structured JSON in the cloud, readable lines locally.

Cloud Functions forward stdout lines that are JSON objects to Cloud Logging and
read ``severity``, ``message`` and ``logging.googleapis.com/labels`` from them.
Modules log with ``logging.getLogger(__name__)`` and ``extra={"fields": {...}}``
for structured fields; payloads (alert data, prompts) stay out of logs.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from tarsy.settings import Settings

_configured = False


class CloudLoggingFormatter(logging.Formatter):
    """Format records as one JSON object per line, in Cloud Logging's shape."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a JSON line."""
        entry: dict[str, Any] = {
            "severity": record.levelname,
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
            labels = {k: str(v) for k, v in fields.items() if k.endswith("_id")}
            if labels:
                entry["logging.googleapis.com/labels"] = labels
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ConsoleFormatter(logging.Formatter):
    """Human-readable lines with structured fields appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` with its fields."""
        line = super().format(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


def configure_logging(settings: Settings) -> None:
    """Install the root handler once per process."""
    global _configured
    if _configured:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        CloudLoggingFormatter() if settings.log_format == "json" else ConsoleFormatter()
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # The SDKs log every request at INFO; keep ours readable.
    for noisy in ("httpx", "google_genai", "urllib3", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    _configured = True


def fields(**values: object) -> dict[str, dict[str, object]]:
    """Return ``extra=`` for a log call carrying structured fields."""
    return {"fields": values}

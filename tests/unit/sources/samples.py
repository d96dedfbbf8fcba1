"""Shared helpers of the alert-source tests: the sample bodies under tests/fixtures/sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sources"


def fixture_bytes(name: str) -> bytes:
    """The raw bytes of a sample body, as a sender would post them."""
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> dict[str, Any]:
    """A sample body, decoded (a fresh copy each call, safe to modify)."""
    value = json.loads(fixture_bytes(name))
    assert isinstance(value, dict)
    return value


def as_body(payload: Any) -> bytes:
    """Encode a payload as a sender would."""
    return json.dumps(payload).encode()

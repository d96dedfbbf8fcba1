"""Unit tests see a clean environment: no tarsy, Gemini or emulator settings leak in."""

from __future__ import annotations

import os

import pytest

_PREFIXES = ("TARSY_", "GEMINI_", "GOOGLE_API_KEY", "GOOGLE_CLOUD_", "GCP_PROJECT")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)

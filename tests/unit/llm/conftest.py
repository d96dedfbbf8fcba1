"""One local fake Gemini server for the provider tests of this package, reset per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tarsy_dev.fakes.fake_gemini import FakeGemini


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(fake: FakeGemini) -> None:
    fake.reset()

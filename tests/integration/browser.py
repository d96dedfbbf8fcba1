"""Debian's chromium driven by Playwright, for the tests of the api's pages.

The browser is the system one (``scripts/install_chromium.sh``, run by ``make
test``); Playwright never downloads its own. The flags keep Chromium from
reaching for Google's hosts, which a closed network refuses.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Far above what a local page needs; a failure then is a real one.
WAIT_MS = 60_000


def chromium_path() -> str:
    """The system chromium, or the test fails saying how to install it."""
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("no chromium: run scripts/install_chromium.sh (make test does)")
    return path


@contextmanager
def browser() -> Iterator[Browser]:
    """A headless Chromium for the module's tests."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Tab:
    """A page, and what went wrong in it: dialogs (an executed alert()), script errors, CSP."""

    page: Page
    problems: list[str] = field(default_factory=list)


def open_page(browser: Browser, url: str, headers: dict[str, str] | None = None) -> Tab:
    """Open a page in a new tab (``headers``: sent with every request, as a proxy adds them)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, extra_http_headers=headers)
    page.set_default_timeout(WAIT_MS)
    tab = Tab(page)

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            tab.problems.append(f"console: {message.text}")

    page.on("dialog", lambda dialog: tab.problems.append(f"dialog: {dialog.message}"))
    page.on("pageerror", lambda error: tab.problems.append(f"page error: {error}"))
    page.on("console", console)
    page.goto(url)
    return tab

"""The audit page in a real browser (Chromium), through the local sign-in proxy.

The admin (the proxy's own user) sees who did what across sessions, filters
it, and follows a row to its session; a hostile detail someone typed shows as
text; a viewer's page says the admin role is needed instead of loading.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser

from tarsy_dev.client import TarsyClient
from tarsy_dev.localstack.stack import Stack
from tests.integration.browser import WAIT_MS, Tab, browser, open_page
from tests.integration.conftest import RESPONDER, VIEWER, signed_in

WAIT_S = WAIT_MS / 1000
HOSTILE = "<img src=x onerror=\"window.pwned = 'image'\">"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as launched:
        yield launched


def audit_url(base: str) -> str:
    return f"{base.rstrip('/')}/ui/audit"


def no_problems(tab: Tab) -> None:
    assert tab.problems == []
    assert tab.page.evaluate("window.pwned === undefined")


def test_the_admin_reads_and_filters_the_audit_and_follows_a_row_to_its_session(
    stack: Stack, client: TarsyClient, chromium: Browser
) -> None:
    session_id = client.submit({"alert_type": "generic", "data": "disk 91% on db-1"}).session_id
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal
    given = httpx.post(
        f"{stack.api_url}/sessions/{session_id}/feedback",
        headers=signed_in(stack, RESPONDER),
        json={"verdict": "wrong", "root_cause": f"the disk {HOSTILE}"},
        timeout=10,
    )
    assert given.status_code == 200, given.text

    tab = open_page(chromium, audit_url(stack.signin_url))
    page = tab.page
    row = page.locator("tr.audit-entry[data-action='feedback']")
    row.wait_for()
    text = row.inner_text()
    assert RESPONDER in text and session_id in text and "onerror" in text  # as text
    assert page.locator("#audit-rows img").count() == 0

    page.select_option("#audit-action", "erase")
    page.click("#audit-filters button[type=submit]")
    page.locator("#audit-rows", has_text="no actions match").wait_for()
    assert "action=erase" in page.url

    page.select_option("#audit-action", "feedback")
    page.fill("#audit-actor", RESPONDER)
    page.click("#audit-filters button[type=submit]")
    row.wait_for()
    page.click(f"tr.audit-entry a[href='sessions/{session_id}']")
    page.wait_for_url(f"**/ui/sessions/{session_id}")
    page.locator("#session-status", has_text="completed").wait_for()
    no_problems(tab)


def test_a_viewers_audit_page_says_the_admin_role_is_needed(
    stack: Stack, chromium: Browser
) -> None:
    tab = open_page(chromium, audit_url(stack.api_url), signed_in(stack, VIEWER))
    page = tab.page
    page.locator("#message", has_text="needs the admin role").wait_for()
    assert page.locator("tr.audit-entry").count() == 0
    assert "needs the admin role" in page.inner_text("#audit-rows")
    # The refused fetch is the page's own report, not a script error.
    assert all("Failed to load resource" in p for p in tab.problems), tab.problems

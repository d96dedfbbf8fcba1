"""The api's pages in a real browser (Debian's chromium, Playwright), against the local stack.

Each test opens the page the api function serves through the local sign-in
proxy (signed in as the stack's user, as Identity-Aware Proxy signs people in
when deployed), and reads what the page shows while the step function works:
a session watched live to its end, a chat answered as it streams, a cancel,
the list filtered, and hostile text shown as text.
With ``TARSY_SCREENSHOT_DIR`` set, the list and a session page are saved there
(``docs/images`` holds the ones the README shows).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tarsy.web.links import list_url, session_url
from tarsy_dev.client import TarsyClient
from tarsy_dev.fakes.fake_gemini import (
    FakeCall,
    FakeGemini,
    FakeReply,
    FakeToolCall,
    StandInResponder,
)
from tarsy_dev.localstack.stack import Stack
from tests.integration.browser import WAIT_MS, Tab, browser, open_page
from tests.integration.conftest import VIEWER, signed_in

WAIT_S = WAIT_MS / 1000
ANSWER = "First finding. Second finding. Third finding. The conclusion."
HOSTILE_SCRIPT = "<script>window.pwned = 'script'</script>"
HOSTILE_IMAGE = "<img src=x onerror=\"window.pwned = 'image'\">"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as launched:
        yield launched


def screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("TARSY_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def finished(client: TarsyClient, alert: dict[str, Any]) -> str:
    session_id = client.submit(alert).session_id
    *_, last = client.watch(session_id, poll_interval=0.2, timeout=WAIT_S)
    assert last.status.is_terminal, last.status
    return session_id


def event_count(page: Page) -> int:
    return int(page.evaluate("document.querySelectorAll('.event-holder').length"))


def wait_finished(page: Page) -> None:
    # A function, not a bare expression: the page's policy forbids evaluating strings.
    page.wait_for_function("() => document.body.dataset.finished === 'true'", timeout=WAIT_MS)


def no_problems(tab: Tab) -> None:
    assert tab.problems == []
    assert tab.page.evaluate("window.pwned === undefined")


class Investigation:
    """troubleshooter: two tool calls, then its analysis; each call streams for ~1.5 s."""

    def __init__(self, first_text: str = "step one", final: str = "## Cause\nThe echo.") -> None:
        self.calls = 0
        self.first_text = first_text
        self.final = final

    def __call__(self, call: FakeCall) -> FakeReply:
        if "You are troubleshooter," not in call.system_text():
            reply = StandInResponder()(call)
            return reply.model_copy(update={"stream_chunks": 3, "chunk_delay": 0.5})
        self.calls += 1
        if self.calls <= 2:
            text = self.first_text if self.calls == 1 else "step two"
            return FakeReply(
                thinking=f"Checking with echo: {text}",
                tool_calls=[FakeToolCall(name="trouble__echo", args={"text": text})],
                stream_chunks=3,
                chunk_delay=0.5,
            )
        return FakeReply(text=self.final, thinking="Concluding.", stream_chunks=3, chunk_delay=0.5)


def test_a_submitted_alert_is_watched_live_to_its_end(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    fake_gemini.responder = Investigation()
    session_id = client.submit({"alert_type": "test-tools", "data": "orders p99 is 2 s"}).session_id
    tab = open_page(chromium, session_url(stack.signin_url, session_id))
    page = tab.page
    polls: list[str] = []
    page.on(
        "request", lambda request: polls.append(request.url) if "/ui/data/" in request.url else None
    )
    seen_before_end: list[int] = []
    shown = 0
    while True:
        page.wait_for_function(
            "(n) => document.querySelectorAll('.event-holder').length > n"
            " || document.body.dataset.finished === 'true'",
            arg=shown,
            timeout=WAIT_MS,
        )
        if page.evaluate("document.body.dataset.finished") == "true":
            break
        shown = event_count(page)
        seen_before_end.append(shown)
    # The timeline grew in front of the reader, poll after poll, before the session ended.
    assert len(seen_before_end) >= 2, seen_before_end
    assert page.inner_text("#session-status") == "completed"
    timeline = page.inner_text("#timeline")
    assert "step one" in timeline and "step two" in timeline and "The echo." in timeline
    assert "executive summary" in timeline
    # The tree: the stage, the agent, the summary; the result folded until opened.
    assert "troubleshooter" in page.inner_text("#tree")
    folded = page.locator(".event.mcp_tool_call details").first
    assert folded.get_attribute("open") is None
    # Every event once, whatever the polls overlapped.
    ids = page.evaluate("[...document.querySelectorAll('.event-holder')].map(e => e.id)")
    assert len(ids) == len(set(ids)) == event_count(page)
    screenshot(page, "session-page.png")
    no_problems(tab)
    # Signed in through the proxy: the page never asked for a key and says who is reading.
    assert page.locator("input[type=password]").count() == 0
    assert page.inner_text("#who") == f"signed in as {stack.user} · admin"
    assert polls and not any(stack.api_key in url for url in [*polls, page.url])
    # A finished session stops polling: nothing is asked over several poll intervals.
    polled = len(polls)
    page.wait_for_timeout(2500)
    assert len(polls) == polled


def slow_chat(call: FakeCall) -> FakeReply:
    if "chat-assistant" in call.system_text():
        return FakeReply(text=ANSWER, thinking="Reading the investigation.", stream_chunks=6,
                         chunk_delay=0.6)  # fmt: skip
    return StandInResponder()(call)


def test_a_follow_up_is_asked_and_its_answer_streams_onto_the_page(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    fake_gemini.responder = slow_chat
    session_id = finished(client, {"alert_type": "generic", "data": "error rate 31% on orders"})
    tab = open_page(chromium, session_url(stack.signin_url, session_id))
    page = tab.page
    wait_finished(page)
    page.fill("#chat-question", "Which finding matters?")
    page.click("#chat-form button[type=submit]")
    # The answer while it streams (the running call's progress), then as a committed event.
    live = page.locator(".live-call .text")
    live.wait_for(timeout=WAIT_MS)
    assert ANSWER.startswith(live.inner_text())
    answer = page.locator(".event.final_analysis", has_text="The conclusion.").last
    answer.wait_for()
    wait_finished(page)
    # The chat's reply is an answer, not the investigation's final analysis.
    assert answer.locator(".label").text_content() == "answer"
    chat = page.inner_text("#timeline")
    assert "Which finding matters?" in chat
    # Who asked is on the page.
    page.locator("#audit .audit-event", has_text=stack.user).wait_for()
    assert "chat" in page.inner_text("#audit") and "Which finding matters?" in page.inner_text(
        "#audit"
    )
    assert page.locator(".live-call").count() == 0
    no_problems(tab)


def test_a_running_session_is_cancelled_from_its_page(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    fake_gemini.responder = lambda call: FakeReply(
        text="still thinking", stream_chunks=8, chunk_delay=0.5
    )
    session_id = client.submit({"alert_type": "generic", "data": "disk 91% on db-1"}).session_id
    tab = open_page(chromium, session_url(stack.signin_url, session_id))
    page = tab.page
    page.locator("#action-cancel").wait_for(state="visible")
    page.click("#action-cancel")
    page.wait_for_function(
        "() => document.getElementById('session-status')?.textContent === 'cancelled'",
        timeout=WAIT_MS,
    )
    wait_finished(page)
    assert page.locator("#action-cancel").is_hidden()
    assert page.locator("#chat-form").is_visible()
    # The cancel is recorded with who did it, and shown.
    page.locator("#audit .audit-event[data-action='cancel']", has_text=stack.user).wait_for()
    # The list finds the sessions someone cancelled.
    other = finished(client, {"alert_type": "generic", "data": "not cancelled"})
    page.goto(list_url(stack.signin_url))
    page.locator(f"tr[data-session='{other}']").wait_for()
    page.fill("#filter-actor", stack.user)
    page.select_option("#filter-action", "cancel")
    page.click("#filters button[type=submit]")
    page.locator(f"tr[data-session='{other}']").wait_for(state="detached")
    assert page.locator("#rows tr[data-session]").count() == 1
    assert page.locator(f"tr[data-session='{session_id}']").count() == 1
    assert "action=cancel" in page.url
    no_problems(tab)


def test_a_viewer_reads_the_page_signed_in_and_is_offered_no_action(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    session_id = finished(client, {"alert_type": "generic", "data": "disk 91% on db-1"})
    # As the proxy would: every request of the tab carries the viewer's signed header.
    tab = open_page(chromium, session_url(stack.api_url, session_id), signed_in(stack, VIEWER))
    page = tab.page
    wait_finished(page)
    assert page.inner_text("#session-status") == "completed"
    assert page.inner_text("#who") == f"signed in as {VIEWER} · viewer"
    for action in ("#action-cancel", "#action-resume", "#action-score", "#chat-form"):
        assert page.locator(action).is_hidden(), action
    assert page.locator("input[type=password]").count() == 0
    no_problems(tab)


@pytest.mark.parametrize(
    ("headers", "shown"),
    [
        ("nobody", "not signed in"),
        ("outsider", "needs the viewer role"),
        ("viewer", "no session 'no-such-session'"),
    ],
)
def test_a_page_that_cannot_load_says_why_instead_of_loading(
    stack: Stack, chromium: Browser, headers: str, shown: str
) -> None:
    sent = {
        "nobody": {},
        "outsider": signed_in(stack, "mallory@elsewhere.example"),
        "viewer": signed_in(stack, VIEWER),
    }[headers]
    tab = open_page(chromium, session_url(stack.api_url, "no-such-session"), sent)
    page = tab.page
    page.locator("#header", has_text=shown).wait_for()
    assert "loading" not in page.inner_text("#header")
    assert shown in page.inner_text("#message")
    # The failed poll is the page's own report, not a script error; nothing else went wrong.
    assert all("Failed to load resource" in p for p in tab.problems), tab.problems


def test_a_wide_tool_table_keeps_its_columns_and_scrolls_sideways(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    row = "  ".join(f"column-{n:02d}" for n in range(30))
    fake_gemini.responder = Investigation(first_text=row)
    session_id = finished(client, {"alert_type": "test-tools", "data": "orders p99 is 2 s"})
    tab = open_page(chromium, session_url(stack.signin_url, session_id))
    page = tab.page
    wait_finished(page)
    # The echo's result (the gather step's calls come before it): opened, then measured.
    event = page.locator(".event.mcp_tool_call", has_text="column-29").first
    event.locator("summary").click()
    result = event.locator("pre.result")
    result.wait_for()
    # Unwrapped: the row is wider than the box, which scrolls instead of breaking it.
    box = result.evaluate(
        "(pre) => ({space: getComputedStyle(pre).whiteSpace,"
        " wide: pre.scrollWidth > pre.clientWidth})"
    )
    assert box == {"space": "pre", "wide": True}, box
    no_problems(tab)


def test_the_list_shows_sessions_and_filters_them(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    disk = finished(client, {"alert_type": "DiskFull", "data": "disk 97% on db-1"})
    latency = finished(client, {"alert_type": "HighLatency", "data": "p99 2.3 s on orders"})
    tab = open_page(chromium, list_url(stack.signin_url))
    page = tab.page
    page.locator(f"tr[data-session='{latency}']").wait_for()
    assert page.locator(f"tr[data-session='{disk}']").count() == 1
    row = page.inner_text(f"tr[data-session='{latency}']")
    assert "completed" in row and "HighLatency" in row and "api" in row
    screenshot(page, "session-list.png")

    page.fill("#filter-alert-type", "DiskFull")
    page.click("#filters button[type=submit]")
    page.locator(f"tr[data-session='{latency}']").wait_for(state="detached")
    assert page.locator("#rows tr[data-session]").count() == 1
    assert "alert_type=DiskFull" in page.url

    page.fill("#filter-alert-type", "")
    page.select_option("#filter-status", "failed")
    page.click("#filters button[type=submit]")
    page.locator("#rows", has_text="no sessions match").wait_for()

    # The row links to the session's page.
    page.select_option("#filter-status", "completed")
    page.click("#filters button[type=submit]")
    page.click(f"tr[data-session='{disk}'] a")
    page.wait_for_url(f"**/ui/sessions/{disk}")
    page.locator("#session-status", has_text="completed").wait_for()
    no_problems(tab)


def test_hostile_alert_tool_and_model_text_show_as_text(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    fake_gemini.responder = Investigation(
        first_text=f"tool says {HOSTILE_SCRIPT} {HOSTILE_IMAGE}",
        final=(
            f"# Cause\n{HOSTILE_SCRIPT}\n\n{HOSTILE_IMAGE}\n\n[click me](javascript:window.pwned=1)"
        ),
    )
    alert = {"alert_type": "test-tools", "data": f"disk full {HOSTILE_SCRIPT} {HOSTILE_IMAGE}"}
    session_id = finished(client, alert)
    tab = open_page(chromium, session_url(stack.signin_url, session_id))
    page = tab.page
    wait_finished(page)
    page.click(".overview details.alert summary")
    for result in page.locator(".event.mcp_tool_call summary").all():
        result.click()
    text = page.inner_text("main")
    # The alert, the tool's output, the model's thinking and analysis: all shown, as text.
    assert text.count(HOSTILE_SCRIPT) >= 4, text
    assert text.count(HOSTILE_IMAGE) >= 4, text
    assert page.locator("main img").count() == 0
    assert page.locator("main script").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert "click me" in text
    no_problems(tab)


def test_a_finished_session_is_investigated_again_from_its_page(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    first = finished(client, {"alert_type": "generic", "data": "disk 97% on db-1"})
    tab = open_page(chromium, session_url(stack.signin_url, first))
    page = tab.page
    wait_finished(page)
    page.click("#action-again")
    # The new session's own page, which names the first; it runs to its end there.
    page.wait_for_url(lambda url: "/ui/sessions/" in url and not url.endswith(first))
    page.locator("a.again-of", has_text=first).wait_for()
    again = page.url.rsplit("/", 1)[1]
    assert again != first
    wait_finished(page)
    assert page.inner_text("#session-status") == "completed"
    assert "disk 97% on db-1" in (page.text_content("#overview") or "")
    # And the first lists it: the link goes back and forth.
    page.click("a.again-of")
    page.wait_for_url(f"**/ui/sessions/{first}")
    page.locator("a.again-as", has_text=again).wait_for()
    page.locator("#audit .audit-event[data-action='investigate']", has_text=stack.user).wait_for()
    no_problems(tab)


def test_feedback_is_given_from_the_page_and_shown_there_and_in_the_list(
    stack: Stack, fake_gemini: FakeGemini, client: TarsyClient, chromium: Browser
) -> None:
    first = finished(client, {"alert_type": "generic", "data": "disk 97% on db-1"})
    tab = open_page(chromium, session_url(stack.signin_url, first))
    page = tab.page
    wait_finished(page)
    form = page.locator("#feedback-form")
    form.wait_for(state="visible")
    form.locator("input[name='verdict'][value='wrong']").check()
    page.fill("#feedback-cause", "a log flood from the batch job filled /var")
    form.locator("button[type='submit']").click()
    # The next poll shows what was recorded, by whom, and the audit line.
    page.locator("#feedback .verdict", has_text="wrong").wait_for()
    assert "a log flood from the batch job filled /var" in (page.text_content("#feedback") or "")
    page.locator("#audit .audit-event[data-action='feedback']", has_text=stack.user).wait_for()
    # The list shows the verdict, and its filter finds the session.
    listing = open_page(chromium, list_url(stack.signin_url) + "?verdict=wrong")
    listing.page.locator(f"tr[data-session='{first}'] .verdict-badge", has_text="wrong").wait_for()
    assert listing.page.input_value("#filter-verdict") == "wrong"
    no_problems(tab)
    no_problems(listing)

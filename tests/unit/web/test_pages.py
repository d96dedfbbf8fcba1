"""The api's pages without I/O: routes, security headers, escaping, and the live cursor."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest

from tarsy.app import Deps
from tarsy.http.request import HttpRequest
from tarsy.models import (
    AgentExecution,
    AuditEvent,
    ChainRouting,
    ExecutionStatus,
    Feedback,
    FinalAnalysisEvent,
    LLMResponseEvent,
    LLMThinkingEvent,
    LLMToolCallEvent,
    MCPToolCallEvent,
    RecalledSession,
    Session,
    Stage,
    TimelineEvent,
    UserQuestionEvent,
    utcnow,
)
from tarsy.persistence.progress import ProgressSnapshot
from tarsy.persistence.session_list import SessionPage, SessionQuery, SessionSummary
from tarsy.persistence.store import Store
from tarsy.web.links import session_url
from tarsy.web.pages import CONTENT_SECURITY_POLICY, WebResponse, handle
from tarsy.web.render import markdown_html
from tarsy.web.session_page import PATH_SEPARATOR, CursorEntry, TimelineCursor, new_events
from tests.unit.signin import ADMIN, NOBODY, RESPONDER, VIEWER, SignIn, signin_server

KEY = "unit-key"


@pytest.fixture(scope="module")
def signin() -> Iterator[SignIn]:
    with signin_server() as served:
        yield served


@pytest.fixture(autouse=True)
def _signin(signin: SignIn) -> None:
    global SIGNIN
    SIGNIN = signin


SIGNIN: SignIn
SCRIPT = "<script>alert('alert')</script>"
IMAGE = '<img src=x onerror="alert(1)">'


class MemoryStore:
    """The reads the pages make, from dictionaries (the real Store's names and shapes)."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.stages: dict[str, list[Stage]] = {}
        self.executions: dict[str, list[AgentExecution]] = {}
        self.timelines: dict[str, list[tuple[str, TimelineEvent]]] = {}
        self.progress: dict[str, ProgressSnapshot] = {}
        self.timeline_reads: list[str] = []
        self.audit: dict[str, list[AuditEvent]] = {}

    async def get_session(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def list_stages(self, session_id: str) -> list[Stage]:
        return self.stages.get(session_id, [])

    async def list_executions(self, session_id: str) -> list[AgentExecution]:
        return self.executions.get(session_id, [])

    async def live_progress(self, execution_ids: list[str]) -> dict[str, ProgressSnapshot]:
        return {e: self.progress[e] for e in execution_ids if e in self.progress}

    async def list_timeline_records(self, execution_id: str) -> list[tuple[str, TimelineEvent]]:
        self.timeline_reads.append(execution_id)
        return self.timelines.get(execution_id, [])

    async def list_audit(self, session_id: str) -> list[AuditEvent]:
        return self.audit.get(session_id, [])

    async def list_sessions(self, query: SessionQuery) -> SessionPage:
        rows = [
            SessionSummary.model_validate(s.model_dump())
            for s in self.sessions.values()
            if query.status is None or s.status is query.status
        ]
        return SessionPage(sessions=rows[: query.limit])


def deps(store: MemoryStore, **settings_more: object) -> Deps:
    settings = SIGNIN.settings(TARSY_API_KEY=KEY, **settings_more)
    return cast(Deps, type("D", (), {"settings": settings, "store": cast(Store, store)})())


def get(path: str, query: str = "", user: str | None = ADMIN) -> HttpRequest:
    headers = {} if user is None else SIGNIN.headers(user)
    return HttpRequest(method="GET", path=path, query_string=query, headers=headers)


def hostile_store() -> MemoryStore:
    store = MemoryStore()
    session = Session(
        session_id="s-1",
        alert_type="HighLatency",
        alert_data=f"latency 2s {SCRIPT} {IMAGE}",
        chain_id="kubernetes",
        status=ExecutionStatus.ACTIVE,
        final_analysis=f"# Cause\n{SCRIPT}\n\n{IMAGE}\n\n[click](javascript:alert(1))",
        started_at=utcnow() - timedelta(seconds=30),
    )
    store.sessions["s-1"] = session
    store.stages["s-1"] = [Stage(index=0, name="investigate", execution_ids=["e-1", "e-2"])]
    parent = AgentExecution(
        execution_id="e-1", session_id="s-1", stage=0, agent="KubernetesAgent",
        strategy="native-thinking", provider="google", status=ExecutionStatus.ACTIVE,
    )  # fmt: skip
    child = AgentExecution(
        execution_id="e-2", session_id="s-1", stage=0, agent="LogReader", role="sub_agent",
        strategy="react", provider="google", status=ExecutionStatus.ACTIVE,
        parent_execution_id="e-1",
    )  # fmt: skip
    store.executions["s-1"] = [parent, child]
    store.timelines["e-1"] = [
        ("0001-000", LLMThinkingEvent(content=f"hmm {SCRIPT}")),
        (
            "0001-001",
            LLMToolCallEvent(
                content="kubernetes.pods_log",
                tool_name="pods_log",
                server_name="kubernetes",
                arguments=json.dumps({"name": IMAGE}),
            ),
        ),
        (
            "0001-002",
            MCPToolCallEvent(
                content=f"log line {IMAGE} {SCRIPT}", tool_name="pods_log", server_name="kubernetes"
            ),
        ),
    ]
    store.progress["e-2"] = ProgressSnapshot(step=1, text=f"so far {SCRIPT}", thinking="", chunks=2)
    return store


async def call(store: MemoryStore, request: HttpRequest) -> WebResponse:
    return await handle(request, deps(store))


def no_markup_from(html: str) -> None:
    """No hostile tag or handler survived as markup (escaped text is fine)."""
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert not re.search(r"<[^>]*\bonerror\s*=", html, re.IGNORECASE)
    assert "javascript:" not in re.sub(r"&[a-z]+;", "", "".join(re.findall(r'href="[^"]*"', html)))


async def test_the_shells_need_no_key_and_hold_no_session_data() -> None:
    store = hostile_store()
    listing = await call(store, get("/ui/", user=None))
    page = await call(store, get("/ui/sessions/s-1", user=None))
    assert listing.status == page.status == 200
    assert b"HighLatency" not in page.body and b"latency 2s" not in page.body
    assert b'<meta name="tarsy-root" content="../../">' in page.body
    assert b'<meta name="tarsy-root" content="../">' in listing.body
    _, _, headers = page.to_framework()
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert headers["X-Frame-Options"] == "DENY"


async def test_ui_without_a_slash_redirects_to_the_folder_the_links_are_relative_to() -> None:
    response = await call(MemoryStore(), get("/ui", user=None))
    assert (response.status, response.headers["Location"]) == (308, "ui/")


async def test_the_assets_are_served_from_the_package_and_nothing_else_is() -> None:
    script = await call(MemoryStore(), get("/ui/static/app.js", user=None))
    assert script.status == 200 and script.content_type.startswith("text/javascript")
    assert b"sessionPage" in script.body
    for path in ("/ui/static/..%2fpages.py", "/ui/static/pages.py", "/ui/static/../render.py"):
        assert (await call(MemoryStore(), get(path, user=None))).status == 404


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}],
    ids=["nothing", "the API key as Bearer", "the API key as X-API-Key"],
)
async def test_the_data_routes_need_a_signed_in_person_and_never_take_the_api_key(
    headers: dict[str, str],
) -> None:
    store = hostile_store()
    for path in ("/ui/data/sessions", "/ui/data/sessions/s-1"):
        request = HttpRequest(method="GET", path=path, headers=headers)
        response = await call(store, request)
        assert response.status == 401
        assert b"HighLatency" not in response.body


async def test_someone_without_a_role_is_refused_the_data_naming_the_viewer_role() -> None:
    response = await call(hostile_store(), get("/ui/data/sessions/s-1", user=NOBODY))
    assert response.status == 403
    assert json.loads(response.body)["error"]["details"] == {"required_role": "viewer"}
    assert b"HighLatency" not in response.body


async def test_a_viewer_sees_the_session_and_is_offered_no_action() -> None:
    viewer = await call(hostile_store(), get("/ui/data/sessions/s-1", user=VIEWER))
    update = json.loads(viewer.body)
    assert update["who"] == {"email": VIEWER, "role": "viewer"}
    assert not any(update["actions"].values())
    responder = json.loads(
        (await call(hostile_store(), get("/ui/data/sessions/s-1", user=RESPONDER))).body
    )
    assert any(responder["actions"].values())


async def test_the_page_shows_who_did_what_escaped() -> None:
    store = hostile_store()
    store.audit["s-1"] = [
        AuditEvent(action="chat", actor=RESPONDER, role="responder", detail=SCRIPT),
        AuditEvent(action="cancel", actor=ADMIN, role="admin"),
    ]
    update = json.loads((await call(store, get("/ui/data/sessions/s-1"))).body)
    no_markup_from(update["audit"])
    assert RESPONDER in update["audit"] and "cancel" in update["audit"]
    assert update["audit"].index(RESPONDER) < update["audit"].index(ADMIN)


async def test_actions_on_the_pages_are_refused_the_api_routes_take_them() -> None:
    response = await handle(
        HttpRequest(method="POST", path="/ui/data/sessions/s-1"), deps(hostile_store())
    )
    assert response.status == 405


async def test_hostile_alert_tool_and_model_text_render_as_text() -> None:
    response = await call(hostile_store(), get("/ui/data/sessions/s-1"))
    assert response.status == 200
    update: dict[str, Any] = json.loads(response.body)
    fragments = [update["header"], update["overview"], update["tree"]]
    fragments += [s["head"] for s in update["sections"]] + [s["live"] for s in update["sections"]]
    fragments += [e["html"] for e in update["events"]]
    for html in fragments:
        no_markup_from(html)
    everything = "".join(fragments)
    # Shown, escaped: the alert, the thinking, the tool's arguments and output, the live text.
    assert everything.count("&lt;script&gt;") >= 4
    assert "&lt;img src=x onerror=" in everything
    assert "<h1>Cause</h1>" in update["overview"]


async def test_the_header_says_why_the_session_runs_its_chain() -> None:
    store = hostile_store()
    session = store.sessions["s-1"]
    store.sessions["s-1"] = session.model_copy(
        update={
            "routing": ChainRouting(
                by="rule", rule="metrics-service", reason=f"service {SCRIPT!r} is set"
            )
        }
    )
    update: dict[str, Any] = json.loads((await call(store, get("/ui/data/sessions/s-1"))).body)
    no_markup_from(update["header"])
    assert "<dt>routed</dt>" in update["header"]
    assert "by rule metrics-service: service" in update["header"]


async def test_a_metric_tool_result_is_drawn_beside_its_folded_text() -> None:
    store = hostile_store()
    result = json.dumps(
        {
            "resultType": "matrix",
            "result": [{"metric": {"pod": IMAGE}, "values": [[1, "0.1"], [61, "0.9"]]}],
        }
    )
    store.timelines["e-1"].append(
        (
            "0001-003",
            MCPToolCallEvent(
                content=result,
                tool_name="execute_range_query",
                server_name="prometheus",
                arguments={"query": "ratio > 0.5", "start": "a", "end": "b", "step": "1m"},
            ),
        )
    )
    update: dict[str, Any] = json.loads((await call(store, get("/ui/data/sessions/s-1"))).body)
    [html] = [e["html"] for e in update["events"] if "execute_range_query" in e["html"]]
    no_markup_from(html)
    assert '<svg class="metric-chart"' in html and '<line class="threshold"' in html
    assert "<code>ratio &gt; 0.5</code>" in html
    assert html.index("<svg") < html.index("<details>")  # the chart, then the folded result
    assert "style=" not in html


def test_markdown_keeps_structure_and_drops_active_content() -> None:
    html = str(markdown_html("**bold** [ok](https://example.org) [bad](javascript:alert(1))"))
    assert "<strong>bold</strong>" in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html
    no_markup_from(html)


async def test_the_tree_puts_a_sub_agent_under_its_parent_with_a_cancel_button() -> None:
    update = json.loads((await call(hostile_store(), get("/ui/data/sessions/s-1"))).body)
    tree = update["tree"]
    assert tree.index("KubernetesAgent") < tree.index("LogReader")
    assert tree.count("data-cancel-execution=") == 2
    assert [s["id"] for s in update["sections"]] == ["e-1", "e-2"]
    assert f"KubernetesAgent{PATH_SEPARATOR}LogReader" in update["sections"][1]["head"]
    assert "streaming now" in update["sections"][1]["live"]
    assert update["finished"] is False and update["actions"]["cancel"] is True


async def test_a_poll_with_the_returned_cursor_brings_only_what_is_new() -> None:
    store = hostile_store()
    first = json.loads((await call(store, get("/ui/data/sessions/s-1"))).body)
    assert [e["id"] for e in first["events"]] == ["e-1/0001-000", "e-1/0001-001", "e-1/0001-002"]
    again = json.loads(
        (await call(store, get("/ui/data/sessions/s-1", f"cursor={first['cursor']}"))).body
    )
    assert again["events"] == [] and again["resets"] == []
    store.timelines["e-1"].append(("0002-000", FinalAnalysisEvent(content="done")))
    later = json.loads(
        (await call(store, get("/ui/data/sessions/s-1", f"cursor={first['cursor']}"))).body
    )
    assert [e["id"] for e in later["events"]] == ["e-1/0002-000"]
    # A lost answer: the page asks again with the cursor it had and gets the same events.
    retry = json.loads(
        (await call(store, get("/ui/data/sessions/s-1", f"cursor={first['cursor']}"))).body
    )
    assert retry["events"] == later["events"]


async def test_an_ended_execution_is_not_read_again_once_the_page_has_it_all() -> None:
    store = hostile_store()
    for execution in store.executions["s-1"]:
        execution.status = ExecutionStatus.COMPLETED
    store.sessions["s-1"].status = ExecutionStatus.COMPLETED
    first = json.loads((await call(store, get("/ui/data/sessions/s-1"))).body)
    assert first["finished"] is True
    store.timeline_reads.clear()
    await call(store, get("/ui/data/sessions/s-1", f"cursor={first['cursor']}"))
    assert store.timeline_reads == []


def test_an_event_written_under_an_earlier_id_resends_the_whole_section() -> None:
    records: list[tuple[str, TimelineEvent]] = [("0001-000", LLMResponseEvent(content="a"))]
    records.insert(0, ("0000-005", UserQuestionEvent(content="late")))
    shown, reset = new_events("e", records, CursorEntry(last="0001-000", count=1, final=False))
    assert reset is True and [s.event_id for s in shown] == ["0000-005", "0001-000"]


async def test_a_cursor_not_made_here_is_refused() -> None:
    response = await call(hostile_store(), get("/ui/data/sessions/s-1", "cursor=bm90LWpzb24"))
    assert response.status == 422
    assert TimelineCursor.decode(TimelineCursor().encode()) == TimelineCursor()


async def test_the_list_fragment_links_each_session_and_shows_its_columns() -> None:
    store = hostile_store()
    store.sessions["s-1"].status = ExecutionStatus.COMPLETED
    store.sessions["s-1"].score = 72
    store.sessions["s-1"].completed_at = utcnow()
    page = json.loads((await call(store, get("/ui/data/sessions", "status=completed"))).body)
    assert '<a href="sessions/s-1">s-1</a>' in page["html"]
    assert "HighLatency" in page["html"] and ">72<" in page["html"]
    empty = json.loads((await call(store, get("/ui/data/sessions", "status=failed"))).body)
    assert "no sessions match" in empty["html"]
    bad = await call(store, get("/ui/data/sessions", "status=nonsense"))
    assert bad.status == 422


def test_a_session_url_is_under_the_api_url() -> None:
    assert session_url("https://x.example/api/", "s-1") == "https://x.example/api/ui/sessions/s-1"


def finished_with_a_chat() -> MemoryStore:
    """A completed session with an investigation's analysis and a chat's answer."""
    store = MemoryStore()
    store.sessions["s-2"] = Session(
        session_id="s-2", alert_type="DiskFull", alert_data="disk 97%", chain_id="default",
        status=ExecutionStatus.COMPLETED, started_at=utcnow(), completed_at=utcnow(),
    )  # fmt: skip
    store.executions["s-2"] = [
        AgentExecution(
            execution_id=eid,
            session_id="s-2",
            stage=stage,
            agent=agent,
            role=role,
            strategy="native-thinking",
            provider="google",
            status=ExecutionStatus.COMPLETED,
        )
        for eid, stage, agent, role in (
            ("e-a", 0, "investigator", "agent"),
            ("e-c", -2, "chat-assistant", "chat"),
        )
    ]
    store.timelines["e-a"] = [("0001-000", FinalAnalysisEvent(content="the disk"))]
    store.timelines["e-c"] = [
        ("0001-000", UserQuestionEvent(content="why?")),
        ("0002-000", FinalAnalysisEvent(content="because")),
    ]
    return store


async def test_a_chats_answer_is_labelled_an_answer_not_a_final_analysis() -> None:
    update = json.loads((await call(finished_with_a_chat(), get("/ui/data/sessions/s-2"))).body)
    labels: dict[str, list[str]] = {}
    for event in update["events"]:
        found = re.findall(r'<div class="label">([^<]*)</div>', event["html"])
        labels.setdefault(event["section"], []).extend(found)
    assert labels["e-a"] == ["final analysis"]
    assert labels["e-c"] == ["question", "answer"]


async def test_re_score_is_not_offered_where_scoring_is_off() -> None:
    store = finished_with_a_chat()
    offered = json.loads((await call(store, get("/ui/data/sessions/s-2"))).body)
    assert offered["actions"]["score"] is True
    request = get("/ui/data/sessions/s-2")
    stand_in = await handle(request, deps(store, TARSY_SCORING_OFF_REASON="stand-in model"))
    assert json.loads(stand_in.body)["actions"]["score"] is False


async def test_a_tools_output_keeps_its_lines_so_tables_keep_their_columns() -> None:
    update = json.loads((await call(hostile_store(), get("/ui/data/sessions/s-1"))).body)
    [result] = [e["html"] for e in update["events"] if 'data-type="mcp_tool_call"' in e["html"]]
    assert '<pre class="result">' in result
    css = (await call(MemoryStore(), get("/ui/static/style.css", user=None))).body.decode()
    assert re.search(r"pre\.result \{[^}]*white-space: pre;[^}]*overflow-x: auto", css)


async def test_a_responder_may_investigate_a_finished_session_again_and_a_viewer_may_not() -> None:
    store = finished_with_a_chat()
    responder = json.loads((await call(store, get("/ui/data/sessions/s-2", user=RESPONDER))).body)
    viewer = json.loads((await call(store, get("/ui/data/sessions/s-2", user=VIEWER))).body)
    assert responder["actions"]["again"] is True and viewer["actions"]["again"] is False
    running = json.loads((await call(hostile_store(), get("/ui/data/sessions/s-1"))).body)
    assert running["actions"]["again"] is False


async def test_the_page_links_a_session_and_its_investigation_again_both_ways() -> None:
    store = finished_with_a_chat()
    store.sessions["s-2"] = store.sessions["s-2"].model_copy(
        update={"investigation_of": "s-1", "investigated_again_as": ["s-3", "s-4"]}
    )
    header = json.loads((await call(store, get("/ui/data/sessions/s-2"))).body)["header"]
    assert '<a class="again-of" href="s-1">s-1</a>' in header
    assert re.findall(r'class="again-as" href="([^"]+)"', header) == ["s-3", "s-4"]


async def test_the_list_filters_by_who_acted_and_what_they_did() -> None:
    shell = (await call(MemoryStore(), get("/ui/", user=None))).body.decode()
    assert 'name="actor"' in shell and 'name="action"' in shell
    assert '<option value="investigate">investigate</option>' in shell
    script = (await call(MemoryStore(), get("/ui/static/app.js", user=None))).body.decode()
    assert script.count('"actor", "action"') == 2  # read from the URL, and sent


async def test_a_responder_is_offered_feedback_on_a_finished_analysis_only() -> None:
    store = finished_with_a_chat()
    responder = json.loads((await call(store, get("/ui/data/sessions/s-2", user=RESPONDER))).body)
    viewer = json.loads((await call(store, get("/ui/data/sessions/s-2", user=VIEWER))).body)
    assert responder["actions"]["feedback"] is True and viewer["actions"]["feedback"] is False
    running = json.loads((await call(hostile_store(), get("/ui/data/sessions/s-1"))).body)
    assert running["actions"]["feedback"] is False
    shell = (await call(store, get("/ui/sessions/s-2", user=None))).body.decode()
    assert 'id="feedback-form"' in shell and 'value="partly_right"' in shell
    assert "<script>" not in shell  # the form is wired by app.js, as the other actions


async def test_the_page_shows_the_feedback_given_with_its_cause_escaped() -> None:
    store = finished_with_a_chat()
    given = Feedback(verdict="wrong", root_cause=f"the ConfigMap {SCRIPT}", by=RESPONDER)
    store.sessions["s-2"] = store.sessions["s-2"].model_copy(
        update={"feedback": given, "verdict": "wrong"}
    )
    overview = json.loads((await call(store, get("/ui/data/sessions/s-2"))).body)["overview"]
    no_markup_from(overview)
    assert '<span class="verdict">wrong</span>' in overview
    assert "the ConfigMap &lt;script&gt;" in overview and RESPONDER in overview


async def test_the_list_shows_each_sessions_verdict_and_filters_on_it() -> None:
    store = finished_with_a_chat()
    store.sessions["s-2"] = store.sessions["s-2"].model_copy(
        update={
            "verdict": "partly_right",
            "feedback": Feedback(verdict="partly_right", root_cause=SCRIPT, by=RESPONDER),
        }
    )
    page = json.loads((await call(store, get("/ui/data/sessions"))).body)
    no_markup_from(page["html"])
    assert 'class="verdict-badge verdict-partly_right"' in page["html"]
    assert ">partly right</span>" in page["html"]
    shell = (await call(MemoryStore(), get("/ui/", user=None))).body.decode()
    assert 'name="verdict"' in shell and '<option value="wrong">wrong</option>' in shell
    script = (await call(MemoryStore(), get("/ui/static/app.js", user=None))).body.decode()
    assert script.count('"action", "verdict"') == 2  # read from the URL, and sent
    assert 'base + "/feedback"' in script


async def test_the_page_links_the_earlier_sessions_it_recalled_with_their_age_and_verdict() -> None:
    store = finished_with_a_chat()
    created = store.sessions["s-2"].created_at
    recalled = [
        RecalledSession(
            session_id="s-0", alert_type="DiskFull", status=ExecutionStatus.COMPLETED,
            created_at=created - timedelta(days=2), matched_by="workload",
            feedback=Feedback(verdict="wrong", root_cause="a log flood", by=RESPONDER),
        )
    ]  # fmt: skip
    store.sessions["s-2"] = store.sessions["s-2"].model_copy(update={"recalled": recalled})
    header = json.loads((await call(store, get("/ui/data/sessions/s-2"))).body)["header"]
    assert '<a class="recalled-session" href="s-0">s-0</a>' in header
    assert "history to verify" in header and "2d 00h before, marked wrong" in header


async def test_the_page_and_the_list_show_a_cost_in_dollars_an_older_float_cost_too() -> None:
    store = hostile_store()
    store.sessions["s-1"].status = ExecutionStatus.COMPLETED
    store.sessions["s-1"].cost = 12_340_000  # nano-dollars, as stored now
    page = json.dumps(json.loads((await call(store, get("/ui/data/sessions/s-1"))).body))
    listed = json.loads((await call(store, get("/ui/data/sessions"))).body)["html"]
    assert "$0.0123" in page and "$0.0123" in listed
    older = store.sessions["s-1"].model_dump() | {"cost": 0.01234}  # a float of dollars
    store.sessions["s-1"] = Session.model_validate(older)
    listed = json.loads((await call(store, get("/ui/data/sessions"))).body)["html"]
    assert "$0.0123" in listed

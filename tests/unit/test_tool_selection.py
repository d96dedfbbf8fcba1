"""The alert's ``mcp`` selection: its schema, the ingest checks, how every execution applies it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, cast

import pytest
from pydantic import ValidationError

from tarsy.config import load_config
from tarsy.config.schema import TarsyConfig
from tarsy.engine.roles import resolve_execution
from tarsy.errors import ToolSelectionError
from tarsy.http.request import HttpRequest
from tarsy.intake.ingest import handle
from tarsy.llm.base import ToolDefinition
from tarsy.models import (
    AgentExecution,
    AlertSubmission,
    ExecutionRole,
    MCPSelection,
    Session,
    StepMessage,
    utcnow,
)
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy.tools.base import CachedToolList, ToolListing
from tarsy.tools.selection import (
    apply_selection,
    fresh_tool_names,
    restrict_listing,
    selection_problems,
)

CONFIG_TEXT = """
mcp_servers:
  logs: {transport: http, url: "http://logs.invalid/mcp", tool_list_ttl: 60}
  metrics: {transport: http, url: "http://metrics.invalid/mcp"}
  retired: {transport: http, url: "http://retired.invalid/mcp", enabled: false}
agents:
  reader:
    iteration_strategy: native-thinking
    mcp_servers: [kubernetes]
    tool_choice: kubernetes.get_pods
  thinker:
    iteration_strategy: native-thinking
agent_chains:
  kube:
    alert_types: [kube]
    stages:
      - {name: look, agent: reader}
      - {name: think, agent: thinker}
"""
CONFIG = load_config(Settings(), user_text=CONFIG_TEXT)


def selection(*servers: dict[str, Any]) -> MCPSelection:
    return MCPSelection.model_validate({"servers": list(servers)})


def session(mcp: MCPSelection | None) -> Session:
    return Session(session_id="s", alert_type="kube", alert_data="d", chain_id="kube", mcp=mcp)


def execution(role: ExecutionRole, stage: int = 0) -> AgentExecution:
    return AgentExecution(
        execution_id=f"e-{role}", session_id="s", stage=stage, role=role,
        agent="a", strategy="native-thinking", provider="default",
    )  # fmt: skip


def listing(*names: str, unavailable: dict[str, str] | None = None) -> ToolListing:
    return ToolListing(
        tools=[ToolDefinition(name=name, description="", parameters={}) for name in names],
        unavailable=unavailable or {},
    )


# ─── the schema (TARSy's shape) ───────────────────────────────────────────────


def test_the_alert_takes_tarsys_mcp_shape() -> None:
    submission = AlertSubmission.model_validate(
        {
            "alert_type": "kube",
            "data": "d",
            "mcp": {"servers": [{"name": "logs", "tools": ["tail"]}, {"name": "metrics"}]},
        }
    )
    assert submission.mcp == selection({"name": "logs", "tools": ["tail"]}, {"name": "metrics"})


@pytest.mark.parametrize(
    "mcp",
    [
        {"servers": [{"name": "logs"}, {"name": "logs"}]},  # the same server twice
        {"servers": [{"name": "logs", "tool": ["tail"]}]},  # a misspelt key is not ignored
        {"servers": [{"name": "a b"}]},
        {"servers": [{"name": "logs", "tools": [""]}]},
        {"servers": [{"name": "logs"}], "native_tools": {"google_search": True}},
        {},
    ],
)
def test_a_malformed_selection_is_a_schema_error(mcp: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as failure:
        AlertSubmission.model_validate({"alert_type": "kube", "data": "d", "mcp": mcp})
    assert all(error["loc"][0] == "mcp" for error in failure.value.errors())


# ─── ingest checks (pure) ─────────────────────────────────────────────────────


def test_unknown_and_disabled_servers_are_named() -> None:
    problems = selection_problems(
        selection({"name": "logs"}, {"name": "ghost"}, {"name": "retired"}),
        CONFIG.mcp_servers,
        {},
    )
    assert [(p["field"], p["type"]) for p in problems] == [
        ("mcp.servers.1.name", "unknown_mcp_server"),
        ("mcp.servers.2.name", "disabled_mcp_server"),
    ]
    assert "'ghost'" in problems[0]["message"]


def test_tool_names_are_checked_only_against_a_known_list() -> None:
    chosen = selection(
        {"name": "logs", "tools": ["tail", "grep"]}, {"name": "metrics", "tools": ["x"]}
    )
    problems = selection_problems(chosen, CONFIG.mcp_servers, {"logs": ["tail", "head"]})
    assert [(p["field"], p["type"]) for p in problems] == [
        ("mcp.servers.0.tools.1", "unknown_mcp_tool")
    ]
    assert "'grep'" in problems[0]["message"] and "tail, head" in problems[0]["message"]
    # No list known for "metrics": its tool names wait for the first step.
    assert selection_problems(chosen, CONFIG.mcp_servers, {}) == []


def test_only_a_fresh_cached_tool_list_is_known() -> None:
    now = utcnow()
    tools = [ToolDefinition(name="logs.tail", description="", parameters={})]
    fresh = CachedToolList(server="logs", tools=tools, fetched_at=now - timedelta(seconds=30))
    stale = CachedToolList(server="logs", tools=tools, fetched_at=now - timedelta(seconds=61))
    gone = CachedToolList(server="gone", tools=tools, fetched_at=now)
    assert fresh_tool_names({"logs": fresh, "gone": gone}, CONFIG.mcp_servers, now) == {
        "logs": ["tail"]
    }
    assert fresh_tool_names({"logs": stale}, CONFIG.mcp_servers, now) == {}


# ─── every execution of the session (resolve_execution) ───────────────────────


def test_without_a_selection_the_chain_decides() -> None:
    resolved = resolve_execution(CONFIG, session(None), execution("agent"))
    assert (resolved.mcp_servers, resolved.mcp_tools) == (["kubernetes"], {})


@pytest.mark.parametrize("role", ["agent", "chat"])
def test_the_selection_replaces_the_servers_of_agents_and_chat(role: ExecutionRole) -> None:
    chosen = selection({"name": "logs", "tools": ["tail"]}, {"name": "metrics", "tools": []})
    resolved = resolve_execution(CONFIG, session(chosen), execution(role))
    assert resolved.mcp_servers == ["logs", "metrics"]
    assert resolved.mcp_tools == {"logs": ["tail"]}  # an empty list means every tool


def test_a_sub_agent_gets_the_selection_too() -> None:
    sub_agent = execution("sub_agent", stage=0).model_copy(update={"agent": "reader"})
    assert resolve_execution(CONFIG, session(None), sub_agent).mcp_servers == ["kubernetes"]
    chosen = selection({"name": "metrics", "tools": ["query"]})
    resolved = resolve_execution(CONFIG, session(chosen), sub_agent)
    assert (resolved.mcp_servers, resolved.mcp_tools) == (["metrics"], {"metrics": ["query"]})


def test_an_agent_configured_without_tools_gets_the_selection() -> None:
    chosen = selection({"name": "logs"})
    resolved = resolve_execution(CONFIG, session(chosen), execution("agent", stage=1))
    assert resolved.mcp_servers == ["logs"]


@pytest.mark.parametrize("role", ["synthesis", "summary", "scoring"])
def test_tool_less_roles_stay_without_tools(role: ExecutionRole) -> None:
    config = load_config(Settings(), user_text=CONFIG_TEXT + "    scoring: true\n")
    resolved = resolve_execution(
        config, session(selection({"name": "logs"})), execution(role, stage=-1)
    )
    assert (resolved.mcp_servers, resolved.mcp_tools) == ([], {})


def test_an_empty_selection_runs_without_mcp_tools() -> None:
    resolved = resolve_execution(CONFIG, session(selection()), execution("agent"))
    assert resolved.mcp_servers == []


def test_a_forced_tool_the_selection_leaves_out_becomes_auto() -> None:
    agent = CONFIG.resolve("kube", 0, 0)
    assert agent.tool_choice == "kubernetes.get_pods"
    kept = apply_selection(agent, selection({"name": "kubernetes", "tools": ["get_pods"]}), "agent")
    assert kept.tool_choice == "kubernetes.get_pods"
    narrowed = apply_selection(agent, selection({"name": "kubernetes", "tools": ["logs"]}), "agent")
    assert narrowed.tool_choice == "auto"
    elsewhere = apply_selection(agent, selection({"name": "logs"}), "agent")
    assert elsewhere.tool_choice == "auto"


# ─── the listing (steps.prepare_turn) ─────────────────────────────────────────


def test_the_listing_keeps_only_the_allowed_tools_of_narrowed_servers() -> None:
    tools = listing("logs.tail", "logs.head", "metrics.query", "metrics.range")
    kept = restrict_listing(tools, {"logs": ["tail"]})
    assert kept.names == ["logs.tail", "metrics.query", "metrics.range"]
    assert restrict_listing(tools, {}) == tools


def test_a_selected_tool_the_server_does_not_list_fails_naming_it() -> None:
    with pytest.raises(ToolSelectionError) as failure:
        restrict_listing(listing("logs.tail", "logs.head"), {"logs": ["tail", "grep"]})
    error = failure.value
    assert (error.server, error.missing, error.listed) == ("logs", ["grep"], ["tail", "head"])
    assert "'grep'" in str(error)


def test_an_unreachable_server_is_reported_not_failed() -> None:
    tools = listing("metrics.query", unavailable={"logs": "ConnectError"})
    assert restrict_listing(tools, {"logs": ["tail"]}) == tools


# ─── the ingest handler ───────────────────────────────────────────────────────


class SelectionStore:
    """Sessions in memory, and the tool-list cache ingest may read."""

    def __init__(self, tool_lists: dict[str, CachedToolList] | None = None) -> None:
        self.sessions: dict[str, Session] = {}
        self.tool_lists = tool_lists or {}
        self.reads: list[list[str]] = []

    async def create_session(self, session: Session) -> None:
        self.sessions[session.session_id] = session

    async def get_tool_lists(self, servers: list[str]) -> dict[str, CachedToolList]:
        self.reads.append(list(servers))
        return {s: self.tool_lists[s] for s in servers if s in self.tool_lists}


class Bus:
    def __init__(self) -> None:
        self.messages: list[StepMessage] = []

    async def publish(self, message: StepMessage) -> str:
        self.messages.append(message)
        return "1"


SETTINGS = Settings(TARSY_AUTH_DISABLED=True)


async def submit(body: dict[str, Any], store: SelectionStore, config: TarsyConfig = CONFIG) -> Any:
    bus = Bus()
    request = HttpRequest(
        method="POST",
        path="/alerts",
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode(),
    )
    response = await handle(request, SETTINGS, config, cast(Store, store), bus)
    if response.status != 202:
        assert store.sessions == {} and bus.messages == []  # nothing written or published
    return response


async def test_ingest_stores_the_selection_on_the_session() -> None:
    store = SelectionStore()
    mcp = {"servers": [{"name": "logs", "tools": ["tail"]}]}
    response = await submit({"alert_type": "kube", "data": "d", "mcp": mcp}, store)
    assert response.status == 202
    assert store.sessions[response.body["session_id"]].mcp == MCPSelection.model_validate(mcp)
    assert store.reads == [["logs"]]  # the cache is read for the servers it narrows


async def test_ingest_refuses_an_unknown_server_with_422_naming_it() -> None:
    store = SelectionStore()
    mcp = {"servers": [{"name": "ghost"}]}
    response = await submit({"alert_type": "kube", "data": "d", "mcp": mcp}, store)
    assert response.status == 422
    [detail] = response.body["error"]["details"]
    assert detail["field"] == "mcp.servers.0.name" and "'ghost'" in detail["message"]
    assert store.reads == []  # no tool names to check: no read


async def test_ingest_refuses_a_tool_a_fresh_cached_list_lacks() -> None:
    tools = [ToolDefinition(name="logs.tail", description="", parameters={})]
    store = SelectionStore(
        {"logs": CachedToolList(server="logs", tools=tools, fetched_at=utcnow())}
    )
    mcp = {"servers": [{"name": "logs", "tools": ["tail", "grep"]}]}
    response = await submit({"alert_type": "kube", "data": "d", "mcp": mcp}, store)
    assert response.status == 422
    [detail] = response.body["error"]["details"]
    assert (detail["field"], detail["type"]) == ("mcp.servers.0.tools.1", "unknown_mcp_tool")


async def test_ingest_accepts_tool_names_it_cannot_check() -> None:
    old = utcnow() - timedelta(hours=1)
    tools = [ToolDefinition(name="logs.tail", description="", parameters={})]
    store = SelectionStore({"logs": CachedToolList(server="logs", tools=tools, fetched_at=old)})
    mcp = {"servers": [{"name": "logs", "tools": ["grep"]}]}
    response = await submit({"alert_type": "kube", "data": "d", "mcp": mcp}, store)
    assert response.status == 202  # the first step checks it against the live list

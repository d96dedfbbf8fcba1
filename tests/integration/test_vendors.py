"""Every provider type runs a whole investigation with tools, through its real SDK and its fake.

In process, on the local stack's emulators, with the bundled demo cluster as a
real MCP server (stdio): the openai, xai and anthropic types with
``native-tools``, the openai-compatible type with its default ``schema-actions``,
the vertexai type with google-auth's real service-account flow against a
loopback token endpoint (the google type runs in every other suite);
then a 429 and a 500 storm inside an investigation, a malformed tool call, and
a fallback from Gemini to OpenAI that carries no thought signature across.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tarsy.agent.compact import opening_findings
from tarsy.app import Deps
from tarsy.config import load_config
from tarsy.models import ConversationMessage, ExecutionStatus, StepMessage
from tarsy.persistence.store import Store
from tarsy.settings import Settings
from tarsy.tools.mcp_client import MCPToolExecutor
from tarsy_dev.fakes.fake_anthropic import FakeAnthropic
from tarsy_dev.fakes.fake_gemini import FakeCall, FakeGemini, FakeReply, FakeToolCall
from tarsy_dev.fakes.fake_google_oauth import FakeGoogleOAuth, write_service_account
from tarsy_dev.fakes.fake_openai import FakeOpenAI
from tarsy_dev.fakes.loopback import RecordedCall, ScriptedReply, ScriptedToolCall

from . import in_process
from .in_process import drive

FAST = "{max_retries: 2, initial_delay: 0.01, max_delay: 2.0}"
FINAL = "The payments-api pods crash because the database password was rotated."


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def anthropic_fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(autouse=True)
def vendor_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "XAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "test-key")


async def with_config(deps: Deps, store: Store, user: str) -> AsyncIterator[Deps]:
    settings: Settings = deps.settings.model_copy(update={"config_path": None})
    # The stack's "kubernetes" server (kubernetes-mcp-server on the demo cluster); the
    # built-in one is the deployed Cloud Run service.
    kubernetes = deps.config.mcp_servers["kubernetes"].model_dump(mode="json", exclude_none=True)
    user += yaml.safe_dump({"mcp_servers": {"kubernetes": kubernetes}})
    config = load_config(settings, user_text=user)
    yield replace(deps, config=config, tools=MCPToolExecutor(config, settings, store))


def provider_yaml(provider_type: str, model: str, url: str, extra: str = "") -> str:
    return (
        "defaults: {llm_provider: vendor}\n"
        "llm_providers:\n"
        f"  vendor: {{type: {provider_type}, model: {model}, base_url: '{url}', retry: {FAST}"
        f"{extra}}}\n"
    )


def agent_yaml(strategy: str | None) -> str:
    chosen = f"iteration_strategy: {strategy}, " if strategy else ""
    return f"agents:\n  investigator: {{{chosen}mcp_servers: [kubernetes], max_iterations: 4}}\n"


def native_investigator(call: RecordedCall) -> ScriptedReply:
    """List the pods once, then conclude; a call without tools is the executive summary."""
    body = call.body
    if not body.get("tools"):
        return ScriptedReply(text="Summary: database password rotated.")
    turns = body.get("messages", [])
    answered = any(
        m.get("role") == "tool"
        or any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in m.get("content") or []
        )
        for m in turns
        if isinstance(m, dict)
    )
    if answered:
        return ScriptedReply(text=FINAL)
    return ScriptedReply(
        text="Listing the pods.",
        tool_calls=[ScriptedToolCall(name="kubernetes__pods_list", args={"namespace": "checkout"})],
    )


def schema_investigator(call: RecordedCall) -> ScriptedReply:
    """JSON actions while a response_format is asked for; plain text for the summary."""
    if "response_format" not in call.body:
        return ScriptedReply(text="Summary: database password rotated.")
    seen = json.dumps(call.body["messages"])
    action: dict[str, Any]
    if "Observation from kubernetes.pods_list" in seen:
        action = {"thought": "The pods crash.", "action": "final_answer", "answer": FINAL}
    else:
        action = {
            "thought": "List the pods first.",
            "action": "call_tool",
            "tool": "kubernetes.pods_list",
            "arguments": {"namespace": "checkout"},
        }
    return ScriptedReply(text=json.dumps(action))


async def investigate(local: Deps, store: Store) -> str:
    session = await in_process.new_session(
        store, alert_type="generic", alert_data="pods of payments-api crash looping in checkout"
    )
    await drive(local, StepMessage(session_id=session.session_id, kind="start_session"))
    return session.session_id


async def assert_investigated(store: Store, session_id: str, provider_name: str) -> None:
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED, done and done.error
    assert done.final_analysis == FINAL
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    records = await store.list_llm_interactions(agent.execution_id)
    assert all(r.provider_name == provider_name for r in records)
    mcp = await store.list_mcp_interactions(agent.execution_id)
    assert [(m.server, m.tool) for m in mcp] == [("kubernetes", "pods_list")]
    assert "payments-api" in mcp[0].result  # the real demo cluster answered
    assert done.tokens.total_tokens > 0


@pytest.mark.parametrize(
    ("provider_type", "model"),
    [("openai", "gpt-4.1"), ("xai", "grok-4")],
)
async def test_an_openai_style_vendor_investigates_with_native_tools(
    deps: Deps, store: Store, openai_fake: FakeOpenAI, provider_type: str, model: str
) -> None:
    openai_fake.responder = native_investigator
    user = provider_yaml(provider_type, model, openai_fake.base_url) + agent_yaml("native-tools")
    async for local in with_config(deps, store, user):
        session_id = await investigate(local, store)
    await assert_investigated(store, session_id, "vendor")
    assert openai_fake.calls[0].body["tools"][0]["type"] == "function"


async def test_anthropic_investigates_with_native_tools(
    deps: Deps, store: Store, anthropic_fake: FakeAnthropic
) -> None:
    anthropic_fake.responder = native_investigator
    user = provider_yaml("anthropic", "claude-sonnet-5", anthropic_fake.url)
    async for local in with_config(deps, store, user + agent_yaml("native-tools")):
        session_id = await investigate(local, store)
    await assert_investigated(store, session_id, "vendor")


async def test_an_openai_compatible_server_investigates_with_schema_actions_by_default(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    openai_fake.responder = schema_investigator
    # Declared capable: this is the agentic path of a self-hosted model (a small one takes
    # the compact path, tested below).
    user = provider_yaml(
        "openai-compatible", "qwen2.5-coder-1.5b", openai_fake.base_url, ", small: false"
    )
    async for local in with_config(deps, store, user + agent_yaml(None)):
        session_id = await investigate(local, store)
    await assert_investigated(store, session_id, "vendor")
    first = openai_fake.calls[0].body
    assert first["response_format"]["type"] == "json_schema"
    assert "tools" not in first  # tools are described in the prompt, not offered natively
    assert "authorization" in openai_fake.calls[0].headers
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    records = await store.list_llm_interactions(agent.execution_id)
    assert all(r.cost == 0.0 and r.metadata.get("price") for r in records)


async def test_a_429_and_a_500_storm_inside_an_investigation_are_retried_by_the_transport(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    openai_fake.script(
        ScriptedReply(status=429, error_message="slow down", retry_after=0.1),
        ScriptedReply(status=500, error_message="boom"),
    )
    openai_fake.responder = native_investigator
    user = provider_yaml("openai", "gpt-4.1", openai_fake.base_url) + agent_yaml("native-tools")
    async for local in with_config(deps, store, user):
        session_id = await investigate(local, store)
    await assert_investigated(store, session_id, "vendor")
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    first = (await store.list_llm_interactions(agent.execution_id))[0]
    assert first.attempts == 3


async def test_a_500_storm_longer_than_the_retries_fails_the_session_with_the_reason(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    openai_fake.responder = lambda call: ScriptedReply(status=500, error_message="down")
    user = provider_yaml("openai", "gpt-4.1", openai_fake.base_url) + agent_yaml("native-tools")
    async for local in with_config(deps, store, user):
        session_id = await investigate(local, store)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.FAILED
    assert done.error is not None and "consecutive failed iterations" in done.error.message


async def test_a_malformed_tool_call_gets_an_error_observation_and_the_investigation_goes_on(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    broken = ScriptedToolCall(name="kubernetes__pods_list", raw_arguments='{"namespace": "chec')
    openai_fake.script(ScriptedReply(tool_calls=[broken]))
    openai_fake.responder = native_investigator
    user = provider_yaml("openai", "gpt-4.1", openai_fake.base_url) + agent_yaml("native-tools")
    async for local in with_config(deps, store, user):
        session_id = await investigate(local, store)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED
    second = openai_fake.calls[1].body["messages"]
    [tool_turn] = [m for m in second if m["role"] == "tool"]
    assert "not valid JSON" in tool_turn["content"]


async def test_gemini_fails_openai_answers_the_record_names_both_and_no_signature_crosses(
    deps: Deps, store: Store, fake_gemini: FakeGemini, openai_fake: FakeOpenAI
) -> None:
    signature = b"gemini-only-signature"
    turns = iter(
        [
            FakeReply(
                tool_calls=[FakeToolCall(name="kubernetes__pods_list", args={}, id="g1",
                                         thought_signature=signature)],
                thinking="List the pods.",
            ),
        ]
    )  # fmt: skip

    def gemini(call: object) -> FakeReply:
        return next(turns, FakeReply(status=503, error_message="overloaded"))

    fake_gemini.responder = gemini
    openai_fake.responder = native_investigator
    user = (
        "defaults: {llm_provider: primary}\n"
        "llm_providers:\n"
        f"  primary: {{type: google, backend: google-native, model: gemini-2.5-flash, "
        f"base_url: '{fake_gemini.url}', retry: {FAST}, fallback: [backup]}}\n"
        f"  backup: {{type: openai, model: gpt-4.1, base_url: '{openai_fake.base_url}', "
        f"retry: {FAST}}}\n" + agent_yaml("native-tools")
    )
    async for local in with_config(deps, store, user):
        session_id = await investigate(local, store)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED, done and done.error
    assert done.final_analysis == FINAL
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    records = await store.list_llm_interactions(agent.execution_id)
    assert records[0].provider_name == "primary"
    answered = records[1]
    assert (answered.provider_name, answered.model) == ("backup", "gpt-4.1")
    [failed] = answered.failed_providers
    assert (failed.provider, failed.model, failed.error.code) == (
        "primary",
        "gemini-2.5-flash",
        "503",
    )
    # The Gemini turn (with its signature) is replayed to OpenAI as plain tool calls.
    sent = json.dumps([c.body for c in openai_fake.calls])
    assert "thought_signature" not in sent and "gemini-only-signature" not in sent
    assert "thoughtSignature" not in sent
    assert base64.b64encode(signature).decode() not in sent


def gemini_investigator(call: FakeCall) -> FakeReply:
    """List the pods once, then conclude; a call without functions is the executive summary."""
    if not call.function_names():
        return FakeReply(text="Summary: database password rotated.")
    if call.model_parts():
        return FakeReply(text=FINAL)
    pods = FakeToolCall(name="kubernetes__pods_list", args={"namespace": "checkout"})
    return FakeReply(thinking="List the pods.", tool_calls=[pods])


@pytest.mark.parametrize(
    ("backend", "strategy"), [("langchain", "native-tools"), ("google-native", "native-thinking")]
)
async def test_vertex_ai_investigates_with_the_processs_google_credentials(
    deps: Deps,
    store: Store,
    fake_gemini: FakeGemini,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    strategy: str,
) -> None:
    # Application Default Credentials from a service-account key file: google-auth signs a
    # JWT grant and trades it at the file's token_uri (a loopback fake) for an access token.
    oauth = FakeGoogleOAuth().start()
    try:
        key_file = write_service_account(oauth, tmp_path / "sa.json", "demo-proj")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        fake_gemini.responder = gemini_investigator
        user = provider_yaml(
            "vertexai",
            "gemini-2.5-flash",
            fake_gemini.url,
            f", backend: {backend}, vertex_project: demo-proj, vertex_location: europe-west4",
        ) + agent_yaml(strategy)
        async for local in with_config(deps, store, user):
            session_id = await investigate(local, store)
    finally:
        oauth.stop()
    await assert_investigated(store, session_id, "vendor")
    assert oauth.tokens, "google-auth never asked the token endpoint"
    assert oauth.claims[0]["iss"] == "tarsy-test@demo-proj.iam.gserviceaccount.com"
    for call in fake_gemini.calls:
        assert call.path.startswith("/v1beta1/projects/demo-proj/locations/europe-west4/")
        assert call.api_key is None and call.authorization == f"Bearer {oauth.tokens[-1]}"


# ─── the compact path (a small model) ─────────────────────────────────────────

COMPACT_ANSWER = {
    "broken": "The payments-api pods crash loop in checkout.",
    "root_cause": FINAL,
    "findings": [1],
    "fix": "Restore the database password in the payments-api Secret.",
    "evidence_enough": True,
    "check_next": "",
}
# The alert names its namespace and deployment, so the gather step has something to read.
NAMED_ALERT = json.dumps(
    {"labels": {"alertname": "KubePodCrashLooping", "namespace": "checkout",
                "deployment": "payments-api"}}
)  # fmt: skip
READ_PER_SECOND = 35.0


def is_compact_answer(body: dict[str, Any]) -> bool:
    """Whether a request is the compact path's answer call (its reply schema asks for one)."""
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
    return "root_cause" in schema.get("properties", {})


async def investigate_named(local: Deps, store: Store) -> str:
    session = await in_process.new_session(store, alert_type="generic", alert_data=NAMED_ALERT)
    await drive(local, StepMessage(session_id=session.session_id, kind="start_session"))
    return session.session_id


def small_model_yaml(url: str, follow_up_calls: int = 3) -> str:
    return (
        provider_yaml(
            "openai-compatible", "qwen2.5-coder-1.5b-instruct", url,
            f", prompt_tokens_per_second: {READ_PER_SECOND}",
        )
        + agent_yaml(None).replace("max_iterations: 4", "max_iterations: 10")
        + f"compact_path: {{follow_up_calls: {follow_up_calls}}}\n"
    )  # fmt: skip


async def test_a_small_model_answers_first_without_tools_from_an_opening_it_reads_in_a_minute(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    def respond(call: RecordedCall) -> ScriptedReply:
        if is_compact_answer(call.body):
            return ScriptedReply(text=json.dumps(COMPACT_ANSWER), input_tokens=1800)
        return ScriptedReply(text="Summary: database password rotated.")

    openai_fake.responder = respond
    async for local in with_config(deps, store, small_model_yaml(openai_fake.base_url)):
        session_id = await investigate_named(local, store)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED, done and done.error
    assert done.gather is not None and done.gather.calls > 0  # the evidence came first
    first = openai_fake.calls[0].body
    assert is_compact_answer(first)
    assert "tools" not in first and "Tools (use the exact" not in json.dumps(first["messages"])
    assert first["max_completion_tokens"] == 600
    # What it reads fits the minute its reading speed buys (3.5 characters a token, est.).
    read = sum(len(m["content"]) for m in first["messages"]) / 3.5
    assert read <= READ_PER_SECOND * 60 * 1.1, read
    assert done.final_analysis is not None
    assert done.final_analysis.startswith("**What is broken:** The payments-api pods")
    assert f"**Root cause:** {FINAL}" in done.final_analysis
    # It cited finding 1 by number; the analysis quotes it as the opening wrote it.
    opening = first["messages"][1]["content"]
    cited = opening_findings([ConversationMessage(role="user", content=opening)])[1]
    assert f"**Evidence:**\n- {cited}" in done.final_analysis
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    assert agent.strategy == "compact"
    mcp = await store.list_mcp_interactions(agent.execution_id)
    assert mcp and all(m.call_id.startswith("gather-") for m in mcp)  # the model called none
    # The summary reads the analysis, not the conversation.
    summary = openai_fake.calls[-1].body
    assert "Final analysis of the investigation" in json.dumps(summary["messages"])


async def test_a_small_model_that_wants_more_evidence_gets_a_bounded_follow_up_with_tools(
    deps: Deps, store: Store, openai_fake: FakeOpenAI
) -> None:
    namespaces = iter(["checkout", "default", "kube-system", "payments", "other"])

    def respond(call: RecordedCall) -> ScriptedReply:
        body = call.body
        if is_compact_answer(body):
            # Unsure every time: the follow-up's bound ends it, with its last answer.
            unsure = {**COMPACT_ANSWER, "evidence_enough": False, "check_next": "the pods"}
            return ScriptedReply(text=json.dumps(unsure))
        if "response_format" not in body:
            return ScriptedReply(text="Summary: database password rotated.")
        # A model that would never stop calling tools: the follow-up's bound stops it.
        action = {"thought": "Look again.", "action": "call_tool", "tool": "kubernetes.pods_list",
                  "arguments": {"namespace": next(namespaces)}}  # fmt: skip
        return ScriptedReply(text=json.dumps(action))

    openai_fake.responder = respond
    user = small_model_yaml(openai_fake.base_url, follow_up_calls=2)
    async for local in with_config(deps, store, user):
        session_id = await investigate_named(local, store)
    done = await store.get_session(session_id)
    assert done is not None and done.status is ExecutionStatus.COMPLETED, done and done.error
    assert done.final_analysis is not None and f"**Root cause:** {FINAL}" in done.final_analysis
    [agent] = [e for e in await store.list_executions(session_id) if e.role == "agent"]
    mcp = await store.list_mcp_interactions(agent.execution_id)
    asked = [m for m in mcp if not m.call_id.startswith("gather-")]
    assert [(m.tool, m.arguments["namespace"]) for m in asked] == [
        ("pods_list", "checkout"),
        ("pods_list", "default"),
    ]
    bodies = [c.body for c in openai_fake.calls if "response_format" in c.body]
    # The answer, two tool turns, and the follow-up's answer in the same form.
    assert [is_compact_answer(b) for b in bodies] == [True, False, False, True]
    assert "tools" not in bodies[-1]
    # The follow-up keeps the opening as the answer call sent it (a prefix cache reuses it).
    opening = bodies[0]["messages"][:2]
    assert all(b["messages"][:2] == opening for b in bodies[1:])

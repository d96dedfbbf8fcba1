"""Static checks of infra/*.tf against the code it deploys (no network, no provider).

``terraform validate`` needs the google provider, which cannot be fetched
offline, so these tests parse the configuration with python-hcl2 and check what
matters: which environment each function gets (against ``tarsy.settings``),
the identities and grants, the delivery policies and the packaging.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import shutil
import tomllib
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import hcl2
import pytest
from hcl2 import SerializationOptions
from pydantic import SecretStr

from tarsy.models import AgentExecution, AlertFingerprint, AuditEvent, LLMInteraction, Session
from tarsy.persistence._firestore import (
    AUDIT,
    LLM_INTERACTIONS,
    TOOL_LISTS,
    llm_interaction_document,
)
from tarsy.persistence.store import ALERT_FINGERPRINTS, EXECUTIONS, SESSIONS, THOUGHT_SIGNATURES
from tarsy.persistence.tool_lists import tool_list_document
from tarsy.settings import ALL_FUNCTIONS, Settings, env_names, functions_reading
from tarsy.tools.base import CachedToolList
from tarsy_dev.localstack.stack import push_ack_deadline, step_function_timeout

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
OPTIONS = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)

# Terraform function resource -> (code that runs in it, entry point).
FUNCTIONS = {
    "ingest": ("ingest", "ingest"),
    "step": ("step", "step"),
    "api": ("api", "api"),
    "dead_letter": ("step", "dead_letter"),
}

# Settings with no safe default in the cloud, per function (plain environment).
REQUIRED_IN_CLOUD: dict[str, set[str]] = {
    "ingest": {"project_id", "steps_topic", "firestore_database", "public_api_url"},
    "step": {"project_id", "steps_topic", "firestore_database", "step_lease_seconds"},
    "api": {
        "project_id",
        "steps_topic",
        "firestore_database",
        "step_lease_seconds",
        "sweeper_invoker",
        "sweeper_audience",
        "iap_audience",
        "access_grants",
    },
}
# Settings that must come from Secret Manager, per function.
REQUIRED_SECRETS: dict[str, set[str]] = {"ingest": {"api_key"}}
# Settings that must never be set in the cloud.
LOCAL_ONLY = {"auth_disabled", "sns_endpoint_url"}

BASIC_ROLE = re.compile(r"roles/(owner|editor|viewer)\b")


# ─── parsing ──────────────────────────────────────────────────────────────────


@cache
def _parsed() -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {}
    for path in sorted(INFRA.glob("*.tf")):
        for key, blocks in hcl2.loads(path.read_text(), serialization_options=OPTIONS).items():
            merged.setdefault(key, []).extend(blocks)
    return merged


def _tf_text() -> str:
    return "\n".join(p.read_text() for p in sorted(INFRA.glob("*.tf")))


def resources(kind: str) -> dict[str, dict[str, Any]]:
    """All resources of one type, by name."""
    found: dict[str, dict[str, Any]] = {}
    for block in _parsed().get("resource", []):
        for name, body in block.get(kind, {}).items():
            found[name] = body
    return found


def all_resources() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for block in _parsed().get("resource", []):
        for kind, named in block.items():
            for name, body in named.items():
                yield kind, name, body


def locals_() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in _parsed().get("locals", []):
        merged.update(block)
    return merged


def variables() -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for block in _parsed().get("variable", []):
        merged.update(block)
    return merged


def one(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    assert isinstance(blocks, list) and len(blocks) == 1, blocks
    return blocks[0]


def var_default(expression: str) -> Any:
    """Default of ``${var.name}`` or ``${var.name.attr}``."""
    match = re.fullmatch(r"\$\{var\.(\w+)(?:\.(\w+))?\}", expression)
    assert match, f"not a plain variable reference: {expression}"
    default = variables()[match[1]]["default"]
    return default[match[2]] if match[2] else default


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def sa_of(expression: str) -> str:
    # A counted account (prometheus_mcp, only with var.metrics) is named by its one instance.
    match = re.fullmatch(
        r"\$\{google_service_account\.(\w+)(?:\[0\])?\.(?:email|member|id)\}", expression
    )
    assert match, f"not a service account reference: {expression}"
    return match[1]


# ─── structure ────────────────────────────────────────────────────────────────


def test_providers_are_pinned() -> None:
    providers = {}
    for block in _parsed()["terraform"]:
        for required in block.get("required_providers", []):
            providers.update(required)
    assert set(providers) >= {"google", "google-beta"}
    for name in ("google", "google-beta"):
        assert providers[name]["source"] == f"hashicorp/{name}"
        assert re.fullmatch(r"~> \d+\.\d+(\.\d+)?", providers[name]["version"])


def test_references_point_at_declared_things() -> None:
    text = _tf_text()
    declared_vars = set(variables())
    used_vars = set(re.findall(r"\bvar\.(\w+)", text))
    assert used_vars <= declared_vars, used_vars - declared_vars
    assert declared_vars <= used_vars, f"unused variables: {declared_vars - used_vars}"

    used_locals = set(re.findall(r"\blocal\.(\w+)", text))
    assert used_locals <= set(locals_()), used_locals - set(locals_())

    declared = {(kind, name) for kind, name, _ in all_resources()}
    data = {(k, n) for block in _parsed().get("data", []) for k, v in block.items() for n in v}
    for kind, name in re.findall(r"(?<![\w./])(google_\w+)\.(\w+)", text):
        assert (kind, name) in declared | data, f"{kind}.{name} is referenced but not declared"


def test_tfvars_example_names_only_declared_variables() -> None:
    example = (INFRA / "terraform.tfvars.example").read_text()
    # Top-level assignments, set or commented out ("# name = value"); not object members.
    names = set(re.findall(r"^(?:# )?([a-z_]+)\s*=", example, flags=re.MULTILINE))
    assert "project_id" in names
    assert names <= set(variables()), names - set(variables())


def test_every_function_runs_an_existing_entry_point() -> None:
    functions = resources("google_cloudfunctions2_function")
    assert set(functions) == set(FUNCTIONS)
    for name, (code, entry_point) in FUNCTIONS.items():
        build = one(functions[name]["build_config"])
        assert build["entry_point"] == entry_point
        source = one(one(build["source"])["storage_source"])
        assert source["object"] == f'${{google_storage_bucket_object.source["{code}"].name}}'
        tree = ast.parse((ROOT / "functions" / code / "main.py").read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert entry_point in defined


def test_sources_are_uploaded_under_their_md5() -> None:
    obj = resources("google_storage_bucket_object")["source"]
    assert obj["for_each"] == "${local.packages}"
    assert "filemd5(each.value)" in obj["name"]
    packages = locals_()["packages"]
    for function in _packager().FUNCTIONS:
        assert f'"{function}"' in packages
    assert "${name}.zip" in packages


# ─── identities and grants ────────────────────────────────────────────────────


def test_every_function_has_its_own_service_account() -> None:
    functions = resources("google_cloudfunctions2_function")
    accounts = set(resources("google_service_account"))
    runtime = {
        name: sa_of(one(f["service_config"])["service_account_email"])
        for name, f in functions.items()
    }
    assert len(set(runtime.values())) == len(runtime), runtime
    assert set(runtime.values()) <= accounts
    builders = {sa_of(one(f["build_config"])["service_account"]) for f in functions.values()}
    assert builders.isdisjoint(runtime.values())


def test_no_basic_roles_and_no_authoritative_bindings() -> None:
    assert not BASIC_ROLE.search(_tf_text())
    for kind, name, body in all_resources():
        assert not kind.endswith(("_iam_binding", "_iam_policy")), f"{kind}.{name} is authoritative"
        for value in strings(body):
            assert not BASIC_ROLE.search(value), f"{kind}.{name}: {value}"


def test_project_level_roles_are_the_expected_few() -> None:
    grants = resources("google_project_iam_member")
    firestore = grants["firestore_user"]
    assert firestore["role"] == "roles/datastore.user"
    assert firestore["for_each"] == "${local.function_accounts}"
    assert (
        "databases/${google_firestore_database.main.name}"
        in one(firestore["condition"])["expression"]
    )
    accounts = locals_()["function_accounts"]
    assert {
        re.sub(r"^\$\{google_service_account\.(\w+)\}$", r"\1", v) for v in accounts.values()
    } == {
        sa_of(one(f["service_config"])["service_account_email"])
        for f in resources("google_cloudfunctions2_function").values()
    }

    vertex = grants["step_vertex"]
    assert (vertex["role"], sa_of(vertex["member"])) == ("roles/aiplatform.user", "step")

    build = grants["build"]
    assert sa_of(build["member"]) == "build"
    assert "roles/logging.logWriter" in build["for_each"]

    # Only with var.telemetry: each function writes spans and metric points, nothing more.
    telemetry = grants["telemetry"]
    assert telemetry["for_each"].startswith("${var.telemetry ? {")
    assert "keys(local.function_accounts)" in telemetry["for_each"]
    assert re.findall(r'"(roles/[\w.]+)"', telemetry["for_each"]) == [
        "roles/cloudtrace.agent",
        "roles/monitoring.metricWriter",
    ]
    assert telemetry["member"] == "${local.function_accounts[each.value.account].member}"

    # Only with var.gke_cluster: the kubernetes MCP server reads the cluster's objects.
    gke = grants["kubernetes_mcp_gke"]
    assert gke["count"] == "${local.kubernetes_mcp_gke ? 1 : 0}"
    assert (gke["role"], sa_of(gke["member"])) == ("roles/container.viewer", "kubernetes_mcp")
    assert gke["project"] == "${var.gke_cluster.project}"
    # Only with var.metrics.managed_project: the prometheus MCP server reads metrics.
    metrics = grants["prometheus_mcp_monitoring_viewer"]
    assert metrics["count"] == "${local.metrics_managed ? 1 : 0}"
    assert (metrics["role"], sa_of(metrics["member"])) == (
        "roles/monitoring.viewer",
        "prometheus_mcp",
    )
    assert set(grants) == {
        "firestore_user",
        "step_vertex",
        "build",
        "telemetry",
        "kubernetes_mcp_gke",
        "prometheus_mcp_monitoring_viewer",
    }


def test_publishers_and_secret_accessors_are_per_resource() -> None:
    publishers = resources("google_pubsub_topic_iam_member")
    steps = publishers["steps_publisher"]
    assert steps["topic"] == "${google_pubsub_topic.steps.id}"
    assert steps["role"] == "roles/pubsub.publisher"
    assert {sa_of(m) for m in steps["for_each"].values()} == {"ingest", "step", "api"}

    accessors = resources("google_secret_manager_secret_iam_member")
    for grant in accessors.values():
        assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert accessors["api_key"]["secret_id"] == "${google_secret_manager_secret.api_key.id}"
    # The api takes people signed in through IAP, never the key: only ingest reads it.
    assert {sa_of(m) for m in accessors["api_key"]["for_each"].values()} == {"ingest"}
    assert sa_of(accessors["gemini_api_key"]["member"]) == "step"
    assert sa_of(accessors["pagerduty_signing_secret"]["member"]) == "ingest"
    assert sa_of(accessors["config_secret"]["member"]) == "step"
    # Every function that may end a session reads the Slack token, at run time; ingest too
    # when it takes questions asked in Slack threads (who asked, a refusal in the thread).
    slack = accessors["slack_bot_token"]
    assert slack["secret_id"] == "${google_secret_manager_secret.slack_bot_token[0].id}"
    assert set(re.findall(r"google_service_account\.(\w+)\.member", slack["for_each"])) == {
        "step",
        "dead_letter",
        "api",
        "ingest",
    }
    assert "var.slack_thread_questions ?" in slack["for_each"]
    # Only ingest verifies Slack's events; the functions that may end a session write notes.
    assert sa_of(accessors["slack_signing_secret"]["member"]) == "ingest"
    pagerduty = accessors["pagerduty_api_key"]
    assert pagerduty["secret_id"] == "${google_secret_manager_secret.pagerduty_api_key[0].id}"
    assert set(re.findall(r"google_service_account\.(\w+)\.member", pagerduty["for_each"])) == {
        "step",
        "dead_letter",
        "api",
    }
    assert "config_secret[each.key]" in accessors["config_secret"]["secret_id"]
    # Only the step function fetches runbooks (at start_session), so only it reads the token.
    runbook = accessors["runbook_token"]
    assert runbook["secret_id"] == "${google_secret_manager_secret.runbook_token[0].id}"
    assert sa_of(runbook["member"]) == "step"
    step_env = locals_()["function_env"]["step"]
    assert step_env[env_names("runbook_token_secret")[0]] == (
        "${one(google_secret_manager_secret.runbook_token[*].secret_id)}"
    )


def test_only_ingest_is_public() -> None:
    invokers = resources("google_cloud_run_v2_service_iam_member")
    public = {name for name, grant in invokers.items() if grant["member"] == "allUsers"}
    assert {invokers[n]["name"] for n in public} == {
        "${google_cloudfunctions2_function.ingest.service_config[0].service}",
    }
    functions = resources("google_cloudfunctions2_function")
    for name in ("step", "dead_letter"):
        assert one(functions[name]["service_config"])["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
        grants = [
            g
            for g in invokers.values()
            if g["name"] == f"${{google_cloudfunctions2_function.{name}.service_config[0].service}}"
        ]
        assert [sa_of(g["member"]) for g in grants] == ["pubsub_push"]
        assert all(g["role"] == "roles/run.invoker" for g in grants)


def test_the_api_is_reached_only_through_iap_and_by_the_sweeper() -> None:
    invokers = resources("google_cloud_run_v2_service_iam_member")
    api = "${google_cloudfunctions2_function.api.service_config[0].service}"
    members = sorted(g["member"] for g in invokers.values() if g["name"] == api)
    assert members == [
        "${google_project_service_identity.iap.member}",
        "${google_service_account.sweeper.member}",
    ]
    functions = resources("google_cloudfunctions2_function")
    assert one(functions["api"]["service_config"])["ingress_settings"] == "ALLOW_INTERNAL_AND_GCLB"
    backend = resources("google_compute_backend_service")["api"]
    assert one(backend["iap"])["enabled"] is True
    neg = resources("google_compute_region_network_endpoint_group")["api"]
    assert one(neg["cloud_run"])["service"] == api
    # Whoever var.access names passes the proxy; the api applies the role.
    access = resources("google_iap_web_backend_service_iam_member")["access"]
    assert access["role"] == "roles/iap.httpsResourceAccessor"
    assert access["for_each"] == "${toset(local.access_members)}"
    api_env = locals_()["function_env"]["api"]
    assert api_env[env_names("iap_audience")[0]] == "${local.iap_audience}"
    assert api_env[env_names("access_grants")[0]] == "${jsonencode(var.access)}"
    assert (
        "backendServices/${google_compute_backend_service.api.generated_id}"
        in (locals_()["iap_audience"])
    )


def test_pubsub_service_agent_can_dead_letter() -> None:
    agent = "${google_project_service_identity.pubsub.member}"
    publisher = resources("google_pubsub_topic_iam_member")["dead_letter_publisher"]
    assert (publisher["topic"], publisher["member"]) == (
        "${google_pubsub_topic.dead_letter.id}",
        agent,
    )
    subscriber = resources("google_pubsub_subscription_iam_member")["dead_letter_subscriber"]
    assert subscriber["subscription"] == "${google_pubsub_subscription.step.id}"
    assert (subscriber["role"], subscriber["member"]) == ("roles/pubsub.subscriber", agent)
    token = resources("google_service_account_iam_member")["pubsub_push_token"]
    assert token["member"] == agent
    assert token["service_account_id"] == "${google_service_account.pubsub_push.name}"


# ─── delivery ─────────────────────────────────────────────────────────────────


def test_step_trigger_retries_with_backoff_then_dead_letters() -> None:
    subscriptions = resources("google_pubsub_subscription")
    step = subscriptions["step"]
    assert step["topic"] == "${google_pubsub_topic.steps.id}"
    assert "dead_letter_policy" in step, "the step trigger has no dead-letter policy"
    assert "retry_policy" in step, "the step trigger has no retry policy"
    retry = one(step["retry_policy"])
    assert var_default(retry["minimum_backoff"]) == "10s"
    assert var_default(retry["maximum_backoff"]) == "600s"
    dead = one(step["dead_letter_policy"])
    assert dead["dead_letter_topic"] == "${google_pubsub_topic.dead_letter.id}"
    assert 5 <= var_default(dead["max_delivery_attempts"]) <= 100
    push = one(step["push_config"])
    assert push["push_endpoint"] == "${google_cloudfunctions2_function.step.service_config[0].uri}"
    assert sa_of(one(push["oidc_token"])["service_account_email"]) == "pubsub_push"
    # A step must finish inside the ack deadline, or Pub/Sub delivers it again meanwhile.
    timeout = var_default(
        one(resources("google_cloudfunctions2_function")["step"]["service_config"])[
            "timeout_seconds"
        ]
    )
    assert step["ack_deadline_seconds"] == "${min(600, var.step_function.timeout_seconds + 30)}"
    assert timeout < min(600, timeout + 30)

    handler = subscriptions["dead_letter"]
    assert handler["topic"] == "${google_pubsub_topic.dead_letter.id}"
    assert "retry_policy" in handler and "dead_letter_policy" not in handler
    endpoint = one(handler["push_config"])["push_endpoint"]
    assert endpoint == "${google_cloudfunctions2_function.dead_letter.service_config[0].uri}"


def test_the_local_stack_acks_steps_as_late_as_production_does() -> None:
    """A step as long as its timeout is never redelivered while it runs, locally or deployed."""
    step = resources("google_pubsub_subscription")["step"]
    formula = re.fullmatch(
        r"\$\{min\((\d+), var\.step_function\.timeout_seconds \+ (\d+)\)\}",
        step["ack_deadline_seconds"],
    )
    assert formula is not None, step["ack_deadline_seconds"]
    cap, margin = int(formula[1]), int(formula[2])
    for timeout in (60, 300, 540, 590):
        assert push_ack_deadline(timeout) == min(cap, timeout + margin)
    deployed_timeout = variables()["step_function"]["default"]["timeout_seconds"]
    assert step_function_timeout({}) == deployed_timeout
    assert step_function_timeout({"TARSY_STEP_TIMEOUT_SECONDS": "120"}) == 120


def test_messages_are_retained() -> None:
    topics = resources("google_pubsub_topic")
    assert topics["steps"]["name"] == "${var.steps_topic}"
    assert variables()["steps_topic"]["default"] == Settings.model_fields["steps_topic"].default
    for body in [*topics.values(), *resources("google_pubsub_subscription").values()]:
        assert re.fullmatch(r"\d+s", var_default(body["message_retention_duration"]))


@pytest.mark.parametrize(("job_name", "path"), [("sweeper", "/sweep"), ("retention", "/retention")])
def test_sweeper_job_calls_the_api_with_the_identity_the_api_expects(
    job_name: str, path: str
) -> None:
    job = resources("google_cloud_scheduler_job")[job_name]
    target = one(job["http_target"])
    assert target["http_method"] == "POST"
    assert target["uri"] == "${local.api_url}" + path
    token = one(target["oidc_token"])
    api_env = locals_()["function_env"]["api"]
    assert token["service_account_email"] == api_env[env_names("sweeper_invoker")[0]]
    assert token["audience"] == api_env[env_names("sweeper_audience")[0]] == "${local.api_url}"
    assert locals_()["api_url"].endswith("/${local.names.api}")


def test_retention_is_a_job_of_its_own_on_its_own_schedule() -> None:
    jobs = resources("google_cloud_scheduler_job")
    assert jobs["retention"]["schedule"] == "${var.retention_schedule}"
    assert jobs["sweeper"]["schedule"] == "${var.sweep_schedule}"
    assert variables()["retention_schedule"]["default"] == "*/5 * * * *"


# ─── Firestore ────────────────────────────────────────────────────────────────


def test_thought_signatures_expire_by_ttl() -> None:
    fields = resources("google_firestore_field")
    # The collections with their own clocks; the retention policies are in test_monitoring.
    ttl = [f for f in fields.values() if "ttl_config" in f and "for_each" not in f]
    assert sorted((f["collection"], f["field"]) for f in ttl) == [
        (ALERT_FINGERPRINTS, "expire_at"),
        (THOUGHT_SIGNATURES, "expire_at"),
    ]
    assert "expire_at" in (ROOT / "shared" / "tarsy" / "persistence" / "steps.py").read_text()
    assert "expire_at" in AlertFingerprint.model_fields


def test_the_fields_stored_as_json_text_are_not_indexed() -> None:
    exempt = resources("google_firestore_field")["unindexed_json"]
    assert exempt["for_each"] == "${local.unindexed_json_fields}"
    assert (exempt["collection"], exempt["field"]) == ("${each.key}", "${each.value}")
    assert exempt["index_config"] == [{}] and "ttl_config" not in exempt
    # The fields the persistence layer writes as one JSON string, by their collections.
    interaction = LLMInteraction(step=1, model="m", provider="p", request={"messages": []})
    tools = CachedToolList(server="s", tools=[], fetched_at=datetime(2026, 11, 28, tzinfo=UTC))
    as_text = {
        LLM_INTERACTIONS: [k for k, v in llm_interaction_document(interaction).items()
                           if isinstance(v, str) and v.startswith("{")],
        TOOL_LISTS: [k for k, v in tool_list_document(tools).items()
                     if isinstance(v, str) and v.startswith("[")],
    }  # fmt: skip
    assert locals_()["unindexed_json_fields"] == {c: f for c, [f] in as_text.items()}


def _store_queries() -> list[tuple[str, tuple[str, ...]]]:
    """(collection, filtered fields) of every top-level query of tarsy/persistence/."""
    constants = {"EXECUTIONS": EXECUTIONS, "SESSIONS": SESSIONS}
    modules = [
        ast.parse(m.read_text()) for m in (ROOT / "shared" / "tarsy" / "persistence").glob("*.py")
    ]
    # A field may be named by a module-level string constant (retention's due field).
    names = {
        target.id: node.value.value
        for tree in modules
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }
    queries = []
    inner: set[int] = set()
    for node in (node for tree in modules for node in ast.walk(tree)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if id(node) in inner:
            continue
        fields: list[str] = []
        current: ast.expr = node
        while isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
            inner.add(id(current))
            if current.func.attr == "where":
                (keyword,) = [k for k in current.keywords if k.arg == "filter"]
                assert isinstance(keyword.value, ast.Call)
                field = keyword.value.args[0]
                if isinstance(field, ast.Name):
                    # A field a loop names (the ledger's thread fields) is no module
                    # constant: kept by its variable's name, so a query filtering it with
                    # another field still finds no index and fails.
                    fields.insert(0, names.get(field.id, f"<{field.id}>"))
                else:
                    assert isinstance(field, ast.Constant)
                    fields.insert(0, str(field.value))
            if current.func.attr == "collection" and isinstance(
                current.func.value, ast.Attribute | ast.Name
            ):
                name = current.args[0]
                client = current.func.value
                client_name = client.attr if isinstance(client, ast.Attribute) else client.id
                if client_name in ("_db", "db") and isinstance(name, ast.Name):
                    if fields and name.id in constants:
                        queries.append((constants[name.id], tuple(fields)))
                break
            current = current.func.value
    return queries


def test_store_queries_have_composite_indexes() -> None:
    indexes = {
        (i["collection"], tuple(f["field_path"] for f in i["fields"]))
        for i in resources("google_firestore_index").values()
    }
    queries = _store_queries()
    # The sweeper's queries, found in the code rather than copied here; the due-time
    # ones filter on one field, which Firestore indexes by itself.
    assert (EXECUTIONS, ("due_at",)) in queries
    assert (SESSIONS, ("due_at",)) in queries
    assert (SESSIONS, ("status", "deadline")) in queries
    for collection, fields in queries:
        if len(set(fields)) > 1:
            assert (collection, fields) in indexes, f"no composite index for {collection} {fields}"
    model_fields: dict[str, set[str]] = {
        EXECUTIONS: set(AgentExecution.model_fields),
        SESSIONS: set(Session.model_fields),
        # The audit's collection group (GET /audit filters by actor or action, newest first).
        AUDIT: set(AuditEvent.model_fields),
    }
    for collection, paths in indexes:
        assert set(paths) <= model_fields[collection], (collection, paths)


def test_firestore_is_native_and_named_by_the_variable() -> None:
    database = resources("google_firestore_database")["main"]
    assert database["type"] == "FIRESTORE_NATIVE"
    assert database["name"] == "${var.firestore_database}"
    default = Settings.model_fields["firestore_database"].default
    assert variables()["firestore_database"]["default"] == default


# ─── sizes ────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_memory_timeout_and_scaling_are_set(name: str) -> None:
    service = one(resources("google_cloudfunctions2_function")[name]["service_config"])
    memory = var_default(service["available_memory"])
    assert re.fullmatch(r"\d+(Mi|Gi)", memory)
    timeout = var_default(service["timeout_seconds"])
    assert 0 < timeout <= 3600
    assert var_default(service["max_instance_count"]) >= 1
    concurrency = var_default(service["max_instance_request_concurrency"])
    # More than one request per instance needs at least one whole CPU.
    assert concurrency == 1 or float(var_default(service["available_cpu"])) >= 1


def test_step_timing_settings_come_from_the_function_and_the_locals() -> None:
    """The step's budget is its function's timeout; its lease is short and renewed."""
    step_env = locals_()["function_env"]["step"]
    timeout = "${tostring(var.step_function.timeout_seconds)}"
    assert step_env["TARSY_STEP_TIMEOUT_SECONDS"] == timeout
    assert step_env["TARSY_STEP_LEASE_SECONDS"] == "${tostring(local.step_lease_seconds)}"
    lease = int(locals_()["step_lease_seconds"])
    # Renewed every third of it: short enough that a dead step is re-run within ~2 minutes.
    assert 3 <= lease <= 90
    for function in ("ingest", "step", "api"):
        assert locals_()["function_env"][function]["TARSY_STEP_DUE_SECONDS"] == (
            "${tostring(local.step_due_seconds)}"
        )


# ─── environment vs. tarsy.settings ───────────────────────────────────────────


def _field_by_env_name() -> dict[str, str]:
    return {env_names(field)[0]: field for field in Settings.model_fields}


def _is_secret(field: str) -> bool:
    annotation = Settings.model_fields[field].annotation
    return annotation is SecretStr or SecretStr in getattr(annotation, "__args__", ())


def test_settings_metadata_is_consistent() -> None:
    for field in Settings.model_fields:
        assert env_names(field), field
        assert set(functions_reading(field)) <= set(ALL_FUNCTIONS), field
    assert set(REQUIRED_IN_CLOUD) | set(REQUIRED_SECRETS) <= set(ALL_FUNCTIONS)


def test_functions_use_the_environment_of_their_code() -> None:
    for name, (code, _) in FUNCTIONS.items():
        service = one(resources("google_cloudfunctions2_function")[name]["service_config"])
        environment = service["environment_variables"]
        assert re.search(rf"local\.function_env\.{code}\b", environment), environment
        # The values the configuration names ({env: MCP_...}) go to the step function only.
        assert ("local.config_env" in environment) == (name == "step"), name
        secret_blocks = [
            d["secret_environment_variables"]
            for d in service.get("dynamic", [])
            if "secret_environment_variables" in d
        ]
        if name == "dead_letter":
            # Same code and settings as step; it only writes Firestore, so no secrets.
            assert secret_blocks == []
            continue
        block = one(secret_blocks)
        assert f"local.function_secret_env.{code}" in block["for_each"]
        content = one(block["content"])
        assert content["key"] == "${secret_environment_variables.key}"
        assert content["secret"] == "${secret_environment_variables.value}"


@pytest.mark.parametrize("function", ALL_FUNCTIONS)
def test_environment_matches_settings(function: str) -> None:
    plain: dict[str, Any] = locals_()["function_env"][function]
    secret: dict[str, Any] = locals_()["function_secret_env"].get(function, {})
    by_env = _field_by_env_name()

    assert not set(plain) & set(secret)
    for env, value in {**plain, **secret}.items():
        assert env in by_env, f"{function}: {env} is not the first env name of any Settings field"
        field = by_env[env]
        assert function in functions_reading(field), f"{function} does not read {field} ({env})"
        assert field not in LOCAL_ONLY, f"{function}: {env} is for local runs only"
        assert value is not None, f"{function}: {env} is always null; leave it out instead"

    for env in plain:
        assert not _is_secret(by_env[env]), f"{function}: {env} is a secret in plain environment"
    for env in secret:
        assert _is_secret(by_env[env]), f"{function}: {env} is not a secret setting"

    for field in REQUIRED_IN_CLOUD.get(function, set()):
        assert env_names(field)[0] in plain, f"{function} must get {field}"
        assert "null" not in str(plain[env_names(field)[0]]), f"{function}: {field} may be unset"
    for field in REQUIRED_SECRETS.get(function, set()):
        assert env_names(field)[0] in secret, f"{function} must get {field} from Secret Manager"


def test_every_setting_a_function_needs_in_the_cloud_is_listed() -> None:
    """A field without a default that a function reads must be in REQUIRED_IN_CLOUD."""
    for field, info in Settings.model_fields.items():
        if info.is_required():
            for function in functions_reading(field):
                assert field in REQUIRED_IN_CLOUD[function] | REQUIRED_SECRETS.get(function, set())


def test_config_secrets_cannot_shadow_settings() -> None:
    validation = one(variables()["config_secrets"]["validation"])["condition"]
    assert 'regex("^(MCP|LLM)_[A-Z0-9_]+$", name)' in validation
    every_env_name = {name for field in Settings.model_fields for name in env_names(field)}
    assert not {n for n in every_env_name if n.startswith(("MCP_", "LLM_"))}
    assert "local.config_secret_env" in _tf_text()
    uses = [
        name
        for name, f in resources("google_cloudfunctions2_function").items()
        if "local.config_secret_env" in str(f)
    ]
    assert uses == ["step"]


# ─── outputs and skips ────────────────────────────────────────────────────────


def test_outputs() -> None:
    outputs: dict[str, Any] = {}
    for block in _parsed()["output"]:
        outputs.update(block)
    assert outputs["ingest_url"]["value"] == "${google_cloudfunctions2_function.ingest.url}"
    # People open the api through the load balancer and its proxy, not the function's URL.
    assert outputs["api_url"]["value"] == "https://${local.api_domain}"
    assert outputs["api_function_url"]["value"] == "${google_cloudfunctions2_function.api.url}"
    assert "console.cloud.google.com/firestore" in outputs["firestore_console_url"]["value"]


def test_every_checkov_skip_is_justified() -> None:
    skips = re.findall(r"#\s*checkov:skip=([A-Z_0-9]+)(?::(.*))?", _tf_text())
    assert skips
    for check, reason in skips:
        assert check.startswith("CKV_")
        assert reason and len(reason.strip()) >= 20, f"{check} skipped without a reason"


# ─── packaging ────────────────────────────────────────────────────────────────


@cache
def _packager() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "package_functions", ROOT / "scripts" / "package_functions.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packaging_is_reproducible(tmp_path: Path) -> None:
    packager = _packager()
    first, second = tmp_path / "a", tmp_path / "b"
    assert packager.main(["--out", str(first)]) == 0
    assert packager.main(["--out", str(second)]) == 0
    for function in packager.FUNCTIONS:
        one_zip, other_zip = first / f"{function}.zip", second / f"{function}.zip"
        assert one_zip.read_bytes() == other_zip.read_bytes(), function


@pytest.mark.parametrize("function", ["ingest", "step", "api"])
def test_package_contents(tmp_path: Path, function: str) -> None:
    path = _packager().build_zip(function, tmp_path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        assert {"main.py", "tarsy/__init__.py", "requirements.txt"} <= set(names)
        assert "tarsy/settings.py" in names and "tarsy/config/builtin.yaml" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in archive.infolist())
        main = ROOT / "functions" / function / "main.py"
        assert archive.read("main.py") == main.read_bytes()
        requirements = archive.read("requirements.txt").decode().splitlines()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [line for line in requirements if not line.startswith("#")] == dependencies


def test_package_changes_with_its_input(tmp_path: Path) -> None:
    packager = _packager()
    root = tmp_path / "src"
    shutil.copytree(ROOT / "shared" / "tarsy", root / "shared" / "tarsy")
    shutil.copytree(ROOT / "functions", root / "functions")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "shared" / "tarsy" / "__pycache__").mkdir(exist_ok=True)
    (root / "shared" / "tarsy" / "__pycache__" / "junk.cpython-311.pyc").write_bytes(b"x")

    before = packager.build_zip("api", tmp_path / "one", root=root).read_bytes()
    (root / "shared" / "tarsy" / "api.py").write_text("# changed\n", encoding="utf-8")
    after = packager.build_zip("api", tmp_path / "two", root=root).read_bytes()
    assert hashlib.md5(before).digest() != hashlib.md5(after).digest()

    config = tmp_path / "mine.yaml"
    config.write_text("agents: {}\n", encoding="utf-8")
    with_config = packager.build_zip("api", tmp_path / "three", root=root, config=config)
    with zipfile.ZipFile(with_config) as archive:
        assert archive.read(packager.CONFIG_NAME) == config.read_bytes()
        assert not [n for n in archive.namelist() if "__pycache__" in n]
    assert '"/workspace/tarsy.yaml"' in locals_()["function_env"]["step"]["TARSY_CONFIG_PATH"]


def test_a_bad_packaged_configuration_stops_the_packaging(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "llm_providers:\n  default: {backend: google-native, model: gpt-4o}\n"
        "agents:\n  investigator: {mcp_servers: [nowhere]}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        _packager().main(["--out", str(out), "--config", str(bad)])
    message = str(stopped.value)
    assert message.startswith(f"not packaging: invalid configuration in {bad}")
    assert "agents.investigator.mcp_servers.0: unknown MCP server 'nowhere'" in message
    assert not out.exists()


def test_a_good_packaged_configuration_is_packed(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("agents:\n  investigator: {custom_instructions: Be brief.}\n")
    assert (
        _packager().main(["--out", str(tmp_path), "--config", str(good), "--function", "step"]) == 0
    )
    with zipfile.ZipFile(tmp_path / "step.zip") as archive:
        assert archive.read("tarsy.yaml") == good.read_bytes()

"""The deployed ``prometheus`` MCP server: infra/prometheus_mcp.tf and the configuration it serves.

Deployed, the built-in configuration's ``prometheus`` server is a private Cloud Run
service running prometheus-mcp-server, which only the step function may invoke (an ID
token from its own identity), in front of either Managed Service for Prometheus (a GMP
frontend sidecar signing each query with the service's identity, roles/monitoring.viewer)
or a team's own Prometheus (a token or password from Secret Manager). Everything exists
only with ``var.metrics``. These tests read the Terraform as python-hcl2 parses it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import yaml

from tarsy.config.loader import validate_config
from tarsy.config.schema import SecretRef

from .test_terraform import _packager, locals_, one, resources, sa_of, variables


def service() -> dict[str, Any]:
    return resources("google_cloud_run_v2_service")["prometheus_mcp"]


def template() -> dict[str, Any]:
    found = service()["template"]
    assert isinstance(found, list)
    return one(found)


def dynamic(block: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    entries = block.get("dynamic", [])
    assert isinstance(entries, list)
    return [entry[kind] for entry in entries if kind in entry]


def test_everything_exists_only_when_metrics_is_set() -> None:
    assert variables()["metrics"]["default"] is None
    counted = [
        resources("google_service_account")["prometheus_mcp"],
        resources("google_artifact_registry_repository")["prometheus_mcp"],
        service(),
        resources("google_cloud_run_v2_service_iam_member")["step_invokes_prometheus_mcp"],
    ]
    assert all(r["count"] == "${local.metrics_enabled ? 1 : 0}" for r in counted)
    assert locals_()["metrics_enabled"] == "${var.metrics != null}"


def test_the_server_runs_a_digest_pinned_image_through_a_remote_repository() -> None:
    [container] = template()["containers"]
    assert container["name"] == "prometheus-mcp-server"
    assert container["image"].endswith(
        "${google_artifact_registry_repository.prometheus_mcp[0].repository_id}"
        "/${var.prometheus_mcp_image}"
    )
    validation = one(variables()["prometheus_mcp_image"]["validation"])
    assert "@sha256:[0-9a-f]{64}$" in validation["condition"]
    repository = resources("google_artifact_registry_repository")["prometheus_mcp"]
    assert repository["mode"] == "REMOTE_REPOSITORY"
    precondition = one(one(service()["lifecycle"])["precondition"])
    assert "var.prometheus_mcp_image != null" in precondition["condition"]


def test_it_serves_streamable_http_statelessly_without_links() -> None:
    env = locals_()["prometheus_mcp_env"]
    for setting in (
        'PROMETHEUS_MCP_SERVER_TRANSPORT = "http"',
        'PROMETHEUS_MCP_STATELESS_HTTP = "true"',
        'PROMETHEUS_DISABLE_LINKS = "true"',
        'PROMETHEUS_URL = local.metrics_managed ? "http://localhost:${local.gmp_frontend_port}"'
        " : var.metrics.url",
    ):
        assert setting in env


def test_only_the_step_function_may_invoke_it() -> None:
    grants = [
        g
        for g in resources("google_cloud_run_v2_service_iam_member").values()
        if g["name"] == "${google_cloud_run_v2_service.prometheus_mcp[0].name}"
    ]
    assert [(g["role"], sa_of(g["member"])) for g in grants] == [("roles/run.invoker", "step")]
    assert sa_of(template()["service_account"]) == "prometheus_mcp"


def test_managed_prometheus_is_read_by_a_frontend_sidecar_with_the_services_identity() -> None:
    [sidecar] = dynamic(template(), "containers")
    assert sidecar["for_each"] == "${local.metrics_managed ? [1] : []}"
    content = one(sidecar["content"])
    assert content["name"] == "gmp-frontend"
    assert "--query.project-id=${var.metrics.managed_project}" in content["args"]
    grant = resources("google_project_iam_member")["prometheus_mcp_monitoring_viewer"]
    assert (grant["role"], grant["project"]) == (
        "roles/monitoring.viewer",
        "${var.metrics.managed_project}",
    )


def test_a_teams_prometheus_credential_comes_from_secret_manager() -> None:
    [container] = template()["containers"]
    [_, secret_env] = dynamic(container, "env")
    ref = one(one(one(secret_env["content"])["value_source"])["secret_key_ref"])
    assert ref["secret"] == "${google_secret_manager_secret.prometheus_credential[0].secret_id}"
    accessor = resources("google_secret_manager_secret_iam_member")["prometheus_credential"]
    assert accessor["role"] == "roles/secretmanager.secretAccessor"
    assert sa_of(accessor["member"]) == "prometheus_mcp"
    assert '"PROMETHEUS_TOKEN" : "PROMETHEUS_PASSWORD"' in locals_()["prometheus_mcp_secret_env"]


def test_the_deployed_prometheus_server_is_the_http_service_with_the_step_functions_id_token(
    tmp_path: Path,
) -> None:
    path = _packager().build_zip("step", tmp_path)
    with zipfile.ZipFile(path) as archive:
        raw: dict[str, Any] = yaml.safe_load(archive.read("tarsy/config/builtin.yaml"))
    for provider in raw["llm_providers"].values():
        provider.setdefault("model", "gemini-2.5-flash")
    config = validate_config(raw, "packaged built-in configuration")
    server = config.mcp_servers["prometheus"]
    assert (server.transport, server.auth) == ("http", "google-id-token")
    assert server.url == SecretRef(env="MCP_PROMETHEUS_URL")
    assert '"MCP_PROMETHEUS_URL" => "${service.uri}/mcp"' in locals_()["config_env"]
    assert config.agents["metrics-investigator"].mcp_servers == ["prometheus", "kubernetes"]

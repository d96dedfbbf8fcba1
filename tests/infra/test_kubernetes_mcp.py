"""The deployed ``kubernetes`` MCP server: infra/kubernetes_mcp.tf and the configuration it serves.

Deployed, the built-in configuration's ``kubernetes`` server must be the
private Cloud Run service running kubernetes-mcp-server's published image,
reached over HTTP with the step function's ID token, and no MCP server of the
packaged configuration may run code the archives leave out (the demo cluster,
test servers). These tests read the Terraform as python-hcl2 parses it and
the configuration as the archive holds it.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tarsy.config.loader import validate_config
from tarsy.config.schema import SecretRef
from tarsy.settings import Settings, env_names

from .test_terraform import _packager, locals_, one, resources, sa_of, variables

SERVICE = "${google_cloud_run_v2_service.kubernetes_mcp.name}"


def service() -> dict[str, Any]:
    return resources("google_cloud_run_v2_service")["kubernetes_mcp"]


def template() -> dict[str, Any]:
    found = service()["template"]
    assert isinstance(found, list)
    template: dict[str, Any] = one(found)
    return template


def main_container() -> dict[str, Any]:
    containers = template()["containers"]
    assert isinstance(containers, list)
    container: dict[str, Any] = one(containers)
    return container


def dynamic_blocks(block: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    entries = block.get("dynamic", [])
    assert isinstance(entries, list)
    return [entry[kind] for entry in entries if kind in entry]


# ─── the service ──────────────────────────────────────────────────────────────


def test_the_service_runs_the_published_image_pinned_by_digest_through_a_remote_repository() -> (
    None
):
    image = variables()["kubernetes_mcp_image"]["default"]
    assert re.fullmatch(r"containers/kubernetes_mcp_server@sha256:[0-9a-f]{64}", image)
    assert "@sha256:" in one(variables()["kubernetes_mcp_image"]["validation"])["condition"]
    assert variables()["kubernetes_mcp_registry"]["default"] == "https://quay.io"
    repository = resources("google_artifact_registry_repository")["kubernetes_mcp"]
    assert (repository["format"], repository["mode"]) == ("DOCKER", "REMOTE_REPOSITORY")
    upstream = one(one(one(repository["remote_repository_config"])["docker_repository"])[
        "custom_repository"
    ])  # fmt: skip
    assert upstream["uri"] == "${var.kubernetes_mcp_registry}"
    assert main_container()["image"] == "${local.kubernetes_mcp_image}"
    local_image = locals_()["kubernetes_mcp_image"]
    assert local_image.startswith("${var.region}-docker.pkg.dev/${var.project_id}/")
    assert "google_artifact_registry_repository.kubernetes_mcp.repository_id" in local_image
    assert local_image.endswith("/${var.kubernetes_mcp_image}")


def test_the_deployed_image_is_the_version_the_local_stack_and_the_tests_run() -> None:
    root = Path(__file__).resolve().parents[2]
    version = locals_()["kubernetes_mcp_version"]
    pinned = json.loads((root / "package.json").read_text())["optionalDependencies"]
    assert pinned["kubernetes-mcp-server-linux-amd64"] == version
    image = variables()["kubernetes_mcp_image"]
    assert (
        f"v{version} (quay.io/containers/kubernetes_mcp_server:v{version})"
        in (image["description"])
    )
    assert "${local.kubernetes_mcp_version}" in service()["description"]


def test_the_server_is_read_only_stateless_and_reads_the_mounted_kubeconfig() -> None:
    args = main_container()["args"]
    assert isinstance(args, list)
    assert {"--read-only", "--stateless"} <= set(args)
    assert args[args.index("--toolsets") + 1] == '${join(",", var.kubernetes_mcp_toolsets)}'
    # configuration_view ("config") would print the kubeconfig to the model.
    assert variables()["kubernetes_mcp_toolsets"]["default"] == ["core"]
    assert args[args.index("--kubeconfig") + 1] == "${local.kubeconfig_dir}/kubeconfig"
    assert args[args.index("--port") + 1] == "${tostring(local.kubernetes_mcp_port)}"
    mount = one(main_container()["volume_mounts"])
    assert (mount["name"], mount["mount_path"]) == ("kubeconfig", "${local.kubeconfig_dir}")
    volumes = template()["volumes"]
    assert isinstance(volumes, list)
    secret = one(one(volumes)["secret"])
    assert secret["secret"] == "${google_secret_manager_secret.kubeconfig.secret_id}"
    assert one(secret["items"]) == {"version": "latest", "path": "kubeconfig"}


def test_only_the_step_function_may_invoke_it_as_its_own_identity() -> None:
    assert template()["service_account"] == "${google_service_account.kubernetes_mcp.email}"
    grants = [
        g
        for g in resources("google_cloud_run_v2_service_iam_member").values()
        if g["name"] == SERVICE
    ]
    assert [(g["role"], sa_of(g["member"])) for g in grants] == [("roles/run.invoker", "step")]
    # Nothing else reaches it: no public member, no authoritative binding on it.
    assert not resources("google_cloud_run_v2_service_iam_binding")
    assert not resources("google_cloud_run_v2_service_iam_policy")
    accessors = resources("google_secret_manager_secret_iam_member")
    kubeconfig = accessors["kubeconfig"]
    assert kubeconfig["secret_id"] == "${google_secret_manager_secret.kubeconfig.id}"
    assert sa_of(kubeconfig["member"]) == "kubernetes_mcp"


def test_private_clusters_are_reached_through_direct_vpc_egress() -> None:
    [vpc] = dynamic_blocks(template(), "vpc_access")
    assert vpc["for_each"] == (
        "${var.kubernetes_mcp_network == null ? [] : [var.kubernetes_mcp_network]}"
    )
    content = one(vpc["content"])
    assert content["egress"] == "PRIVATE_RANGES_ONLY"
    assert one(content["network_interfaces"]) == {
        "network": "${vpc_access.value.network}",
        "subnetwork": "${vpc_access.value.subnetwork}",
    }
    assert "network" in variables()["kubernetes_mcp_network"]["type"]
    assert "subnetwork" in variables()["kubernetes_mcp_network"]["type"]
    assert variables()["kubernetes_mcp_network"]["default"] is None


def test_a_gke_cluster_is_read_with_the_service_identity_through_a_refreshed_token_file() -> None:
    version = resources("google_secret_manager_secret_version")["gke_kubeconfig"]
    assert version["count"] == "${local.kubernetes_mcp_gke ? 1 : 0}"
    assert 'tokenFile = "${local.gke_token_dir}/token"' in version["secret_data"]
    assert "cluster_ca_certificate" in version["secret_data"]
    [sidecar] = dynamic_blocks(template(), "containers")
    assert sidecar["for_each"] == "${local.kubernetes_mcp_gke ? [1] : []}"
    content = one(sidecar["content"])
    assert content["image"] == "${var.gke_token_image}"
    assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", variables()["gke_token_image"]["default"])
    assert one(content["volume_mounts"])["mount_path"] == "${local.gke_token_dir}"
    script = locals_()["gke_token_script"]
    assert "computeMetadata/v1/instance/service-accounts/default/token" in script
    # The MCP server starts once the sidecar's probe says the first token is written.
    assert main_container()["depends_on"] == '${local.kubernetes_mcp_gke ? ["gke-token"] : []}'
    [volume] = dynamic_blocks(template(), "volumes")
    assert one(one(volume["content"])["empty_dir"])["medium"] == "MEMORY"


# ─── the step function finds it, the configuration names it ───────────────────


def test_the_step_function_gets_the_service_url_under_the_name_the_configuration_reads() -> None:
    config_env = locals_()["config_env"]
    # The prometheus server's URL joins it only when var.metrics is set (prometheus_mcp.tf).
    assert config_env == (
        '${merge({MCP_KUBERNETES_URL = "${google_cloud_run_v2_service.kubernetes_mcp.uri}/mcp"}, '
        "{for service in google_cloud_run_v2_service.prometheus_mcp : "
        '"MCP_PROMETHEUS_URL" => "${service.uri}/mcp"})}'
    )
    names = set(re.findall(r'"?(MCP_[A-Z_]+)"?\s*(?:=|=>)', config_env))
    assert names == {"MCP_KUBERNETES_URL", "MCP_PROMETHEUS_URL"}
    # Not a setting (the functions would warn about an unknown TARSY_ variable).
    every_setting = {name for field in Settings.model_fields for name in env_names(field)}
    assert not names & every_setting


@pytest.fixture(scope="module")
def packaged_builtin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The built-in configuration as the step function's archive holds it."""
    path = _packager().build_zip("step", tmp_path_factory.mktemp("zip"))
    with zipfile.ZipFile(path) as archive:
        raw = yaml.safe_load(archive.read("tarsy/config/builtin.yaml"))
    assert isinstance(raw, dict)
    return raw


def test_the_deployed_kubernetes_server_is_the_http_service_and_not_a_command(
    packaged_builtin: dict[str, Any],
) -> None:
    for provider in packaged_builtin["llm_providers"].values():
        provider.setdefault("model", "gemini-2.5-flash")
    config = validate_config(packaged_builtin, "packaged built-in configuration")
    server = config.mcp_servers["kubernetes"]
    assert server.transport == "http"
    assert server.command is None and server.args == []
    assert server.url == SecretRef(env="MCP_KUBERNETES_URL")
    assert server.auth == "google-id-token"
    assert f"{server.url.env} =" in locals_()["config_env"]


def test_the_deployed_configuration_names_no_mcp_server_that_runs_development_code(
    packaged_builtin: dict[str, Any],
) -> None:
    for provider in packaged_builtin["llm_providers"].values():
        provider.setdefault("model", "gemini-2.5-flash")
    config = validate_config(packaged_builtin, "packaged built-in configuration")
    assert _packager().undeployable_servers(config.mcp_servers) == []
    assert all(server.transport == "http" for server in config.mcp_servers.values())


@pytest.mark.parametrize(
    ("server", "why"),
    [
        (
            "{transport: stdio, command: python, args: [-m, tarsy_dev.demo_cluster]}",
            "kubernetes: runs module 'tarsy_dev.demo_cluster', which is not deployed",
        ),
        (
            "{transport: stdio, command: python, args: [tests/integration/trouble_mcp_server.py]}",
            "kubernetes: runs 'tests/integration/trouble_mcp_server.py', a file the archives "
            "do not hold",
        ),
    ],
    ids=["the demo cluster", "a test server"],
)
def test_packaging_stops_at_a_configuration_whose_mcp_server_runs_development_code(
    tmp_path: Path, server: str, why: str
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"mcp_servers:\n  kubernetes: {server}\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        _packager().main(["--out", str(out), "--config", str(mine)])
    assert str(stopped.value) == (
        "not packaging: MCP servers that would run development code in the cloud:\n"
        f"  mcp_servers.{why}"
    )
    assert not out.exists()


def test_a_packed_server_module_or_another_program_may_run_over_stdio(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "mcp_servers:\n"
        "  packed: {transport: stdio, command: python, args: [-m, tarsy.tools.mcp_client]}\n"
        "  theirs: {transport: stdio, command: /usr/local/bin/kubernetes-mcp-server}\n",
        encoding="utf-8",
    )
    assert (
        _packager().main(["--out", str(tmp_path), "--config", str(mine), "--function", "step"]) == 0
    )

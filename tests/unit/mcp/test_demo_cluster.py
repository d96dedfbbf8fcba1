"""The demo cluster's scenarios and its Kubernetes API, in process.

The real clients (kubectl, kubernetes-mcp-server) judge the API in
``tests/integration/test_kubernetes_api.py``; these tests pin the shapes they
rely on (reference: ../shared/reference/kubernetes-api.md).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tarsy.models import AlertSubmission
from tarsy_dev.demo_cluster import (
    DEFAULT_SCENARIO,
    TOOL_NAMES,
    build_app,
    load_scenario,
    scenario_names,
)
from tarsy_dev.demo_cluster.cluster import (
    Cluster,
    cpu_millicores,
    human_duration,
    memory_bytes,
    on_the_clock,
    plural,
)
from tarsy_dev.demo_cluster.kube_api import ServedScenario, main
from tarsy_dev.demo_cluster.models import Scenario

SCENARIOS = [
    "crashloop-bad-configmap",
    "oom-killed",
    "image-pull-error",
    "expired-tls-cert",
    "noisy-neighbour",
    "ledger-two-causes",
    "invoice-red-herring",
    "catalog-quota-events",
    "media-evictions-flaky-api",
    "cart-victim-networkpolicy",
    "notifier-self-resolved",
    "marketplace-noisy-namespace",
]
# Scenarios whose alert comes from a Prometheus rule on their metrics history
# (tests/unit/mcp/test_scenario_metrics.py, tests/integration/test_prometheus.py).
METRICS_SCENARIOS = ["cpu-throttling-latency", "canary-5xx-by-version", "memory-leak-toward-oom"]


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
PROTOBUF_FIRST = "application/vnd.kubernetes.protobuf,application/json"


@contextlib.asynccontextmanager
async def api(
    scenario: str | Scenario = DEFAULT_SCENARIO, *, switchable: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    """The scenario's Kubernetes API, in process (an ASGI transport, no socket)."""
    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    transport = httpx.ASGITransport(app=build_app(loaded, switchable=switchable))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        yield client


async def table(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    response = await client.get(path, headers={"Accept": TABLE})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    return body


def rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Table's rows as {column: cell}."""
    names = [c["name"] for c in body["columnDefinitions"]]
    return [dict(zip(names, row["cells"], strict=True)) for row in body["rows"]]


# ─── scenarios ────────────────────────────────────────────────────────────────


def test_scenario_names() -> None:
    assert scenario_names()[0] == DEFAULT_SCENARIO == "crashloop-bad-configmap"
    assert sorted(scenario_names()) == sorted(SCENARIOS + METRICS_SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_loads_and_validates(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.title and scenario.description
    # The alert is a valid submission, Alertmanager-shaped.
    alert = AlertSubmission.model_validate(scenario.alert.model_dump(mode="json"))
    assert alert.alert_type == "kubernetes"
    assert isinstance(alert.data, dict)
    firing = alert.data["alerts"][0]
    assert firing["status"] == "firing"
    assert firing["labels"]["alertname"]
    assert firing["annotations"]["summary"]
    # The analysis states every finding and no forbidden conclusion (also enforced by the model).
    for finding in scenario.expected.findings:
        assert finding.found_in(scenario.playbook.analysis), finding.fact
    for forbidden in scenario.expected.forbidden:
        assert forbidden.found_in(scenario.playbook.analysis) is None, forbidden.claim
        assert forbidden.found_in(forbidden.claim), forbidden.claim
    assert all(step.tool in TOOL_NAMES for step in scenario.playbook.steps)
    assert scenario.expected.tools
    assert scenario.cluster.name == "prod-eu-1"


@pytest.mark.parametrize("name", SCENARIOS)
async def test_alert_targets_exist(name: str) -> None:
    scenario = load_scenario(name)
    assert isinstance(scenario.alert.data, dict)
    labels = scenario.alert.data["alerts"][0]["labels"]
    namespace = labels["namespace"]
    async with api(name) as client:
        assert (await client.get(f"/api/v1/namespaces/{namespace}")).status_code == 200
        if "pod" in labels:
            pod = await client.get(f"/api/v1/namespaces/{namespace}/pods/{labels['pod']}")
            assert pod.status_code == 200
        if "deployment" in labels:
            path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{labels['deployment']}"
            assert (await client.get(path)).status_code == 200


def test_unknown_scenario() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        load_scenario("nope")


def test_scenarios_extend_the_base_cluster() -> None:
    def solver(cluster: Cluster) -> Any:
        [issuer] = cluster.objects("cert-manager.io/v1", "ClusterIssuer")
        return issuer["spec"]["acme"]["solvers"][0]["http01"]["ingress"]["ingressClassName"]

    tls = Cluster(load_scenario("expired-tls-cert").cluster)
    default = Cluster(load_scenario().cluster)
    assert solver(tls) == "nginx-legacy" and solver(default) == "nginx"
    # Base pods are everywhere; scenario pods only in their scenario.
    names = [p["metadata"]["name"] for p in default.objects("v1", "Pod")]
    assert "coredns-5d78c9869d-7hx2p" in names
    assert not any(n.startswith("image-resizer-backfill") for n in names)
    # A scenario can override one field of a base node.
    noisy = Cluster(load_scenario("noisy-neighbour").cluster)
    usage = {n.name[-4:]: n.usage.cpu for n in noisy.state.nodes}
    assert usage["wl5d"] == "3871m"
    assert {n.name[-4:]: n.usage.cpu for n in default.state.nodes}["wl5d"] == "1105m"


# ─── the Kubernetes API ──────────────────────────────────────────────────────


async def test_discovery_names_every_served_resource() -> None:
    async with api("expired-tls-cert") as client:
        version = (await client.get("/version")).json()
        assert (version["major"], version["minor"]) == ("1", "30")
        assert (await client.get("/api")).json()["versions"] == ["v1"]
        groups = {g["name"]: g for g in (await client.get("/apis")).json()["groups"]}
        assert {"apps", "metrics.k8s.io", "authorization.k8s.io", "cert-manager.io"} <= set(groups)
        assert groups["apps"]["preferredVersion"]["groupVersion"] == "apps/v1"
        core = (await client.get("/api/v1")).json()
        assert core["kind"] == "APIResourceList" and core["groupVersion"] == "v1"
        by_name = {r["name"]: r for r in core["resources"]}
        assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["namespaced"]
        assert not by_name["nodes"]["namespaced"] and "pods/log" in by_name
        assert by_name["pods"]["verbs"] == ["get", "list"]  # read-only
        apps = {r["name"] for r in (await client.get("/apis/apps/v1")).json()["resources"]}
        assert {"deployments", "replicasets", "statefulsets", "daemonsets"} <= apps
        review = (await client.get("/apis/authorization.k8s.io/v1")).json()["resources"]
        assert review == [
            {"name": "selfsubjectaccessreviews", "singularName": "", "namespaced": False,
             "kind": "SelfSubjectAccessReview", "verbs": ["create"]}
        ]  # fmt: skip
        assert (await client.get("/apis/nope.example.com/v1")).status_code == 404


async def test_lists_render_as_tables_with_the_servers_columns() -> None:
    async with api() as client:
        pods = await table(client, "/api/v1/pods")
        columns = {c["name"]: c["priority"] for c in pods["columnDefinitions"]}
        assert list(columns)[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
        assert columns["Node"] == 1 and columns["IP"] == 1  # -o wide only
        crashing = next(
            (row, cells)
            for row, cells in zip(pods["rows"], rows(pods), strict=True)
            if cells["Name"] == "payments-api-7d9f8b6c5-x2k4q"
        )
        row, cells = crashing
        assert cells["Status"] == "CrashLoopBackOff" and cells["Ready"] == "0/1"
        assert cells["Restarts"] == "7 (68s ago)"  # counted from the scenario's clock
        # Every row carries its object's metadata: namespace and labels for the clients.
        assert row["object"]["kind"] == "PartialObjectMetadata"
        assert row["object"]["metadata"]["namespace"] == "checkout"
        assert row["object"]["metadata"]["labels"]["app.kubernetes.io/name"] == "payments-api"
        events = rows(await table(client, "/api/v1/namespaces/checkout/events"))
        backoff = next(e for e in events if e["Reason"] == "BackOff")
        assert backoff["Count"] == 31 and backoff["Object"] == "pod/payments-api-7d9f8b6c5-x2k4q"
        deployments = rows(await table(client, "/apis/apps/v1/namespaces/checkout/deployments"))
        assert {d["Name"]: d["Ready"] for d in deployments}["payments-api"] == "3/3"
        secrets = rows(await table(client, "/api/v1/namespaces/checkout/secrets"))
        assert secrets == [
            {"Name": "payments-db-credentials", "Type": "Opaque", "Data": 2, "Age": "69d"}
        ]
        one = await table(client, "/api/v1/namespaces/checkout/pods/payments-db-0")
        assert [r["Name"] for r in rows(one)] == ["payments-db-0"]


async def test_replies_are_json_even_to_protobuf_requests() -> None:
    async with api() as client:
        response = await client.get(
            "/api/v1/namespaces/checkout/pods/payments-db-0", headers={"Accept": PROTOBUF_FIRST}
        )
        assert response.headers["content-type"] == "application/json"
        pod = response.json()
        assert pod["kind"] == "Pod" and pod["spec"]["nodeName"].startswith("gke-prod-eu-1")
        listed = (await client.get("/apis/apps/v1/deployments")).json()
        assert listed["kind"] == "DeploymentList"
        assert {d["metadata"]["namespace"] for d in listed["items"]} >= {"checkout"}


async def test_secrets_are_served_without_their_data() -> None:
    async with api() as client:
        secret = await client.get("/api/v1/namespaces/checkout/secrets/payments-db-credentials")
        listed = (await client.get("/api/v1/secrets")).json()["items"]
        as_table = await client.get(
            "/api/v1/namespaces/checkout/secrets",
            params={"includeObject": "Object"},
            headers={"Accept": TABLE},
        )
    [row] = as_table.json()["rows"]
    assert row["object"]["kind"] == "Secret" and "data" not in row["object"]
    assert secret.status_code == 200 and "data" not in secret.json()
    assert secret.json()["metadata"]["name"] == "payments-db-credentials"
    assert listed and not any("data" in item for item in listed)
    assert "Wng4cFEydkxtNA==" not in secret.text


async def test_selectors_filter_lists() -> None:
    async with api() as client:
        by_label = await client.get(
            "/api/v1/pods", params={"labelSelector": "app.kubernetes.io/name=payments-api"}
        )
        assert len(by_label.json()["items"]) == 4
        not_label = await client.get(
            "/api/v1/namespaces/checkout/pods",
            params={"labelSelector": "app.kubernetes.io/name!=payments-api,pod-template-hash"},
        )
        assert {p["metadata"]["name"][:12] for p in not_label.json()["items"]} == {"checkout-web"}
        pod = await client.get("/api/v1/namespaces/checkout/pods/payments-api-7d9f8b6c5-x2k4q")
        fields = (
            "involvedObject.name=payments-api-7d9f8b6c5-x2k4q,involvedObject.namespace=checkout,"
            f"involvedObject.uid={pod.json()['metadata']['uid']}"
        )
        events = await client.get(
            "/api/v1/namespaces/checkout/events", params={"fieldSelector": fields}
        )
        reasons = [e["reason"] for e in events.json()["items"]]
        assert "BackOff" in reasons and "ScalingReplicaSet" not in reasons


async def test_errors_are_status_objects() -> None:
    async with api() as client:
        missing = await client.get("/api/v1/namespaces/checkout/pods/nope")
        assert missing.status_code == 404
        assert missing.json() | {"details": None} == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods "nope" not found', "reason": "NotFound", "code": 404,
            "details": None,
        }  # fmt: skip
        deployment = await client.get("/apis/apps/v1/namespaces/checkout/deployments/nope")
        assert deployment.json()["message"] == 'deployments.apps "nope" not found'
        unknown = await client.get("/api/v1/widgets")
        assert unknown.status_code == 404
        assert unknown.json()["message"] == "the server could not find the requested resource"
        write = await client.post("/api/v1/namespaces/checkout/pods", content=b"{}")
        assert write.status_code == 405
        watch = await client.get("/api/v1/pods", params={"watch": "true"})
        assert watch.status_code == 405


async def test_pod_logs_current_previous_and_tail() -> None:
    base = "/api/v1/namespaces/checkout/pods"
    async with api() as client:
        previous = await client.get(
            f"{base}/payments-api-7d9f8b6c5-x2k4q/log", params={"previous": "true"}
        )
        assert previous.headers["content-type"].startswith("text/plain")
        assert "no such host" in previous.text
        tail = await client.get(f"{base}/payments-db-0/log", params={"tailLines": "1"})
        assert tail.text.count("\n") == 1 and "checkpoint complete" in tail.text
        never = await client.get(f"{base}/payments-db-0/log", params={"previous": "true"})
        assert never.status_code == 400
        assert never.json()["message"] == (
            'previous terminated container "postgres" in pod "payments-db-0" not found'
        )
        gone = await client.get(f"{base}/nope/log")
        assert gone.status_code == 404
    async with api("image-pull-error") as client:
        waiting = await client.get("/api/v1/namespaces/web/pods/storefront-84b6d7c9f5-7tq2n/log")
        assert waiting.status_code == 400
        assert "is waiting to start: trying and failing to pull image" in waiting.text


async def test_metrics_api_serves_pod_and_node_usage() -> None:
    async with api() as client:
        pods = (await client.get("/apis/metrics.k8s.io/v1beta1/namespaces/checkout/pods")).json()
        nodes = (await client.get("/apis/metrics.k8s.io/v1beta1/nodes")).json()
        one = await client.get("/apis/metrics.k8s.io/v1beta1/nodes/nope")
    assert pods["kind"] == "PodMetricsList"
    db = next(p for p in pods["items"] if p["metadata"]["name"] == "payments-db-0")
    assert db["containers"] == [
        {"name": "postgres", "usage": {"cpu": "212000000n", "memory": f"{684 * 1024}Ki"}}
    ]
    assert nodes["kind"] == "NodeMetricsList" and len(nodes["items"]) == 3
    assert nodes["items"][0]["usage"]["cpu"] == "1210000000n"
    assert one.status_code == 404


async def test_the_kubelet_stats_summary_of_a_node() -> None:
    node = "gke-prod-eu-1-default-pool-3f1a2b7c-wl5d"
    async with api() as client:
        summary = (await client.get(f"/api/v1/nodes/{node}/proxy/stats/summary")).json()
        logs = await client.get(f"/api/v1/nodes/{node}/proxy/logs/", params={"query": "kubelet"})
    assert summary["node"]["nodeName"] == node
    assert summary["node"]["cpu"]["usageNanoCores"] == 1_105_000_000
    db = next(p for p in summary["pods"] if p["podRef"]["name"] == "payments-db-0")
    assert db["cpu"]["usageNanoCores"] == 212_000_000
    assert db["memory"]["workingSetBytes"] == 684 * 2**20
    assert logs.status_code == 404 and "keeps no logs" in logs.json()["message"]


async def test_access_reviews_are_allowed() -> None:
    async with api() as client:
        review = await client.post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            content=b"\x6b\x38\x73\x00protobuf",
            headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
        )
    assert review.status_code == 201
    assert review.json()["status"]["allowed"] is True


async def test_a_switchable_server_moves_to_another_scenario() -> None:
    async with api("oom-killed", switchable=True) as client:
        assert (await client.get("/scenario")).json() == {"scenario": "oom-killed"}
        switched = await client.post("/scenario", json={"scenario": "image-pull-error"})
        assert switched.json() == {"scenario": "image-pull-error"}
        pods = rows(await table(client, "/api/v1/namespaces/web/pods"))
        assert "ImagePullBackOff" in {p["Status"] for p in pods}
        unknown = await client.post("/scenario", json={"scenario": "nope"})
        assert unknown.status_code == 400 and "unknown scenario 'nope'" in unknown.json()["error"]
        assert (await client.post("/scenario", json=["oom-killed"])).status_code == 400
    async with api("oom-killed") as client:
        assert (await client.get("/scenario")).status_code == 404  # only when switchable


def test_the_command_serves_the_api_and_writes_a_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kube" / "config"
    process = subprocess.Popen(
        [sys.executable, "-m", "tarsy_dev.demo_cluster", "--scenario", "oom-killed",
         "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert "demo cluster (scenario oom-killed) serving the Kubernetes API on" in first, first
        url = first.rsplit(" ", 1)[1].strip()
        assert process.stdout.readline().strip() == f"kubeconfig: {kubeconfig}"
        assert process.stdout.readline().strip() == (
            f"try: kubectl --kubeconfig {kubeconfig} get pods -A"
        )
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        assert config["current-context"] == "prod-eu-1"
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        pods = httpx.get(f"{url}/api/v1/namespaces/analytics/pods", timeout=30).json()
        assert "report-worker-5f7c9d8b4-zp2vk" in {p["metadata"]["name"] for p in pods["items"]}
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_cli_rejects_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--scenario", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_cli_help_lists_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--kubeconfig" in out and "--switchable" in out
    for name in SCENARIOS + METRICS_SCENARIOS:
        assert name in out


# ─── formatting helpers ───────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (596, "9m56s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (47 * 3600, "47h"),
        (2 * 86400 + 16 * 3600, "2d16h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_human_duration(seconds: int, expected: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == expected


def test_quantities() -> None:
    assert cpu_millicores("250m") == 250
    assert cpu_millicores("2") == 2000
    assert cpu_millicores("1.5") == 1500
    assert memory_bytes("512Mi") == 512 * 2**20
    assert memory_bytes("1G") == 10**9
    assert memory_bytes("16386308Ki") == 16386308 * 1024
    with pytest.raises(ValueError):
        cpu_millicores("lots")
    assert plural("Ingress") == "ingresses"
    assert plural("NetworkPolicy") == "networkpolicies"
    assert plural("Deployment") == "deployments"


# ─── the clock a person's kubectl reads ───────────────────────────────────────


def test_on_the_clock_moves_every_timestamp_and_keeps_every_age() -> None:
    state = load_scenario().cluster
    later = state.now + timedelta(days=4, hours=9)
    moved = on_the_clock(state, later)
    assert moved.now == later
    before, after = Cluster(state), Cluster(moved)
    pairs = [(p.created, q.created) for p, q in zip(state.pods, moved.pods, strict=True)]
    assert pairs and all(a == b + timedelta(days=4, hours=9) for b, a in pairs)
    # Raw manifests move too: a secret's creation is as old as before, on the new clock.
    stamps = [
        (o["metadata"].get("creationTimestamp"), m["metadata"].get("creationTimestamp"))
        for o, m in zip(state.objects, moved.objects, strict=True)
    ]
    assert [before.age(b) for b, _ in stamps] == [after.age(a) for _, a in stamps]


async def test_a_cluster_on_the_live_clock_agrees_with_kubectls_own_ages() -> None:
    served = ServedScenario(load_scenario(), live_clock=True)
    transport = httpx.ASGITransport(app=build_app(served))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        [secret] = rows(await table(client, "/api/v1/namespaces/checkout/secrets"))
        raw = await client.get("/api/v1/namespaces/checkout/secrets/payments-db-credentials")
        created = datetime.fromisoformat(raw.json()["metadata"]["creationTimestamp"])
        # The server's table and kubectl's own count (describe: real now - timestamp) agree.
        assert secret["Age"] == "69d" == human_duration(datetime.now(UTC) - created)
        pods = {r["Name"]: r for r in rows(await table(client, "/api/v1/pods"))}
        assert pods["payments-api-7d9f8b6c5-x2k4q"]["Restarts"].startswith("7 (")
        events = (await client.get("/api/v1/namespaces/checkout/events")).json()["items"]
        last_seen = max(datetime.fromisoformat(e["lastTimestamp"]) for e in events)
        assert timedelta(0) <= datetime.now(UTC) - last_seen < timedelta(hours=1)

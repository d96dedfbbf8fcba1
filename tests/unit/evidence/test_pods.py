from __future__ import annotations

from tarsy.evidence.detections import pods
from tarsy.evidence.snapshot import KubeObject

from .cluster import (
    container,
    event,
    iso,
    log,
    obj,
    pod,
    replica_set,
    running,
    snapshot,
    terminated,
    usage,
    waiting,
)


def _crashing(name: str = "checkout-5f7c9-abcde", restarts: int = 7) -> KubeObject:
    return pod(
        name,
        statuses=[
            waiting(
                "app", "CrashLoopBackOff", "back-off 5m0s", restarts, terminated("Error", 1, -2)
            )
        ],
    )


def test_a_crash_looping_container_is_reported_with_its_exit_code_and_last_error_line() -> None:
    crashing = _crashing()
    previous = log(
        "checkout-5f7c9-abcde",
        "starting checkout\nERROR connect to payments-db:5432 refused\nshutting down\n",
    )
    found = pods.crash_loop(snapshot(crashing, previous))
    assert len(found) == 1
    text = found[0].finding
    assert "orders/checkout-5f7c9-abcde container app is CrashLoopBackOff" in text
    assert "restarted 7 times" in text
    assert "Error, exit code 1" in text
    assert iso(-2) in text
    assert '"ERROR connect to payments-db:5432 refused"' in text
    assert found[0].evidence == ["get-pod-checkout-5f7c9-abcde", previous.source]


def test_a_healthy_container_that_never_restarted_is_not_a_crash_loop() -> None:
    assert pods.crash_loop(snapshot(pod("checkout-5f7c9-abcde"))) == []


def test_one_or_two_restarts_after_a_clean_exit_are_not_a_crash_loop() -> None:
    restarted = pod("worker-1", statuses=[running("app", 2, lastState=terminated("Completed", 0))])
    assert pods.crash_loop(snapshot(restarted)) == []


def test_the_last_error_line_of_a_json_log_is_its_level_and_message() -> None:
    text = (
        '{"level":"info","msg":"listening","error_count":0}\n'
        '{"level":"error","msg":"cannot load config","error":"missing key TAX_RATE"}\n'
        '{"level":"info","msg":"exiting"}\n'
    )
    assert pods.last_error_line(text) == "[error] msg=cannot load config error=missing key TAX_RATE"


def test_an_info_json_line_that_names_an_error_field_is_not_an_error_line() -> None:
    assert pods.last_error_line('{"level":"info","msg":"ok","error":null}\n') is None


def test_a_long_error_line_is_trimmed_to_about_two_hundred_characters() -> None:
    line = pods.last_error_line("panic: " + "x" * 500)
    assert line is not None and len(line) <= 200 and line.endswith("…")


def test_an_oom_killed_container_is_reported_with_its_memory_limit_and_request() -> None:
    killed = pod(
        "ledger-0",
        containers=[
            container(
                "app", resources={"limits": {"memory": "256Mi"}, "requests": {"memory": "128Mi"}}
            )
        ],
        statuses=[running("app", 4, lastState=terminated("OOMKilled", 137, -3))],
    )
    found = pods.oom_killed(
        snapshot(killed, usage("Pod", "ledger-0", "orders", memory=250 * 2**20))
    )
    assert len(found) == 1 and found[0].severity == 1
    text = found[0].finding
    assert "ledger-0 container app was OOMKilled (exit code 137" in text
    assert "memory limit is 256Mi (request 128Mi)" in text
    assert "uses 250Mi now" in text
    assert iso(-3) in text


def test_a_container_that_exited_with_an_error_is_not_oom_killed() -> None:
    crashed = pod("ledger-0", statuses=[running("app", 1, lastState=terminated("Error", 1))])
    assert pods.oom_killed(snapshot(crashed)) == []


def _pulling(image: str, message: str = "") -> KubeObject:
    return pod(
        "web-6b9-x1",
        containers=[container("web", image)],
        statuses=[
            waiting("web", "ImagePullBackOff", message or f'Back-off pulling image "{image}"')
        ],
        owner="web-6b9",
    )


def test_an_image_pull_failure_names_the_image_the_missing_tag_and_the_previous_tag() -> None:
    image = "registry.example.com/shop/web:2.4.1"
    failing = _pulling(image)
    pulled = event(
        failing,
        "Failed",
        f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull and '
        f'unpack image "{image}": not found',
    )
    new = replica_set("web-6b9", "web", 5, {"containers": [container("web", image)]})
    old = replica_set(
        "web-55d",
        "web",
        4,
        {"containers": [container("web", "registry.example.com/shop/web:2.4.0")]},
    )
    found = pods.image_pull(snapshot(failing, pulled, new, old))
    assert len(found) == 1
    text = found[0].finding
    assert f"cannot pull image {image} (ImagePullBackOff)" in text
    assert "the tag does not exist in the registry" in text
    assert "previous revision (web-55d, revision 4) ran tag 2.4.0, this one asks for 2.4.1" in text
    assert pulled.source in found[0].evidence


def test_a_missing_repository_is_told_from_a_missing_tag() -> None:
    message = (
        'failed to resolve reference "registry.example.com/gone/tool:1": '
        "repository name not known to registry: name unknown"
    )
    [found] = pods.image_pull(snapshot(_pulling("registry.example.com/gone/tool:1", message)))
    assert "the repository does not exist in the registry" in found.finding
    assert "the tag does not exist" not in found.finding


def test_an_image_pull_refused_by_the_registry_is_classified_as_unauthorized() -> None:
    failing = _pulling("registry.example.com/private/tool:1", "pull access denied: unauthorized")
    [found] = pods.image_pull(snapshot(failing))
    assert "refused access" in found.finding


def test_an_unreachable_registry_is_classified_as_the_failure_its_message_names() -> None:
    message = "dial tcp: lookup registry.internal on 10.96.0.10:53: no such host"
    [found] = pods.image_pull(snapshot(_pulling("registry.internal/tool:1", message)))
    assert "host name does not resolve" in found.finding
    timeout = "dial tcp 10.0.0.7:443: i/o timeout"
    [found] = pods.image_pull(snapshot(_pulling("registry.internal/tool:1", timeout)))
    assert "timed out" in found.finding and "resolve" not in found.finding


def test_a_running_container_has_no_image_pull_finding() -> None:
    assert pods.image_pull(snapshot(pod("web-6b9-x1"))) == []


def test_a_missing_configmap_key_is_named_with_the_keys_that_exist() -> None:
    blocked = pod(
        "api-1",
        statuses=[
            waiting(
                "app",
                "CreateContainerConfigError",
                "couldn't find key DB_URL in ConfigMap orders/api-env",
            )
        ],
    )
    env = obj("ConfigMap", "api-env", data={"DB_HOST": "db", "DB_PORT": "5432"})
    [found] = pods.container_config(snapshot(blocked, env))
    assert (
        "ConfigMap orders/api-env has no key DB_URL; its keys are DB_HOST, DB_PORT" in found.finding
    )


def test_a_missing_secret_is_named() -> None:
    blocked = pod(
        "api-1",
        statuses=[waiting("app", "CreateContainerConfigError", 'secret "api-token" not found')],
    )
    [found] = pods.container_config(snapshot(blocked))
    assert "Secret orders/api-token does not exist" in found.finding


def test_a_started_container_has_no_config_error() -> None:
    assert pods.container_config(snapshot(pod("api-1"))) == []


def _probed(**probe: object) -> KubeObject:
    spec = {"httpGet": {"path": "/healthz", "port": 8080}, **probe}
    return pod(
        "search-7-a",
        containers=[container("app", livenessProbe=spec)],
        statuses=[running("app", 3)],
    )


def test_a_failing_liveness_probe_is_reported_with_its_path_port_and_settings() -> None:
    probed = _probed(timeoutSeconds=1, periodSeconds=5, failureThreshold=2)
    unhealthy = event(
        probed,
        "Unhealthy",
        'Liveness probe failed: Get "http://10.1.2.3:8080/healthz": context deadline exceeded '
        "(Client.Timeout exceeded while awaiting headers)",
        count=14,
    )
    [found] = pods.probe_failure(snapshot(probed, unhealthy))
    text = found.finding
    assert "liveness probe failing" in text and "14 times" in text
    assert "HTTP GET /healthz on port 8080" in text
    assert "timeoutSeconds=1, periodSeconds=5, failureThreshold=2, initialDelaySeconds=0" in text
    assert "did not answer within the 1s timeout" in text


def test_an_observed_probe_duration_beyond_the_timeout_is_stated() -> None:
    probed = _probed(timeoutSeconds=2)
    slow = event(probed, "Unhealthy", "Liveness probe failed: command timed out after 3.5s")
    [found] = pods.probe_failure(snapshot(probed, slow))
    assert "the observed 3.5s exceeds the 2s timeout" in found.finding


def test_a_probe_answering_500_carries_the_status_code() -> None:
    probed = _probed()
    failing = event(
        probed, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500"
    )
    [found] = pods.probe_failure(snapshot(probed, failing))
    assert "statuscode: 500" in found.finding and "readiness probe failing" in found.finding


def test_a_pod_without_unhealthy_events_has_no_probe_finding() -> None:
    probed = _probed()
    pulled = event(probed, "Pulled", "Successfully pulled image", type="Normal")
    assert pods.probe_failure(snapshot(probed, pulled)) == []


def test_an_evicted_pod_names_the_resource_and_its_node_pressure() -> None:
    message = "The node was low on resource: ephemeral-storage. Container app was using 9Gi, which exceeds its request of 0."  # noqa: E501
    gone = pod(
        "batch-2", phase="Failed", statuses=[], reason="Evicted", message=message, node="node-b"
    )
    node = obj(
        "Node", "node-b", "", status={"conditions": [{"type": "DiskPressure", "status": "True"}]}
    )
    [found] = pods.evicted(snapshot(gone, node))
    assert "evicted from node node-b" in found.finding
    assert "low on resource: ephemeral-storage" in found.finding
    assert "reports DiskPressure=True" in found.finding
    assert found.evidence == [gone.source, node.source]


def test_an_eviction_over_ephemeral_storage_names_what_counts_toward_it() -> None:
    message = "The node was low on resource: ephemeral-storage. Container app was using 9Gi."
    gone = pod(
        "batch-3", phase="Failed", statuses=[], reason="Evicted", message=message,
        containers=[container("app"), container("sidecar", resources={"limits": {
            "ephemeral-storage": "1Gi"}})],
    )  # fmt: skip
    gone.spec["volumes"] = [
        {"name": "work", "emptyDir": {}},
        {"name": "cache", "emptyDir": {"sizeLimit": "2Gi"}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        {"name": "cfg", "configMap": {"name": "settings"}},
    ]
    [found] = pods.evicted(snapshot(gone))
    assert found.finding.endswith(
        "; toward its ephemeral storage count: emptyDir work with no sizeLimit; emptyDir cache "
        "sizeLimit 2Gi; no ephemeral-storage limit on app."
    )
    memory = "The node was low on resource: memory."
    other = pod("batch-4", phase="Failed", statuses=[], reason="Evicted", message=memory)
    [by_memory] = pods.evicted(snapshot(other))
    assert "toward its ephemeral storage" not in by_memory.finding


def test_a_running_pod_was_not_evicted() -> None:
    assert pods.evicted(snapshot(pod("batch-2"))) == []


def test_a_failed_job_names_its_reason_and_its_failed_pods_exit_codes() -> None:
    job = obj(
        "Job",
        "nightly-export",
        spec={"backoffLimit": 2},
        status={
            "failed": 3,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        },
    )
    failed = pod(
        "nightly-export-x",
        phase="Failed",
        statuses=[{"name": "app", "state": terminated("Error", 2)}],
    )
    failed.body["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "nightly-export"}]
    [found] = pods.job_failed(snapshot(job, failed))
    assert "Job orders/nightly-export failed (BackoffLimitExceeded" in found.finding
    assert "after 3 failed pods, backoffLimit 2" in found.finding
    assert "nightly-export-x (app: Error, exit code 2)" in found.finding


def test_a_completed_job_is_not_reported() -> None:
    job = obj(
        "Job", "nightly-export", status={"conditions": [{"type": "Complete", "status": "True"}]}
    )
    assert pods.job_failed(snapshot(job)) == []


def test_a_python_traceback_gives_its_exception_line_and_klog_its_error_line() -> None:
    traceback = (
        "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'TAX_RATE'\n"
    )
    assert pods.last_error_line(traceback) == "KeyError: 'TAX_RATE'"
    klog = (
        "I1127 10:00:01.000 1 main.go:10] starting\nE1127 10:00:02.000 1 main.go:42] cannot sync\n"
    )
    assert pods.last_error_line(klog) == "E1127 10:00:02.000 1 main.go:42] cannot sync"


def test_restarts_that_ended_long_before_the_alert_are_not_a_crash_loop() -> None:
    old = pod("worker-1", statuses=[running("app", 5, lastState=terminated("Error", 1, -600))])
    recent = pod("worker-2", statuses=[running("app", 5, lastState=terminated("Error", 1, -20))])
    [found] = pods.crash_loop(snapshot(old, recent))
    assert "worker-2 container app is running again, restarting: restarted 5 times" in found.finding


def test_docker_hubs_ambiguous_answer_is_reported_with_the_pods_pull_credentials() -> None:
    message = (
        'Failed to pull image "acme/tool:1": pull access denied for acme/tool, repository does not '
        "exist or may require 'docker login'"
    )
    [found] = pods.image_pull(snapshot(_pulling("acme/tool:1", message)))
    assert "repository does not exist or needs credentials" in found.finding
    assert "sets no imagePullSecrets" in found.finding


def _killed(events: list[str]) -> str:
    crashed = pod("api-1", statuses=[running("app", 4, lastState=terminated("Error", 137, -2))])
    items = [event(crashed, "Killing", text) for text in events]
    [found] = pods.crash_loop(snapshot(crashed, *items))
    return found.finding


def test_exit_137_names_the_one_cause_the_evidence_shows() -> None:
    probe = _killed(["Container app failed liveness probe, will be restarted"])
    assert "SIGKILL from the kubelet after its liveness probe failed" in probe
    assert "OOM" not in probe
    bare = _killed([])
    assert "SIGKILL from outside the container; the runtime reports no OOMKilled" in bare
    oom = pod("api-2", statuses=[running("app", 4, lastState=terminated("OOMKilled", 137, -2))])
    [found] = pods.crash_loop(snapshot(oom))
    assert "SIGKILL from the kernel's OOM killer" in found.finding
    assert " or " not in found.finding.split("exit code 137")[1].split(")")[0]


def test_a_pod_whose_volume_does_not_mount_names_the_missing_configmap() -> None:
    stuck = pod("report-9-z", phase="Pending", statuses=[waiting("app", "ContainerCreating")])
    failed = event(
        stuck,
        "FailedMount",
        'MountVolume.SetUp failed for volume "settings" : configmap "report-settings" not found',
        count=8,
    )
    [found] = pods.container_creating(snapshot(stuck, failed))
    assert (
        "Pod orders/report-9-z is stuck in ContainerCreating: ConfigMap orders/report-settings does not exist"  # noqa: E501
        in found.finding
    )
    assert "FailedMount" in found.finding and "8 times" in found.finding


def test_a_started_pod_with_an_old_mount_warning_is_not_stuck() -> None:
    started = pod("report-9-z")
    failed = event(started, "FailedMount", "MountVolume.SetUp failed for volume token: timed out")
    assert pods.container_creating(snapshot(started, failed)) == []


def test_the_probe_an_event_names_is_chosen_among_several_containers() -> None:
    web = container("web", readinessProbe={"httpGet": {"path": "/ready", "port": 8080}})
    proxy = container("proxy", readinessProbe={"tcpSocket": {"port": 15021}, "timeoutSeconds": 3})
    probed = pod("search-7-a", containers=[web, proxy], statuses=[running("web"), running("proxy")])
    unhealthy = event(
        probed,
        "Unhealthy",
        "Readiness probe failed: dial tcp 10.1.0.4:15021: connect: connection refused",
    )
    [found] = pods.probe_failure(snapshot(probed, unhealthy))
    assert "container proxy's probe is TCP port 15021 with timeoutSeconds=3" in found.finding


def test_a_crash_loop_carries_the_termination_message_of_its_last_run() -> None:
    last = terminated("StartError", 128)
    last["terminated"]["message"] = 'exec: "/app/serve": stat /app/serve: no such file or directory'
    looping = pod("api-2", statuses=[waiting("app", "CrashLoopBackOff", restarts=4, last=last)])
    [found] = pods.crash_loop(snapshot(looping))
    assert "ended StartError, exit code 128" in found.finding
    assert (
        "with message \"exec: '/app/serve': stat /app/serve: no such file or directory\""
        in found.finding
    )


def test_a_container_the_runtime_cannot_run_quotes_the_runtimes_error() -> None:
    message = 'failed to create containerd task: exec: "serve": executable file not found in $PATH'
    blocked = pod("api-3", statuses=[waiting("app", "RunContainerError", message)])
    [found] = pods.container_config(snapshot(blocked))
    assert (
        "cannot start (RunContainerError)" in found.finding
        and "executable file not found" in found.finding
    )


def test_a_json_line_without_a_level_is_read_by_its_words() -> None:
    assert (
        pods.last_error_line('{"msg": "fatal: cannot open /data"}\nbye\n')
        == '{"msg": "fatal: cannot open /data"}'
    )


def test_a_probe_on_a_port_the_container_does_not_declare_says_so() -> None:
    probe = {"httpGet": {"path": "/healthz", "port": 9000}}
    app = container("app", livenessProbe=probe, ports=[{"containerPort": 8080}])
    probed = pod("search-7-a", containers=[app], statuses=[running("app", 2)])
    refused = event(
        probed,
        "Unhealthy",
        'Liveness probe failed: Get "http://10.1.0.4:9000/healthz": dial tcp 10.1.0.4:9000: connect: connection refused',  # noqa: E501
    )
    [found] = pods.probe_failure(snapshot(probed, refused))
    assert (
        "the probe's port 9000 is not among the container's declared ports (8080)" in found.finding
    )


def test_a_probe_on_a_declared_named_port_has_no_port_note() -> None:
    probe = {"httpGet": {"path": "/healthz", "port": "http"}}
    app = container("app", livenessProbe=probe, ports=[{"containerPort": 8080, "name": "http"}])
    probed = pod("search-7-a", containers=[app], statuses=[running("app", 2)])
    failing = event(
        probed, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 503"
    )
    [found] = pods.probe_failure(snapshot(probed, failing))
    assert "declared ports" not in found.finding and "statuscode: 503" in found.finding

"""Pod and container checks: crash loops, OOM kills, image pulls, config errors, probes, evictions.

Design constraint: pure functions of the snapshot, one per concern, each
finding naming the pod, the container and the figures the kubelet reported
(restarts, reasons, exit codes, times), plus the log line or event that
explains them, so a reader can act on the sentence alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import (
    as_dict,
    condition,
    container_spec,
    container_statuses,
    containers,
    detection,
    dicts,
    event_line,
    image_parts,
    items,
    memory_text,
    number,
    owned,
    owner_name,
    parse_time,
    pod_ready,
    pod_replica_set,
    quoted,
    reference_time,
    replica_sets,
    revision,
    scalar,
    sources,
    stamp,
    state_of,
    text_map,
    trim,
    words,
)
from tarsy.evidence.parse import quantity
from tarsy.evidence.snapshot import Detection, KubeObject, PodLog, Snapshot
from tarsy.models import Severity

# Words of an error, exception class names (``KeyError``, ``IOException``) and klog's E/F lines.
_ERROR_LINE = words(
    r"\b(errors?|fatal|panic|failed|failure|traceback|critical|refused)\b"
    r"|\w*(error|exception)\b|^[EF]\d{4} \d\d:\d\d"
)
_ERROR_LEVELS = {"error", "fatal", "panic", "critical", "crit", "err", "emerg", "alert"}
_LOGFMT_LEVEL = words(r"\blevel=\"?(error|fatal|panic|crit\w*)\b")
_MESSAGE_KEYS = ("msg", "message", "error", "err", "exception", "reason")
_SIGNALS = {
    126: "command not executable",
    127: "command not found",
    134: "SIGABRT",
    139: "SIGSEGV",
    143: "SIGTERM",
}
_KILL_EVENTS = words(r"liveness probe|startup probe|will be restarted|failed .*probe")


def _sigkill_cause(reason: str, killed_by: str) -> str:
    """What sent SIGKILL (exit code 137), as the evidence shows it: one cause, never two.

    The runtime writes reason OOMKilled when the kernel's OOM killer ended the
    container; without it the kill came from outside the container, and a
    probe-failure kill event names who.
    """
    if reason == "OOMKilled":
        return "SIGKILL from the kernel's OOM killer"
    if killed_by:
        return f"SIGKILL from the kubelet after {killed_by}"
    return "SIGKILL from outside the container; the runtime reports no OOMKilled"


def _exit_text(code: object, reason: str = "", killed_by: str = "") -> str:
    if not isinstance(code, int):
        return "an unknown exit code"
    meaning = _sigkill_cause(reason, killed_by) if code == 137 else _SIGNALS.get(code)
    return f"exit code {code} ({meaning})" if meaning else f"exit code {code}"


def _killed_by(snapshot: Snapshot, pod: KubeObject) -> str:
    """The failed probe behind a kill, from the pod's Killing/Unhealthy events ("" if none)."""
    for event in snapshot.events_of(pod.ref):
        match = _KILL_EVENTS.search(event.message)
        if event.reason in ("Killing", "Unhealthy") and match:
            kind = "startup" if "startup" in event.message.lower() else "liveness"
            return f"its {kind} probe failed ({event.reason}: {quoted(event.message, 120)})"
    return ""


def _json_level(line: str) -> tuple[str, dict[str, Any]] | None:
    """The level and record of a structured (JSON) log line that states a level."""
    start = line.find("{")
    if start < 0:
        return None
    try:
        record = json.loads(line[start:])
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    level = str(record.get("level") or record.get("severity") or record.get("lvl") or "")
    return (level, record) if level else None


def _json_error(level: str, record: Mapping[str, Any], line: str) -> str | None:
    """A JSON line at an error level as ``[level] msg=... error=...``; None below it."""
    if level.lower() not in _ERROR_LEVELS:
        return None
    parts = [f"{key}={record[key]}" for key in _MESSAGE_KEYS if record.get(key)]
    return f"[{level}] " + " ".join(parts) if parts else trim(line)


def last_error_line(text: str) -> str | None:
    """The last line of a log that looks like an error, trimmed to about 200 characters.

    Args:
        text: The log's text.

    Returns:
        The line (a JSON line rendered as its level and message), or None.
    """
    for line in reversed(text.splitlines()):
        if not line.strip():
            continue
        structured = _json_level(line)
        if structured is not None:
            # The stated level decides: below error, words like "error" are field names.
            rendered = _json_error(*structured, line)
            if rendered is not None:
                return trim(rendered)
            continue
        if _ERROR_LINE.search(line) or _LOGFMT_LEVEL.search(line):
            return trim(line)
    return None


def _container_logs(snapshot: Snapshot, pod: KubeObject, container: str) -> list[PodLog]:
    only = len(dicts(pod.spec.get("containers"))) == 1
    return [
        log
        for log in snapshot.logs_of(pod.namespace, pod.name)
        if log.container == container or (not log.container and only)
    ]


def _log_evidence(snapshot: Snapshot, pod: KubeObject, container: str) -> tuple[str, str | None]:
    """The sentence about the container's last error line, and the log it came from."""
    for log in _container_logs(snapshot, pod, container):
        line = last_error_line(log.text)
        if line:
            which = "previous run's log" if log.previous else "current log"
            return f"; last error line of its {which}: {quoted(line)}", log.source
    return "", None


# A container running again counts as restarting while its last failure is this recent.
RECENT = timedelta(hours=1)


def _restarting(status: Mapping[str, Any], now: datetime) -> bool:
    waiting = state_of(status, "state", "waiting")
    if waiting.get("reason") == "CrashLoopBackOff":
        return True
    last = state_of(status, "lastState", "terminated")
    restarts = status.get("restartCount")
    if not last or not isinstance(restarts, int) or restarts < 3 or last.get("exitCode") == 0:
        return False
    finished = parse_time(last.get("finishedAt"))
    return finished is None or now - finished <= RECENT


def _termination_text(last: Mapping[str, Any], killed_by: str = "") -> str:
    """The last run's end: reason, exit code, time, and its termination message if any."""
    if not last:
        return ""
    finished = stamp(parse_time(last.get("finishedAt")))
    # The termination message is what the container wrote to its termination log (or
    # the runtime's error for a StartError): often the cause, in the container's words.
    message = f", with message {quoted(str(last['message']))}" if last.get("message") else ""
    return (
        f"; its last run ended {last.get('reason') or 'with no reason'}, "
        f"{_exit_text(last.get('exitCode'), scalar(last.get('reason')), killed_by)}, "
        f"at {finished}{message}"
    )


@check("crash_loop")
def crash_loop(snapshot: Snapshot) -> list[Detection]:
    """Containers in CrashLoopBackOff (or restarting after failures), with their last run.

    The finding names the restart count, the last termination's reason, exit
    code and finish time, and the last error line of the gathered log.
    """
    found: list[Detection] = []
    now = reference_time(snapshot)
    for pod in snapshot.of_kind("Pod"):
        for status in container_statuses(pod):
            if not _restarting(status, now):
                continue
            name = str(status.get("name", ""))
            waiting = state_of(status, "state", "waiting")
            state = str(waiting.get("reason") or "running again, restarting")
            last = state_of(status, "lastState", "terminated")
            ended = _termination_text(last, _killed_by(snapshot, pod))
            line, log_source = _log_evidence(snapshot, pod, name)
            finding = (
                f"Pod {pod.namespace}/{pod.name} container {name} is {state}: "
                f"restarted {status.get('restartCount', 0)} times{ended}{line}."
            )
            found.append(detection(pod.ref, finding, sources(pod, log_source), Severity.SYMPTOM))
    return found


def _memory_of(container: Mapping[str, Any], which: str) -> float | None:
    value = as_dict(as_dict(container.get("resources")).get(which)).get("memory")
    return quantity(str(value)) if value is not None else None


def _usage_text(snapshot: Snapshot, pod: KubeObject) -> tuple[str, str | None]:
    for usage in snapshot.usage:
        if usage.ref == pod.ref and usage.memory_bytes is not None:
            return f"; the pod uses {memory_text(usage.memory_bytes)} now", usage.source
    return "", None


@check("oom_killed")
def oom_killed(snapshot: Snapshot) -> list[Detection]:
    """Containers whose last (or current) termination was OOMKilled, with their memory limit."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        for status in container_statuses(pod):
            ended = state_of(status, "lastState", "terminated")
            if ended.get("reason") != "OOMKilled":
                ended = state_of(status, "state", "terminated")
            if ended.get("reason") != "OOMKilled":
                continue
            name = str(status.get("name", ""))
            spec = container_spec(pod, name)
            limit, request = _memory_of(spec, "limits"), _memory_of(spec, "requests")
            sizes = (
                f"its memory limit is {memory_text(limit)}"
                if limit is not None
                else "it sets no memory limit (the node's memory ran out)"
            )
            if request is not None:
                sizes += f" (request {memory_text(request)})"
            usage, usage_source = _usage_text(snapshot, pod)
            finding = (
                f"Pod {pod.namespace}/{pod.name} container {name} was OOMKilled "
                f"({_exit_text(ended.get('exitCode'), 'OOMKilled')}) at "
                f"{stamp(parse_time(ended.get('finishedAt')))}, after "
                f"{status.get('restartCount', 0)} restarts: {sizes}{usage}."
            )
            found.append(
                detection(pod.ref, finding, sources(pod, usage_source), Severity.LIKELY_CAUSE)
            )
    return found


_PULL_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        # Docker Hub and others answer this for both a missing and a private repository.
        words(r"repository does not exist or may require"),
        # The registry's own answer does not tell a missing repository from a private one;
        # the pod's imagePullSecrets (appended by the check) are the evidence that can.
        "the registry answers that the repository does not exist or needs credentials",
    ),
    (
        words(r"repository [^,;]*not found|name unknown|no such repository"),
        "the repository does not exist in the registry",
    ),
    (
        # The registry answered for the repository and found no such manifest: the tag.
        words(r"not found|manifest unknown|does not exist|no such image"),
        "the tag does not exist in the registry",
    ),
    (
        words(r"unauthori[sz]ed|authentication required|denied|forbidden|\b401\b|\b403\b"),
        "the registry refused access to the image (check the pod's imagePullSecrets)",
    ),
    (words(r"no such host|server misbehaving"), "the registry's host name does not resolve"),
    (words(r"connection refused"), "the registry refused the connection"),
    (words(r"network is unreachable|no route to host"), "the registry's network is unreachable"),
    (words(r"x509|certificate|tls handshake"), "the registry's TLS certificate is not trusted"),
    (words(r"i/o timeout|timeout|timed out|dial tcp"), "the connection to the registry timed out"),
    (words(r"invalid reference format|InvalidImageName"), "the image name is not valid"),
)
_PULL_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName"}


def _pull_cause(texts: list[str]) -> tuple[str, str]:
    """The classified cause of a failed pull, and the text that shows it."""
    for pattern, cause in _PULL_CAUSES:
        for text in texts:
            if pattern.search(text):
                return cause, text
    return "the cause is not in the pod's status or events", ""


def _previous_tag(snapshot: Snapshot, pod: KubeObject, container: str) -> str:
    """The sentence naming the tag the workload's previous revision ran, when it differs."""
    current_rs = pod_replica_set(snapshot, pod)
    deployment = owner_name(current_rs, "Deployment") if current_rs else None
    if current_rs is None or deployment is None:
        return ""
    image = str(container_spec(pod, container).get("image", ""))
    repo, tag = image_parts(image)
    for older in replica_sets(snapshot, pod.namespace, deployment):
        if revision(older) >= revision(current_rs):
            continue
        template = as_dict(as_dict(older.spec.get("template")).get("spec"))
        for spec in dicts(template.get("containers")):
            old_repo, old_tag = image_parts(str(spec.get("image", "")))
            if spec.get("name") == container and old_repo == repo and old_tag != tag:
                return (
                    f"; the previous revision ({older.name}, revision {revision(older)}) "
                    f"ran tag {old_tag}, this one asks for {tag}"
                )
        return ""
    return ""


def _pull_secrets(pod: KubeObject) -> str:
    """The pod's imagePullSecrets in words: none means the pull was anonymous."""
    names = [str(s.get("name")) for s in dicts(pod.spec.get("imagePullSecrets")) if s.get("name")]
    if not names:
        return "; the pod sets no imagePullSecrets, so it pulled without credentials"
    return f"; the pod pulls with imagePullSecrets {', '.join(names)}"


@check("image_pull")
def image_pull(snapshot: Snapshot) -> list[Detection]:
    """Containers that cannot pull their image, with the cause read from the status and events."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        for status in container_statuses(pod):
            waiting = state_of(status, "state", "waiting")
            if scalar(waiting.get("reason")) not in _PULL_WAITING:
                continue
            name = str(status.get("name", ""))
            image = str(container_spec(pod, name).get("image") or status.get("image") or "")
            events = [
                e
                for e in snapshot.events_of(pod.ref)
                if e.type == "Warning" and ("pull" in e.message.lower() or image in e.message)
            ]
            texts = [str(waiting.get("message") or ""), *(e.message for e in events)]
            cause, shown = _pull_cause([t for t in texts if t])
            said = f" ({quoted(shown)})" if shown else ""
            if "credentials" in cause or "refused access" in cause:
                said += _pull_secrets(pod)
            finding = (
                f"Pod {pod.namespace}/{pod.name} container {name} cannot pull image {image} "
                f"({waiting.get('reason')}): {cause}{said}"
                f"{_previous_tag(snapshot, pod, name)}."
            )
            evidence = sources(pod, *events[:3])
            found.append(detection(pod.ref, finding, evidence, Severity.LIKELY_CAUSE))
    return found


_START_ERRORS = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
_MISSING_OBJECT = words(r'(configmap|secret)s? "([^"]+)" not found')
_MISSING_KEY = words(r"couldn't find key (\S+) in (ConfigMap|Secret) ([\w.-]+)/([\w.-]+)")


def _present_keys(snapshot: Snapshot, kind: str, name: str, namespace: str) -> str:
    obj = snapshot.get(kind, name, namespace)
    if obj is None:
        return ""
    keys = sorted({*as_dict(obj.body.get("data")), *as_dict(obj.body.get("binaryData"))})
    return f"; its keys are {', '.join(keys) or 'none'}"


def _config_cause(snapshot: Snapshot, pod: KubeObject, message: str) -> str:
    key = _MISSING_KEY.search(message)
    if key:
        kind = "ConfigMap" if key.group(2).lower() == "configmap" else "Secret"
        keys = _present_keys(snapshot, kind, key.group(4), key.group(3))
        return f"{kind} {key.group(3)}/{key.group(4)} has no key {key.group(1)}{keys}"
    missing = _MISSING_OBJECT.search(message)
    if missing:
        kind = "ConfigMap" if missing.group(1).lower() == "configmap" else "Secret"
        return f"{kind} {pod.namespace}/{missing.group(2)} does not exist"
    return quoted(message) if message else "no message"


@check("container_config")
def container_config(snapshot: Snapshot) -> list[Detection]:
    """Containers that cannot start: the missing ConfigMap, Secret or key, or the runtime error."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        for status in container_statuses(pod):
            waiting = state_of(status, "state", "waiting")
            if scalar(waiting.get("reason")) not in _START_ERRORS:
                continue
            message = str(waiting.get("message") or "")
            finding = (
                f"Pod {pod.namespace}/{pod.name} container {status.get('name')} cannot start "
                f"({waiting.get('reason')}): {_config_cause(snapshot, pod, message)}."
            )
            found.append(detection(pod.ref, finding, sources(pod), Severity.LIKELY_CAUSE))
    return found


_PROBE = words(r"^(Liveness|Readiness|Startup) probe (failed|errored)")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s)\b")
_TIMED_OUT = words(r"deadline exceeded|timeout|timed out")


def _probe_target(probe: Mapping[str, Any]) -> str:
    http = as_dict(probe.get("httpGet"))
    if http:
        return f"HTTP GET {http.get('path', '/')} on port {http.get('port')}"
    tcp = as_dict(probe.get("tcpSocket"))
    if tcp:
        return f"TCP port {tcp.get('port')}"
    grpc = as_dict(probe.get("grpc"))
    if grpc:
        return f"gRPC port {grpc.get('port')}"
    command = as_dict(probe.get("exec")).get("command")
    return f"exec {trim(' '.join(map(str, items(command))), 80)}"


def _probe_settings(probe: Mapping[str, Any]) -> str:
    # The API's defaults, written out: the reader compares them with the observed timing.
    return (
        f"timeoutSeconds={probe.get('timeoutSeconds', 1)}, "
        f"periodSeconds={probe.get('periodSeconds', 10)}, "
        f"failureThreshold={probe.get('failureThreshold', 3)}, "
        f"initialDelaySeconds={probe.get('initialDelaySeconds', 0)}"
    )


def _timing(message: str, timeout: float) -> str:
    for amount, unit in _DURATION.findall(message):
        seconds = float(amount) / (1000 if unit == "ms" else 1)
        if seconds > timeout:
            return f"; the observed {amount}{unit} exceeds the {timeout:g}s timeout"
    if _TIMED_OUT.search(message):
        return f"; the endpoint did not answer within the {timeout:g}s timeout"
    return ""


def _undeclared_port(pod: KubeObject, container: str, probe: Mapping[str, Any]) -> str:
    """A note when the probe's port is not one the container declares (and it declares some)."""
    port = {**as_dict(probe.get("httpGet")), **as_dict(probe.get("tcpSocket"))}.get("port")
    declared = dicts(container_spec(pod, container).get("ports"))
    if port is None or not declared:
        return ""
    if any(port in (d.get("containerPort"), d.get("name")) for d in declared):
        return ""
    shown = ", ".join(str(d.get("containerPort")) for d in declared)
    return f"; the probe's port {port} is not among the container's declared ports ({shown})"


def _probes(pod: KubeObject, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    key = f"{kind.lower()}Probe"
    for container in dicts(pod.spec.get("containers")):
        probe = as_dict(container.get(key))
        if probe:
            yield str(container.get("name", "")), probe


def _probe_for(pod: KubeObject, kind: str, message: str) -> tuple[str, dict[str, Any]] | None:
    """The container probe an Unhealthy message is about: the only one, or the one it names."""
    probes = list(_probes(pod, kind))
    if len(probes) == 1:
        return probes[0]
    for name, probe in probes:
        target = {**as_dict(probe.get("httpGet")), **as_dict(probe.get("tcpSocket"))}
        port, path = target.get("port"), target.get("path")
        if (port is not None and f":{port}" in message) or (path and f"{path}" in message):
            return name, probe
    return None


@check("probe_failure")
def probe_failure(snapshot: Snapshot) -> list[Detection]:
    """Unhealthy events (liveness, readiness, startup probes) with the probe's settings."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        reported: set[str] = set()
        for event in snapshot.events_of(pod.ref):
            match = _PROBE.match(event.message)
            if event.reason != "Unhealthy" or not match or match.group(1) in reported:
                continue
            kind = match.group(1)
            reported.add(kind)  # the newest event of each probe kind speaks for the rest
            chosen = _probe_for(pod, kind, event.message)
            described = ""
            if chosen is not None:
                name, probe = chosen
                timeout = number(probe.get("timeoutSeconds"), 1)
                described = (
                    f"; container {name}'s probe is {_probe_target(probe)} with "
                    f"{_probe_settings(probe)}{_timing(event.message, timeout)}"
                    f"{_undeclared_port(pod, name, probe)}"
                )
            finding = (
                f"Pod {pod.namespace}/{pod.name}: {kind.lower()} probe failing, "
                f"{event_line(event)}{described}."
            )
            found.append(detection(pod.ref, finding, sources(pod, event), Severity.SYMPTOM))
    return found


def _node_pressure(snapshot: Snapshot, pod: KubeObject) -> tuple[str, str | None]:
    node = snapshot.get("Node", str(pod.spec.get("nodeName") or ""))
    if node is None:
        return "", None
    pressing = [
        f"{kind}=True"
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
        if (condition(node, kind) or {}).get("status") == "True"
    ]
    if not pressing:
        return "", None
    return f"; its node {node.name} reports {', '.join(pressing)}", node.source


def _ephemeral_text(pod: KubeObject, message: str) -> str:
    """For an eviction over ephemeral storage: what of the pod counts toward it.

    A pod's writable layers, logs and ``emptyDir`` volumes (not those on memory)
    count toward its ephemeral storage; an ``emptyDir`` without ``sizeLimit`` and
    containers without an ``ephemeral-storage`` limit leave only the node's disk
    to stop them.
    """
    if "ephemeral-storage" not in message:
        return ""
    volumes = [
        v
        for v in dicts(pod.spec.get("volumes"))
        if isinstance(v.get("emptyDir"), dict) and v["emptyDir"].get("medium") != "Memory"
    ]
    parts = [
        f"emptyDir {v.get('name')} "
        + (
            f"sizeLimit {v['emptyDir']['sizeLimit']}"
            if v["emptyDir"].get("sizeLimit")
            else "with no sizeLimit"
        )
        for v in volumes
    ]
    unlimited = [
        str(c.get("name"))
        for c in containers(pod.spec)
        if "ephemeral-storage" not in text_map(as_dict(c.get("resources")).get("limits"))
    ]
    if unlimited:
        parts.append(f"no ephemeral-storage limit on {', '.join(unlimited)}")
    return f"; toward its ephemeral storage count: {'; '.join(parts)}" if parts else ""


@check("evicted")
def evicted(snapshot: Snapshot) -> list[Detection]:
    """Pods evicted by the kubelet, with the resource it named and the node's pressure."""
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        events = [e for e in snapshot.events_of(pod.ref) if e.reason == "Evicted"]
        if pod.status.get("reason") != "Evicted" and not events:
            continue
        message = str(pod.status.get("message") or (events[0].message if events else ""))
        pressure, node_source = _node_pressure(snapshot, pod)
        finding = (
            f"Pod {pod.namespace}/{pod.name} was evicted from node "
            f"{pod.spec.get('nodeName') or 'unknown'}: {quoted(message, 240)}{pressure}"
            f"{_ephemeral_text(pod, message)}."
        )
        evidence = sources(pod, *events[:1], node_source)
        found.append(detection(pod.ref, finding, evidence, Severity.SYMPTOM))
    return found


def _failed_pod_text(pod: KubeObject) -> str:
    for status in container_statuses(pod):
        ended = state_of(status, "state", "terminated")
        if ended and ended.get("exitCode") != 0:
            return (
                f"{pod.name} ({status.get('name')}: {ended.get('reason') or 'terminated'}, "
                f"{_exit_text(ended.get('exitCode'), scalar(ended.get('reason')))})"
            )
    return pod.name


@check("job_failed")
def job_failed(snapshot: Snapshot) -> list[Detection]:
    """Jobs with condition Failed=True, with their failed pods' exit codes."""
    found: list[Detection] = []
    for job in snapshot.of_kind("Job"):
        failed = condition(job, "Failed")
        if not failed or failed.get("status") != "True":
            continue
        pods = [p for p in owned(snapshot, "Pod", job) if p.status.get("phase") == "Failed"]
        named = f"; failed pods: {', '.join(_failed_pod_text(p) for p in pods[:3])}" if pods else ""
        finding = (
            f"Job {job.namespace}/{job.name} failed ({failed.get('reason')}: "
            f"{quoted(str(failed.get('message') or ''))}) after {job.status.get('failed', 0)} "
            f"failed pods, backoffLimit {job.spec.get('backoffLimit', 6)}{named}."
        )
        found.append(detection(job.ref, finding, sources(job, *pods[:3]), Severity.SYMPTOM))
    return found


_SETUP_FAILURES = {"FailedMount", "FailedAttachVolume", "FailedCreatePodSandBox", "FailedMapVolume"}


@check("container_creating")
def container_creating(snapshot: Snapshot) -> list[Detection]:
    """Pods not started because a volume does not mount or the sandbox is not created.

    The finding quotes the newest FailedMount, FailedAttachVolume or
    FailedCreatePodSandBox event, and names a missing ConfigMap or Secret.
    """
    found: list[Detection] = []
    for pod in snapshot.of_kind("Pod"):
        if pod_ready(pod):
            continue
        events = [e for e in snapshot.events_of(pod.ref) if e.reason in _SETUP_FAILURES]
        if not events:
            continue
        waiting = {
            str(state_of(s, "state", "waiting").get("reason") or "")
            for s in container_statuses(pod)
        } - {""}
        state = "/".join(sorted(waiting)) or str(pod.status.get("phase") or "not started")
        missing = _MISSING_OBJECT.search(events[0].message)
        cause = ""
        if missing:
            kind = "ConfigMap" if missing.group(1).lower() == "configmap" else "Secret"
            cause = f": {kind} {pod.namespace}/{missing.group(2)} does not exist"
        finding = (
            f"Pod {pod.namespace}/{pod.name} is stuck in {state}{cause}; {event_line(events[0])}."
        )
        found.append(detection(pod.ref, finding, sources(pod, events[0]), Severity.LIKELY_CAUSE))
    return found

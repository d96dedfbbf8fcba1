"""Log checks: log lines classified by what they mean, naming the dependency or resource.

Design constraint: the classes are what any program prints when a resource
runs out, a name does not resolve, a peer refuses or does not answer, access
is denied, TLS fails, configuration does not parse or an exception goes
unhandled; the dependency is
read from the line itself (a ``host:port``, a path, a key, a service
account), never from a list of names. One finding per container log and
class, with the count of lines and the newest one quoted, so that loud
repeats read as one fact. These are symptoms (severity 2): a log says what a
program met, and another check usually says why. The one exception: an
unhandled exception in the pods of code released shortly before the alert is
the regression itself, the likely cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tarsy.evidence.detections.check import check
from tarsy.evidence.detections.kube import detection, quoted, trim, words
from tarsy.evidence.detections.metrics import out_of_line_pods
from tarsy.evidence.detections.network import failing_hosts
from tarsy.evidence.releases import alert_start, minutes_before, release_of
from tarsy.evidence.snapshot import Detection, ObjectRef, PodLog, Snapshot
from tarsy.models import Severity

# host:port, where the host has a letter (not a clock's 10:02) or is an IPv4 address.
_ENDPOINT = re.compile(
    r"(?<![\w.:-])((?:\d{1,3}\.){3}\d{1,3}:\d{1,5}|[A-Za-z0-9-]*[A-Za-z][A-Za-z0-9-]*"
    r"(?:\.[A-Za-z0-9-]+)*:\d{1,5})(?!\w)"
)
_PATH = re.compile(r"(?<![\w/.:])(/(?:[\w.@+-]+/)*[\w.@+-]+)")
_KEY = words(
    r"""\b(?:key|field|property|setting|option|variable)\b\s*[:=]?\s*["'`]?([\w.\-/]+)["'`]?"""
)
_LINE_NO = words(r"\bline (\d+)")
_SERVICE_ACCOUNT = words(
    r'user "system:serviceaccount:([\w.-]+):([\w.-]+)" cannot (\w+) resource "([\w./-]+)"'
)
_VALID_FOR = words(r"certificate is valid for ([^,]+), not (\S+)")
# An exception a program did not handle, as the common runtimes print it: a Python
# traceback or its last line (``KeyError: 'x'``), a Java or .NET exception
# (``java.lang.IllegalStateException: ...``), a Go or Rust panic, a JavaScript
# ``TypeError`` or unhandled rejection. Case-sensitive: a type name is capitalised,
# so a log level ``ERROR`` or a word such as "error" is not one.
_EXCEPTION = re.compile(
    r"Traceback \(most recent call last\)|"
    r"(?<![\w.])(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b(?=[:(]|\s|$)|"
    r"\bpanic: |\bpanicked at\b|Unhandled(?:PromiseRejection| exception| rejection)|"
    r"[Uu]ncaught exception"
)


def _endpoint(line: str) -> str:
    match = _ENDPOINT.search(line)
    return match.group(1) if match else ""


def _path(line: str) -> str:
    match = _PATH.search(line)
    return match.group(1) if match else ""


@dataclass(frozen=True)
class _Class:
    """A class of log line: its name, the pattern, and how to name what it is about."""

    name: str
    pattern: re.Pattern[str]
    subject: Callable[[str], str]


def _tls_subject(line: str) -> str:
    valid = _VALID_FOR.search(line)
    if valid:
        return f"(the certificate is valid for {valid.group(1).strip()}, not {valid.group(2)})"
    if words(r"expired|not yet valid").search(line):
        kind = "certificate has expired"
    elif words(r"unknown authority|unable to verify|self[- ]signed|UNABLE_TO_GET_ISSUER").search(
        line
    ):
        kind = "certificate is signed by an authority the client does not trust"
    else:
        kind = "handshake fails"
    peer = _endpoint(line)
    return f"({kind}{' at ' + peer if peer else ''})"


def _dns_subject(line: str) -> str:
    hosts = failing_hosts(line)
    return f"for {', '.join(hosts)}" if hosts else ""


def _peer_subject(line: str) -> str:
    peer = _endpoint(line)
    return f"at {peer}" if peer else ""


def _permission_subject(line: str) -> str:
    account = _SERVICE_ACCOUNT.search(line)
    if account:
        namespace, name, verb, resource = account.groups()
        return f"(service account {namespace}/{name} is not allowed to {verb} {resource})"
    target = _path(line) or _endpoint(line)
    return f"on {target}" if target else ""


def _resource_subject(line: str) -> str:
    if words(r"no space left|ENOSPC|disk (?:is )?full").search(line):
        path = _path(line)
        return f"(disk space{' at ' + path if path else ''})"
    if words(r"too many open files|EMFILE|ENFILE").search(line):
        return "(file descriptors: too many open files)"
    return "(memory)"


def _config_subject(line: str) -> str:
    parts = []
    path = _path(line)
    if path:
        parts.append(f"file {path}")
    key = _KEY.search(line)
    if key:
        parts.append(f"key {key.group(1)}")
    number = _LINE_NO.search(line)
    if number:
        parts.append(f"line {number.group(1)}")
    return f"({', '.join(parts)})" if parts else ""


def _exception_subject(line: str) -> str:
    match = _EXCEPTION.search(line)
    if match is None or match.group(0).startswith("Traceback"):
        return ""
    return f"({trim(line[match.start() :].strip(), 120)})"


# In order: the first class a line matches is the one it counts for (a TLS failure
# often ends "connection reset", a refused dial may mention a timeout budget).
CLASSES: tuple[_Class, ...] = (
    _Class(
        "TLS failure",
        words(
            r"x509:|certificate (?:has )?expired|unknown (?:certificate )?authority|tls: |"
            r"ssl(?:_|: | routines)|handshake (?:failure|failed)|CERT_HAS_EXPIRED|"
            r"unable to verify the first certificate|self[- ]signed certificate"
        ),
        _tls_subject,
    ),
    _Class(
        "name resolution failing",
        words(
            r"no such host|Name or service not known|Temporary failure in name resolution|"
            r"ENOTFOUND|EAI_AGAIN|UnknownHostException|NXDOMAIN|could not resolve host"
        ),
        _dns_subject,
    ),
    _Class(
        "connection refused",
        words(r"connection refused|ECONNREFUSED|actively refused"),
        _peer_subject,
    ),
    _Class(
        "connection timing out",
        words(
            r"i/o timeout|timed out|ETIMEDOUT|deadline exceeded|connect timeout|"
            r"no route to host|EHOSTUNREACH"
        ),
        _peer_subject,
    ),
    _Class(
        "permission denied",
        words(
            r"permission denied|EACCES|\bforbidden\b|unauthori[sz]ed|access denied|"
            r"authentication failed|\b(?:status|code)[ =:]*40[13]\b"
        ),
        _permission_subject,
    ),
    _Class(
        "resources exhausted",
        words(
            r"out of memory|OutOfMemoryError|cannot allocate memory|ENOMEM|MemoryError|"
            r"no space left on device|ENOSPC|disk (?:is )?full|too many open files|EMFILE|ENFILE"
        ),
        _resource_subject,
    ),
    _Class(
        "configuration does not parse",
        # YAML's own errors are configuration's; a generic parse error counts only next to
        # a configuration word or file, so a request or a query that does not parse is not one.
        words(
            r"yaml: |ScannerError|ParserError|mapping values are not allowed|"
            r"found character that cannot start|unknown field|"
            r"missing required (?:field|key|property|setting|option)|"
            r"invalid (?:config|configuration)\b|"
            r"(?:config\w*|settings|\.ya?ml|\.json|\.toml|\.conf|\.ini|\.properties)\b"
            r"[^\n]{0,80}(?:pars|syntax|unmarshal|decod|invalid character|unexpected token)|"
            r"(?:pars|syntax|unmarshal|decod)[^\n]{0,80}"
            r"(?:config\w*|settings|\.ya?ml|\.json|\.toml|\.conf|\.ini|\.properties)\b"
        ),
        _config_subject,
    ),
    # Last: a runtime's own exception for one of the above (UnknownHostException,
    # OutOfMemoryError) counts as what it means.
    _Class("an unhandled exception", _EXCEPTION, _exception_subject),
)
# The class whose lines, in a pod of new code, are the likely cause of what it serves.
_EXCEPTION_CLASS = CLASSES[-1].name
# A log that repeats one failure is one fact: at most this many classes per log.
_PER_LOG = 3
# The brief is read by models that copy findings: a few log findings, not one per pod.
MAX_FINDINGS = 6


def classify_line(line: str) -> str | None:
    """The class a log line belongs to (:data:`CLASSES`' names), or None."""
    for klass in CLASSES:
        if klass.pattern.search(line):
            return klass.name
    return None


@dataclass
class _Seen:
    klass: _Class
    count: int
    last: str


def classify_log(text: str) -> list[tuple[str, str, int, str]]:
    """(class, what it is about, number of lines, newest line) per class found in ``text``.

    Args:
        text: A log's text.

    Returns:
        The classes in the order their newest line appears, newest first.
    """
    seen: dict[str, _Seen] = {}
    order: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        for klass in CLASSES:
            if klass.pattern.search(line):
                held = seen.get(klass.name)
                seen[klass.name] = _Seen(klass, (held.count if held else 0) + 1, line)
                order = [name for name in order if name != klass.name] + [klass.name]
                break
    return [
        (name, seen[name].klass.subject(seen[name].last), seen[name].count, seen[name].last)
        for name in reversed(order)
    ]


def _log_name(log: PodLog) -> str:
    which = "previous run's log" if log.previous else "log"
    container = f" container {log.container}" if log.container else ""
    return f"Pod {log.namespace}/{log.pod}{container}'s {which}"


@check("log_signals")
def log_signals(snapshot: Snapshot) -> list[Detection]:
    """Gathered logs' lines classified by meaning, each naming the peer, file or key it names.

    Classes: exhausted resources, name resolution, refused and timed-out
    connections, denied access, TLS failures, configuration that does not parse,
    and unhandled exceptions; an exception in a pod of a ReplicaSet created
    shortly before the alert (:mod:`tarsy.evidence.releases`) is the likely cause.
    The same class about the same thing in several pods' logs is one finding
    naming the other pods; at most :data:`MAX_FINDINGS` are reported.
    """
    groups: dict[tuple[str, str, str], list[tuple[PodLog, int, str]]] = {}
    for log in snapshot.logs:
        for name, about, count, line in classify_log(log.text)[:_PER_LOG]:
            groups.setdefault((log.namespace, name, about), []).append((log, count, line))
    found: list[Detection] = []
    for (_namespace, name, about), seen in list(groups.items())[:MAX_FINDINGS]:
        log, count, line = seen[0]
        lines = "1 line" if count == 1 else f"{count} lines"
        others = sorted({other.pod for other, _, _ in seen[1:]} - {log.pod})
        also = f"; the same in pods {', '.join(others[:3])}" if others else ""
        finding = (
            f"{_log_name(log)} shows {name}{' ' + about if about else ''} "
            f"({lines}; newest: {quoted(line)}){also}."
        )
        evidence = [log.source, *(other.source for other, _, _ in seen[1:4])]
        why = _exception_weight(snapshot, log) if name == _EXCEPTION_CLASS else None
        severity = Severity.SYMPTOM
        if why is not None:
            # New code that throws, or the one pod the alert's figures single out.
            reason, source = why
            finding = f"{finding[:-1]}; {reason}."
            evidence += [source] if source else []
            severity = Severity.LIKELY_CAUSE
        found.append(detection(_pod_ref(log), finding, evidence, severity))
    return found


def _exception_weight(snapshot: Snapshot, log: PodLog) -> tuple[str, str] | None:
    """Why an exception in ``log`` is the likely cause, with its evidence; None if it is not.

    It is when the pod runs code released shortly before the alert
    (:mod:`tarsy.evidence.releases`), or when a breakdown of the alert's own
    expression singles the pod out (:func:`~tarsy.evidence.detections.metrics.out_of_line_pods`).
    """
    release = release_of(snapshot, log.namespace, log.pod)
    start = alert_start(snapshot.alert)
    if release is not None and start is not None:
        minutes = minutes_before(release, start) or 0.0
        return (
            f"the pod runs ReplicaSet {release.name}, created {minutes:.0f} min before the "
            "alert began",
            release.source,
        )
    if _pod_ref(log) in out_of_line_pods(snapshot):
        return "the alert's own figures single this pod out", ""
    return None


def _pod_ref(log: PodLog) -> ObjectRef:
    return ObjectRef(kind="Pod", name=log.pod, namespace=log.namespace)

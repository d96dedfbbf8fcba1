"""The whole pipeline on this machine: emulators, functions, topics, and a model.

``start_stack`` brings up the Firestore and Pub/Sub emulators, the ingest,
api, step and dead-letter functions under functions-framework (the same entry
points that are deployed), the steps topic with a push subscription to the
step function and a dead-letter topic, and, when no real Gemini credentials
are configured, the labelled stand-in model. Its state (PIDs, URLs, the local
API key) goes to ``.local/stack.json`` and ``.local/stack.env`` so that
another process can find or stop it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from google.api_core.exceptions import AlreadyExists
from pydantic import BaseModel, Field

from tarsy.settings import Settings
from tarsy_dev.localstack import prometheus, prometheus_mcp
from tarsy_dev.localstack.emulators import start_firestore, start_pubsub
from tarsy_dev.localstack.kubernetes_mcp import ensure_installed, server_config
from tarsy_dev.localstack.processes import (
    ProcessInfo,
    free_port,
    http_ok,
    interrupts_held,
    is_running,
    spawn,
    stop,
    stop_all,
    terminate_all,
    wait_until,
)
from tarsy_dev.localstack.signin import (
    DEFAULT_USER,
    KEY_FILE,
    KEYS_PATH,
    LOCAL_AUDIENCE,
    LOCAL_CLIENT_ID,
    TOKEN_PATH,
    write_key,
    write_service_account,
)

STATE_FILE = "stack.json"
# A service-account key file the proxy's /_signin/token honours: the CLI through IAP, locally.
SERVICE_ACCOUNT_FILE = "signin-service-account.json"
ENV_FILE = "stack.env"
DEAD_LETTER_SUFFIX = "-dead-letter"
PUSH_SUBSCRIPTION_SUFFIX = "-push"
# Deliveries before a step message goes to the dead-letter topic (as in infra/).
MAX_DELIVERY_ATTEMPTS = 5
FUNCTION_TIMEOUT_S = 60.0  # how long a function process may take to answer /healthz
# Pub/Sub's push ack deadline is at most 600 s (as in infra/variables.tf's validation).
MAX_ACK_DEADLINE_S = 600
ACK_DEADLINE_MARGIN_S = 30


def push_ack_deadline(step_timeout_seconds: int) -> int:
    """The push subscription's ack deadline for a step function of this timeout (pure).

    Production's formula (``infra/pubsub.tf``: ``min(600, timeout + 30)``): a step
    that runs as long as its function may is never redelivered while it runs.
    """
    return min(MAX_ACK_DEADLINE_S, step_timeout_seconds + ACK_DEADLINE_MARGIN_S)


Progress = Callable[[str], None]


class FunctionSpec(BaseModel):
    """One functions-framework process."""

    name: str
    source: str
    target: str
    signature_type: str


FUNCTIONS = (
    FunctionSpec(name="ingest", source="functions/ingest/main.py", target="ingest",
                 signature_type="http"),
    FunctionSpec(name="api", source="functions/api/main.py", target="api", signature_type="http"),
    FunctionSpec(name="step", source="functions/step/main.py", target="step",
                 signature_type="cloudevent"),
    FunctionSpec(name="dead-letter", source="functions/step/main.py", target="dead_letter",
                 signature_type="cloudevent"),
)  # fmt: skip


class StackOptions(BaseModel):
    """What to start, and where to keep logs and state."""

    root: Path = Field(description="Repository root (holds functions/).")
    state_dir: Path = Field(description="Where stack.json, stack.env and logs go.")
    project_id: str = "tarsy-local"
    # Hex, not URL-safe base64: a key that starts with "-" reads as an option on a command
    # line (`tarsy --api-key -Rx…` fails), and one key in 64 would.
    api_key: str = Field(default_factory=lambda: secrets.token_hex(24))
    config_path: Path | None = None
    # Extra environment for the functions (e.g. TARSY_LOG_LEVEL).
    function_env: dict[str, str] = Field(default_factory=dict)
    # A Gemini base URL to use instead of starting the stand-in (tests run their own fake).
    gemini_base_url: str | None = None
    # Serve this demo-cluster scenario over the Kubernetes API, with the real
    # kubernetes-mcp-server on it as the "kubernetes" MCP server.
    scenario: str | None = None
    # The cluster's ages count from the real clock (people compare them with kubectl's and
    # their own); False: the scenario's moment, always, so that runs compared with a
    # reference run get the same tool answers (make chaos).
    live_clock: bool = True
    # Call POST /sweep this often, as Cloud Scheduler does in the cloud (None: never).
    sweep_interval: float | None = None
    # A real model the config already points at (the local model): no stand-in starts,
    # and the banner names it.
    model_label: str | None = None
    # Who the browser is signed in as through the local sign-in proxy (and the CLI's default).
    user: str = DEFAULT_USER
    # Roles (TARSY_ACCESS_GRANTS); None: the local user is admin.
    grants: dict[str, list[str]] | None = None


class Stack(BaseModel):
    """A running local stack, as saved in ``stack.json``."""

    project_id: str
    api_key: str
    firestore_host: str
    pubsub_host: str
    ingest_url: str
    api_url: str
    step_url: str
    steps_topic: str
    model: str = Field(description="What answers LLM calls, in words, for the banner.")
    processes: list[ProcessInfo]
    config_path: str | None = Field(default=None, description="The user's config, if any.")
    config_digest: str | None = Field(
        default=None, description="sha256 of the user's config as the stack started with it."
    )
    kubeconfig: str | None = Field(
        default=None, description="The demo cluster's kubeconfig (kubectl --kubeconfig ...)."
    )
    signin_url: str = Field(default="", description="The sign-in proxy in front of the api.")
    signin_key: str = Field(default="", description="The key the proxy and the CLI sign with.")
    user: str = Field(default=DEFAULT_USER, description="Who the proxy signs in as.")
    iap_key_file: str = Field(
        default="",
        description="A service-account key file for the stack's user whose grants the proxy's "
        "token endpoint honours (GOOGLE_APPLICATION_CREDENTIALS for the CLI through IAP).",
    )

    @property
    def signin_key_pem(self) -> bytes:
        """The signing key (a local file, mode 0600)."""
        return Path(self.signin_key).read_bytes()

    prometheus_url: str | None = Field(
        default=None, description="The demo cluster's Prometheus (PromQL on loopback)."
    )

    def client_env(self) -> dict[str, str]:
        """Environment for tools that talk to this stack (the CLI, tests, scripts)."""
        return {
            "TARSY_INGEST_URL": self.ingest_url,
            "TARSY_API_URL": self.api_url,
            "TARSY_UI_URL": self.signin_url,
            "TARSY_SIGNIN_KEY": self.signin_key,
            "TARSY_USER": self.user,
            "TARSY_API_KEY": self.api_key,
            "GOOGLE_CLOUD_PROJECT": self.project_id,
            "FIRESTORE_EMULATOR_HOST": self.firestore_host,
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
        }


def signin_argv(port: int, upstream: str, key: Path, user: str, service_account: Path) -> list[str]:
    """The sign-in proxy's command line, trusting the stack's service-account key file.

    Design constraint: the CLI through IAP (``TARSY_IAP_AUDIENCE``) gets its
    identity token from google-auth, which sends a service account's grant to
    the key file's ``token_uri``; locally that is the proxy's ``/_signin/token``,
    which refuses accounts it was not given. So the proxy is always started with
    the stack's own key file, and the token path runs with nothing to set up.
    """
    return [
        sys.executable, "-m", "tarsy_dev.localstack.signin", "--port", str(port),
        "--upstream", upstream, "--key", str(key), "--user", user,
        "--client-id", LOCAL_CLIENT_ID, "--service-account", str(service_account),
    ]  # fmt: skip


def iap_env(signin_url: str, iap_key_file: str) -> dict[str, str]:
    """The environment that sends the CLI through the stack's proxy as IAP's programmatic access.

    The token is minted by google-auth from the key file (:attr:`Stack.iap_key_file`)
    at the proxy's token endpoint, for the proxy's client id; the api URL is the
    proxy's (the api itself takes no bearer token). Empty without a key file (a
    stack started before the proxy had one).
    """
    if not iap_key_file:
        return {}
    return {
        "TARSY_API_URL": signin_url,
        "TARSY_IAP_AUDIENCE": LOCAL_CLIENT_ID,
        "GOOGLE_APPLICATION_CREDENTIALS": iap_key_file,
    }


def config_digest(path: Path | None) -> str | None:
    """sha256 of the config file's bytes (None without a file, or when it cannot be read)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def restart_reason(running: Stack, wanted: Path | None) -> str | None:
    """Why a running stack cannot serve the config ``make up`` asks for (None: it can).

    Design constraint: the functions read their config once, at start, so a second
    ``make up CONFIG=…`` naming another file, or the same file edited since, is only
    honoured by a restart; without ``CONFIG`` the running stack is kept as it is.
    """
    if wanted is None:
        return None
    if running.config_path != str(wanted):
        return f"it runs {running.config_path or 'the built-in configuration only'}, not {wanted}"
    if running.config_digest != config_digest(wanted):
        return f"{wanted} changed since the stack started"
    return None


def has_real_model(settings: Settings) -> bool:
    """Whether the environment names a real Gemini: an API key or a Vertex project."""
    return settings.gemini_api_key is not None or settings.vertex_project is not None


def _model_env(settings: Settings, options: StackOptions) -> tuple[dict[str, str], str]:
    """Environment for the step function's model, and a description for the banner."""
    if options.model_label is not None:
        return {}, options.model_label
    if options.gemini_base_url is not None:
        return (
            {"GEMINI_API_KEY": "local-fake-key", "GEMINI_BASE_URL": options.gemini_base_url},
            f"fake Gemini at {options.gemini_base_url}",
        )
    env: dict[str, str] = {}
    if settings.gemini_base_url:
        env["GEMINI_BASE_URL"] = settings.gemini_base_url
    if settings.gemini_api_key is not None:
        env["GEMINI_API_KEY"] = settings.gemini_api_key.get_secret_value()
        return env, f"Gemini API ({settings.default_model})"
    if settings.vertex_project is not None:
        env["TARSY_VERTEX_PROJECT"] = settings.vertex_project
        env["TARSY_VERTEX_LOCATION"] = settings.vertex_location
        return env, f"Vertex AI {settings.vertex_project}/{settings.vertex_location}"
    return env, ""


def _function_argv(spec: FunctionSpec, root: Path, port: int) -> list[str]:
    return [
        sys.executable, "-m", "functions_framework",
        "--target", spec.target,
        "--source", str(root / spec.source),
        "--signature-type", spec.signature_type,
        "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip


def _create_topics(stack_env: Mapping[str, str], project_id: str, topic: str, step_url: str,
                   dead_letter_url: str, ack_deadline: int) -> None:  # fmt: skip
    """Create the steps and dead-letter topics and their push subscriptions."""
    from google.cloud import pubsub_v1  # type: ignore[attr-defined]

    with _environ(stack_env):
        publisher = pubsub_v1.PublisherClient()
        subscriber = pubsub_v1.SubscriberClient()
        try:
            topic_path = publisher.topic_path(project_id, topic)
            dead_path = publisher.topic_path(project_id, topic + DEAD_LETTER_SUFFIX)
            for path in (topic_path, dead_path):
                with contextlib.suppress(AlreadyExists):
                    publisher.create_topic(name=path)
            subscriptions = (
                (topic_path, topic + PUSH_SUBSCRIPTION_SUFFIX, step_url, True),
                (dead_path, topic + DEAD_LETTER_SUFFIX + PUSH_SUBSCRIPTION_SUFFIX,
                 dead_letter_url, False),
            )  # fmt: skip
            for source, name, endpoint, with_dead_letter in subscriptions:
                request: dict[str, object] = {
                    "name": subscriber.subscription_path(project_id, name),
                    "topic": source,
                    "push_config": {"push_endpoint": endpoint},
                    "ack_deadline_seconds": ack_deadline,
                    "retry_policy": {
                        "minimum_backoff": {"seconds": 1},
                        "maximum_backoff": {"seconds": 10},
                    },
                }
                if with_dead_letter:
                    request["dead_letter_policy"] = {
                        "dead_letter_topic": dead_path,
                        "max_delivery_attempts": MAX_DELIVERY_ATTEMPTS,
                    }
                with contextlib.suppress(AlreadyExists):
                    subscriber.create_subscription(request=request)
        finally:
            subscriber.close()
            publisher.transport.close()


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration (the emulator hosts for admin clients)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def step_function_timeout(function_env: Mapping[str, str]) -> int:
    """The step timeout the function processes run with (their environment, else the default)."""
    default: int = Settings.model_fields["step_timeout_seconds"].default
    return int(function_env.get("TARSY_STEP_TIMEOUT_SECONDS") or default)


def start_stack(
    options: StackOptions, settings: Settings, progress: Progress = lambda _: None
) -> Stack:
    """Start everything; on failure, stop what was started and re-raise."""
    log_dir = options.state_dir / "logs"
    started: list[ProcessInfo] = []
    try:
        progress("starting the Firestore emulator")
        firestore = start_firestore(log_dir)
        started.append(firestore)
        progress("starting the Pub/Sub emulator")
        pubsub = start_pubsub(log_dir, options.project_id)
        started.append(pubsub)

        model_env, model = _model_env(settings, options)
        if not model:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            progress("no GEMINI_API_KEY or TARSY_VERTEX_PROJECT: starting the scripted stand-in")
            argv = [sys.executable, "-m", "tarsy_dev.fakes.stand_in_server", "--port", str(port)]
            if options.scenario is not None:
                argv += ["--scenario", options.scenario]
            fake = spawn("stand-in-model", argv, log_dir=log_dir, url=url)
            started.append(fake)
            wait_until(_port_open(port), timeout=30, what="stand-in model", process=fake)
            # The stand-in cannot judge an investigation: say so instead of a failed judge.
            model_env = {
                "GEMINI_API_KEY": "local-stand-in",
                "GEMINI_BASE_URL": url,
                "TARSY_SCORING_OFF_REASON": "stand-in model",
            }
            model = f"scripted stand-in at {url} (not a real LLM)"

        config_path = options.config_path
        kubeconfig: Path | None = None
        prometheus_url: str | None = None
        user_config = read_user_config(options.config_path)
        if options.scenario is not None and defines_kubernetes(user_config):
            progress("your config defines the kubernetes MCP server: no demo cluster")
        elif options.scenario is not None:
            config_path, kubeconfig, prometheus_url = _start_demo_cluster(
                options, user_config, log_dir, started, progress
            )

        ports = {spec.name: free_port() for spec in FUNCTIONS}
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        # The proxy starts first: the api reads its keys from it on the first request.
        signin_key = options.state_dir / KEY_FILE
        write_key(signin_key)
        signin_port = free_port()
        signin_url = f"http://127.0.0.1:{signin_port}"
        iap_key_file = options.state_dir / SERVICE_ACCOUNT_FILE
        # Written again each time: its token_uri names this run's port.
        write_service_account(iap_key_file, options.user, signin_url + TOKEN_PATH)
        progress(f"starting the sign-in proxy on {signin_url} (signed in as {options.user})")
        signin = spawn(
            "signin",
            signin_argv(signin_port, urls["api"], signin_key, options.user, iap_key_file),
            log_dir=log_dir,
            url=signin_url,
        )  # fmt: skip
        started.append(signin)
        wait_until(_port_open(signin_port), timeout=30, what="sign-in proxy", process=signin)
        grants = (
            options.grants if options.grants is not None else {"admin": [f"user:{options.user}"]}
        )
        emulator_env = {
            "GOOGLE_CLOUD_PROJECT": options.project_id,
            "FIRESTORE_EMULATOR_HOST": firestore.url,
            "PUBSUB_EMULATOR_HOST": pubsub.url,
        }
        function_env = {
            **os.environ,
            **emulator_env,
            **model_env,
            "TARSY_API_KEY": options.api_key,
            # Links people open (status_url, Slack, the CLI's pages) go through sign-in.
            "TARSY_PUBLIC_API_URL": signin_url,
            "TARSY_IAP_AUDIENCE": LOCAL_AUDIENCE,
            "TARSY_IAP_CERTS_URL": signin_url + KEYS_PATH,
            "TARSY_ACCESS_GRANTS": json.dumps(grants),
            "TARSY_STEPS_TOPIC": settings.steps_topic,
            "TARSY_LOG_FORMAT": "console",
            **({"TARSY_CONFIG_PATH": str(config_path)} if config_path else {}),
            **options.function_env,
        }
        for spec in FUNCTIONS:
            progress(f"starting the {spec.name} function on {urls[spec.name]}")
            started.append(
                spawn(
                    spec.name,
                    _function_argv(spec, options.root, ports[spec.name]),
                    log_dir=log_dir,
                    env=function_env,
                    cwd=options.root,
                    url=urls[spec.name],
                )
            )
        for info in started[-len(FUNCTIONS) :]:
            wait_until(
                http_ok(info.url + "/healthz"),
                timeout=FUNCTION_TIMEOUT_S,
                what=f"{info.name} function",
                process=info,
            )
        progress(f"creating topic {settings.steps_topic} with a push subscription to step")
        _create_topics(
            emulator_env, options.project_id, settings.steps_topic, urls["step"],
            urls["dead-letter"], push_ack_deadline(step_function_timeout(function_env)),
        )  # fmt: skip
        if options.sweep_interval is not None:
            started.append(
                spawn(
                    "scheduler",
                    [sys.executable, "-m", "tarsy_dev.localstack.scheduler",
                     "--interval", str(options.sweep_interval)],
                    log_dir=log_dir,
                    env={**os.environ, "TARSY_API_URL": urls["api"],
                         "TARSY_API_KEY": options.api_key},
                )
            )  # fmt: skip
        stack = Stack(
            project_id=options.project_id,
            api_key=options.api_key,
            firestore_host=firestore.url,
            pubsub_host=pubsub.url,
            ingest_url=urls["ingest"],
            api_url=urls["api"],
            step_url=urls["step"],
            steps_topic=settings.steps_topic,
            model=model,
            processes=started,
            config_path=str(options.config_path) if options.config_path else None,
            config_digest=config_digest(options.config_path),
            kubeconfig=str(kubeconfig) if kubeconfig else None,
            signin_url=signin_url,
            signin_key=str(signin_key),
            user=options.user,
            iap_key_file=str(iap_key_file),
            prometheus_url=prometheus_url,
        )
        save_stack(stack, options.state_dir)
        return stack
    except BaseException:
        with interrupts_held():
            stop_all(started, progress=progress)
        raise


def read_user_config(path: Path | None) -> dict[str, Any]:
    """The user's YAML config as a mapping (empty without one)."""
    if path is None:
        return {}
    loaded = yaml.safe_load(path.read_text())
    return dict(loaded) if isinstance(loaded, dict) else {}


def defines_server(config: Mapping[str, Any], name: str) -> bool:
    """Whether the user's config names its own MCP server ``name`` (which then wins)."""
    servers = config.get("mcp_servers")
    return isinstance(servers, dict) and name in servers


def defines_kubernetes(config: Mapping[str, Any]) -> bool:
    """Whether the user's config names its own ``kubernetes`` MCP server (which then wins)."""
    servers = config.get("mcp_servers")
    return isinstance(servers, dict) and "kubernetes" in servers


def with_kubernetes(config: Mapping[str, Any], server: Mapping[str, Any]) -> dict[str, Any]:
    """The user's config (or none) with ``server`` as its ``kubernetes`` MCP server.

    Args:
        config: The user's config; its other servers, agents and chains are kept.
        server: The ``kubernetes`` entry (see ``kubernetes_mcp.server_config``).

    Returns:
        The config to give the functions.
    """
    servers = dict(config.get("mcp_servers") or {})
    servers["kubernetes"] = dict(server)
    return {**config, "mcp_servers": servers}


def start_kube_api(
    scenario: str,
    kubeconfig: Path,
    log_dir: Path,
    *,
    switchable: bool = False,
    live_clock: bool = False,
) -> ProcessInfo:
    """Serve a demo-cluster scenario over the Kubernetes API; return once it answers.

    The process writes ``kubeconfig`` (pointing at it) before it answers.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "tarsy_dev.demo_cluster", "--scenario", scenario,
        "--port", str(port), "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip
    if switchable:
        argv.append("--switchable")
    if live_clock:
        argv.append("--live-clock")
    info = spawn("demo-cluster", argv, log_dir=log_dir, url=url)
    try:
        wait_until(http_ok(f"{url}/version"), timeout=60, what="demo cluster", process=info)
    except BaseException:
        stop(info)
        raise
    return info


def _start_demo_cluster(
    options: StackOptions,
    user_config: Mapping[str, Any],
    log_dir: Path,
    started: list[ProcessInfo],
    progress: Progress,
) -> tuple[Path, Path, str | None]:
    """Serve the scenario's cluster and its metrics; point the MCP servers at them.

    "kubernetes" is kubernetes-mcp-server on the cluster's API; "prometheus" is
    prometheus-mcp-server on a real Prometheus holding every scenario's metrics
    history (unless the user's config names its own "prometheus").

    Returns:
        The config to give the functions, the cluster's kubeconfig, and the
        Prometheus URL (None when the user's config brings its own server).
    """
    assert options.scenario is not None
    binary = ensure_installed(options.root, progress)
    kubeconfig = options.state_dir / "demo-cluster" / "kubeconfig"
    progress(f"starting the demo cluster's Kubernetes API (scenario {options.scenario})")
    started.append(
        start_kube_api(options.scenario, kubeconfig, log_dir, live_clock=options.live_clock)
    )
    server = server_config(
        binary, kubeconfig, f"kubernetes-mcp-server on the demo cluster ({options.scenario})"
    )
    config = with_kubernetes(user_config, server)
    prometheus_url: str | None = None
    if not defines_server(user_config, "prometheus"):
        prometheus_url = _start_prometheus(options, config, log_dir, started, progress)
    path = options.state_dir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, kubeconfig, prometheus_url


def _start_prometheus(
    options: StackOptions,
    config: dict[str, Any],
    log_dir: Path,
    started: list[ProcessInfo],
    progress: Progress,
) -> str:
    """Backfill the scenarios' metrics into a Prometheus, and name it "prometheus" in config."""
    binary = prometheus_mcp.ensure_installed(options.root, progress)
    info = prometheus.serve_scenario_metrics(options.root, options.state_dir, log_dir, progress)
    started.append(info)
    servers = config.setdefault("mcp_servers", {})
    servers["prometheus"] = prometheus_mcp.server_config(
        binary, info.url, f"prometheus-mcp-server on the demo cluster's Prometheus ({info.url})"
    )
    return info.url


def _port_open(port: int) -> Callable[[], bool]:
    import socket

    def check() -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    return check


def save_stack(stack: Stack, state_dir: Path) -> None:
    """Write ``stack.json`` (for ``down``) and ``stack.env`` (for the CLI and scripts)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / STATE_FILE).write_text(stack.model_dump_json(indent=2))
    env_lines = [f"{key}={value}" for key, value in stack.client_env().items()]
    env_path = state_dir / ENV_FILE
    env_path.write_text("\n".join(env_lines) + "\n")
    env_path.chmod(0o600)


def load_stack(state_dir: Path) -> Stack | None:
    """Read a saved stack, or None if there is none."""
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    return Stack.model_validate(json.loads(path.read_text()))


def stop_stack(
    stack: Stack,
    state_dir: Path | None = None,
    progress: Progress = lambda _: None,
    *,
    stop_one: Callable[[ProcessInfo], None] | None = None,
) -> list[str]:
    """Stop every process of the stack by PID (group), saying which; return the names stopped.

    Ctrl-C and SIGTERM are held until every process is stopped (a second Ctrl-C
    while a demo shuts down used to leave the emulators and functions running).
    The state files go only once nothing is left running, so ``make down`` can
    finish the job otherwise.

    Args:
        stack: The running stack.
        state_dir: Where its ``stack.json`` and ``stack.env`` are, to remove them.
        progress: Told each process as it is stopped.
        stop_one: Stops one process group (default: ``processes.stop``).

    Returns:
        The names of the processes stopped.
    """
    held = "Ctrl-C: still stopping the stack, or its processes would keep running"
    with interrupts_held(lambda: progress(held)):
        alive: Callable[[int], bool] = is_running
        if stop_one is None:
            # Every process is asked to stop at once, so their shutdowns overlap (one by
            # one they took ~2 s each); the stops below wait for each and kill what lingers.
            running = {p.pid for p in stack.processes if is_running(p.pid)}
            terminate_all(stack.processes)
            alive = running.__contains__
        stopped, left = stop_all(
            stack.processes, progress=progress, stop_one=stop_one or stop, alive=alive
        )
        if left:
            progress(f"may still be running: {', '.join(left)}; run `make down` again")
        elif state_dir is not None:
            for name in (STATE_FILE, ENV_FILE):
                (state_dir / name).unlink(missing_ok=True)
    return stopped


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a ``KEY=value`` file such as ``.local/stack.env``."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip()
    return values

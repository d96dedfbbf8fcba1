"""The local stack for integration tests: real emulators, real functions-framework processes.

One stack per test session (starting it costs ~10 s). The model is a
:class:`FakeGemini` in this process, so each test scripts replies and reads
the requests the real google-genai SDK sent from the step function process.
Every test starts from an empty Firestore and an empty fake.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.api_core.exceptions import DeadlineExceeded
from google.cloud import pubsub_v1  # type: ignore[attr-defined]

from tarsy.access.iap import ASSERTION_HEADER
from tarsy.app import Deps
from tarsy.bus import get_bus
from tarsy.config import load_config
from tarsy.models import StepMessage
from tarsy.persistence.store import Store, get_store
from tarsy.settings import Settings
from tarsy_dev.client import LocalSignIn, TarsyClient
from tarsy_dev.fakes.fake_gemini import FakeGemini, StandInResponder
from tarsy_dev.localstack.emulators import clear_firestore
from tarsy_dev.localstack.signin import DEFAULT_USER, assertion
from tarsy_dev.localstack.stack import Stack, StackOptions, start_stack, stop_stack

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("chains.yaml")
SCENARIO = "crashloop-bad-configmap"  # the demo cluster behind the "kubernetes" MCP server
RUNBOOK_HOST = "127.0.0.1"  # an allowed runbook host, served in the tests that need it
# People of the test stack, one per role (the stack's own user, stack.user, is admin).
RESPONDER = "rita.responder@example.com"
VIEWER = "victor.viewer@example.com"
VIEWER_DOMAIN = "viewers.example.com"  # everyone there is a viewer
GRANTS = {
    "viewer": [f"user:{VIEWER}", f"domain:{VIEWER_DOMAIN}"],
    "responder": [f"user:{RESPONDER}"],
    "admin": [f"user:{DEFAULT_USER}"],
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.integration)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def fake_gemini() -> Iterator[FakeGemini]:
    # Bound to all interfaces' loopback only; the step function process reaches it by URL.
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def backup_gemini() -> Iterator[FakeGemini]:
    """A second fake Gemini, for a provider's fallback."""
    with FakeGemini() as fake:
        yield fake


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, fake_gemini: FakeGemini) -> Iterator[Stack]:
    state_dir = tmp_path_factory.mktemp("stack")
    options = StackOptions(
        root=ROOT,
        state_dir=state_dir,
        gemini_base_url=fake_gemini.url,
        config_path=CONFIG,
        scenario=SCENARIO,
        grants=GRANTS,
        # A short lease keeps the redelivery tests quick; steps here take milliseconds.
        function_env={
            "TARSY_STEP_LEASE_SECONDS": "30",
            "TARSY_LOG_LEVEL": "INFO",
            # Runbooks from a loopback server (test_runbooks.py); "localhost" stays refused.
            "TARSY_ALLOWED_RUNBOOK_DOMAINS": f"github.com,raw.githubusercontent.com,{RUNBOOK_HOST}",
        },
    )
    # A CI timeout or Ctrl-C sends SIGTERM/SIGINT: turn it into an exception so that the
    # teardown below stops every process of the stack instead of leaking them.
    signal.signal(signal.SIGTERM, _interrupt)
    running = start_stack(options, Settings())
    # This process talks to the same emulators (in-process engine tests, assertions).
    emulators = {
        key: value
        for key, value in running.client_env().items()
        if key in ("GOOGLE_CLOUD_PROJECT", "FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")
    }
    saved = {key: os.environ.get(key) for key in emulators}
    os.environ.update(emulators)
    try:
        yield running
    finally:
        stop_stack(running, state_dir)
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def stack_config_path(stack: Stack) -> Path:
    """The config the functions run with: the test chains, kubernetes-mcp-server on the cluster."""
    [step] = [p for p in stack.processes if p.name == "step"]
    return Path(step.log_path).parent.parent / "config.yaml"


@pytest.fixture(scope="session")
def stack_settings(stack: Stack, fake_gemini: FakeGemini) -> Settings:
    """Settings as the functions see them, for in-process use of the library."""
    return Settings(
        GOOGLE_CLOUD_PROJECT=stack.project_id,
        TARSY_API_KEY=stack.api_key,
        TARSY_STEPS_TOPIC=stack.steps_topic,
        GEMINI_API_KEY="local-fake-key",
        GEMINI_BASE_URL=fake_gemini.url,
        TARSY_STEP_LEASE_SECONDS=30,
        TARSY_CONFIG_PATH=str(stack_config_path(stack)),
    )


@pytest.fixture(scope="session")
def store(stack_settings: Settings) -> Store:
    return get_store(stack_settings)


@pytest.fixture(scope="session")
def deps(stack_settings: Settings, store: Store) -> Deps:
    return Deps(
        settings=stack_settings,
        config=load_config(stack_settings),
        store=store,
        bus=get_bus(stack_settings),
    )


@pytest.fixture(autouse=True)
def clean(request: pytest.FixtureRequest) -> None:
    """Empty Firestore and the fake model before each integration test."""
    if "stack" not in request.fixturenames:
        return
    running: Stack = request.getfixturevalue("stack")
    fake: FakeGemini = request.getfixturevalue("fake_gemini")
    clear_firestore(running.firestore_host, running.project_id)
    fake.reset()
    fake.responder = StandInResponder()


@pytest.fixture
def client(stack: Stack) -> Iterator[TarsyClient]:
    with TarsyClient(
        ingest_url=stack.ingest_url,
        api_url=stack.api_url,
        api_key=stack.api_key,
        signin=LocalSignIn(stack.signin_key_pem, stack.user),
        ui_url=stack.signin_url,
    ) as tarsy:
        yield tarsy


def signed_in(stack: Stack, email: str | None = None) -> dict[str, str]:
    """Headers of a request signed in as ``email`` (default: the stack's admin), as a proxy's."""
    return {ASSERTION_HEADER: assertion(stack.signin_key_pem, email or stack.user)}


class Tap:
    """A pull subscription on the steps topic: sees every message published from now on."""

    def __init__(self, stack: Stack) -> None:
        self._subscriber = pubsub_v1.SubscriberClient()
        topic = f"projects/{stack.project_id}/topics/{stack.steps_topic}"
        self.path = self._subscriber.subscription_path(stack.project_id, f"tap-{uuid.uuid4().hex}")
        self._subscriber.create_subscription(name=self.path, topic=topic)

    def drain(self, *, wait: float = 1.0) -> list[StepMessage]:
        """Pull and acknowledge every step message that arrives within ``wait`` seconds."""
        return [StepMessage.model_validate_json(m.data) for m in self.drain_raw(wait=wait)]

    def drain_raw(self, *, wait: float = 1.0) -> list[pubsub_v1.types.PubsubMessage]:
        """Pull and acknowledge everything that arrives within ``wait`` seconds, as published."""
        messages: list[pubsub_v1.types.PubsubMessage] = []
        end = time.monotonic() + wait
        while (remaining := end - time.monotonic()) > 0:
            try:
                # The emulator holds an empty pull open; a short deadline bounds the wait.
                response = self._subscriber.pull(
                    request={"subscription": self.path, "max_messages": 100},
                    timeout=max(0.1, min(remaining, 0.5)),
                    retry=None,
                )
            except DeadlineExceeded:
                continue
            if response.received_messages:
                self._subscriber.acknowledge(
                    request={
                        "subscription": self.path,
                        "ack_ids": [m.ack_id for m in response.received_messages],
                    }
                )
                messages.extend(m.message for m in response.received_messages)
        return messages

    def close(self) -> None:
        self._subscriber.delete_subscription(subscription=self.path)
        self._subscriber.close()


@pytest.fixture
def tap(stack: Stack) -> Iterator[Tap]:
    t = Tap(stack)
    yield t
    t.close()


def cli_flags(stack: Stack, monkeypatch: pytest.MonkeyPatch, user: str | None = None) -> list[str]:
    """``tarsy`` flags for this stack, signed in as ``user`` (default: the stack's admin).

    The key comes from the environment, as ``.local/stack.env`` gives it to the CLI.
    """
    monkeypatch.setenv("TARSY_SIGNIN_KEY", stack.signin_key)
    return ["--api-url", stack.api_url, "--api-key", stack.api_key, "--user", user or stack.user]

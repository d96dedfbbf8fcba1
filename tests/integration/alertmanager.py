"""A real Prometheus Alertmanager for the integration tests: Debian's package, our own process.

The binary comes from Debian's ``prometheus-alertmanager`` package (0.25 on
bookworm). When it is not on PATH and the tests run as root with apt-get (CI
on a clean machine), it is installed here, so ``make test`` needs no manual
step. It runs without systemd as a child in its own process group, on a free
loopback port, clustering off, with a webhook receiver pointed at an ingest
route; alerts are fired and resolved with ``amtool`` as an operator would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml

from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, stop, wait_until

BINARY = "prometheus-alertmanager"
AMTOOL = "amtool"
PACKAGE = "prometheus-alertmanager"
STARTUP_TIMEOUT_S = 30.0
_SENT = re.compile(r'^alertmanager_notifications_total\{integration="webhook"\} (\d+)', re.M)
_FAILED = re.compile(
    r'^alertmanager_notifications_failed_total\{integration="webhook"(?:,[^}]*)?\} (\d+)', re.M
)


def ensure_installed() -> None:
    """Install Debian's package when the binaries are missing and we may (root, apt-get).

    Raises:
        RuntimeError: Missing and not installable here, or the install failed.
    """
    if shutil.which(BINARY) and shutil.which(AMTOOL):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            f"{BINARY} is not on PATH: install Debian's {PACKAGE} package "
            f"(sudo apt-get install -y {PACKAGE}); the alert-source tests run a real Alertmanager"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", PACKAGE]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        # A clean machine may have no package lists yet.
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True)
        subprocess.run(install, env=env, capture_output=True, check=True)
    if not (shutil.which(BINARY) and shutil.which(AMTOOL)):
        raise RuntimeError(f"installed {PACKAGE}, yet {BINARY} or {AMTOOL} is not on PATH")


def receiver_config(webhook_url: str, password: str) -> dict[str, object]:
    """An ``alertmanager.yml`` with one webhook receiver, as the README documents it.

    Each alert is its own group (``group_by: ['...']``) and every wait is short,
    so a test sees a notification within seconds; ``repeat_interval`` is short
    too, so a firing alert is sent again and again (the repeats tarsy dedups).
    """
    return {
        "route": {
            "receiver": "tarsy",
            "group_by": ["..."],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "2s",
        },
        "receivers": [
            {
                "name": "tarsy",
                "webhook_configs": [
                    {
                        "url": webhook_url,
                        "send_resolved": True,
                        "http_config": {
                            "basic_auth": {"username": "alertmanager", "password": password}
                        },
                    }
                ],
            }
        ],
    }


@dataclass
class Alertmanager:
    """A running Alertmanager."""

    url: str
    process: ProcessInfo

    def amtool(self, *args: str) -> str:
        """Run ``amtool --alertmanager.url=URL ARGS``; return its output."""
        done = subprocess.run(
            [AMTOOL, f"--alertmanager.url={self.url}", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"amtool {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.stdout

    def fire(self, labels: dict[str, str], annotations: dict[str, str]) -> None:
        """Fire (or re-fire) an alert."""
        self.amtool(
            "alert",
            "add",
            *(f"{k}={v}" for k, v in labels.items()),
            *(f"--annotation={k}={v}" for k, v in annotations.items()),
        )

    def resolve(self, labels: dict[str, str]) -> None:
        """Resolve an alert: the same labels, ended now."""
        end = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.amtool("alert", "add", *(f"{k}={v}" for k, v in labels.items()), f"--end={end}")

    def webhook_counts(self) -> tuple[int, int]:
        """Webhook notifications (sent, failed) so far, from its /metrics."""
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        sent = sum(int(n) for n in _SENT.findall(text))
        failed = sum(int(n) for n in _FAILED.findall(text))
        return sent, failed


def start_alertmanager(webhook_url: str, password: str, state_dir: Path) -> Alertmanager:
    """Configure and start an Alertmanager; wait until it is ready.

    Args:
        webhook_url: Where its receiver posts (an ingest route).
        password: The basic-auth password it sends (the tarsy API key).
        state_dir: Its config, storage and log go here.

    Returns:
        The running Alertmanager; stop it with :func:`stop_alertmanager`.
    """
    ensure_installed()
    state_dir.mkdir(parents=True, exist_ok=True)
    config = state_dir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(receiver_config(webhook_url, password)))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        BINARY,
        f"--config.file={config}",
        f"--storage.path={state_dir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    process = spawn("alertmanager", argv, log_dir=state_dir, url=url)
    try:
        wait_until(
            http_ok(f"{url}/-/ready"),
            timeout=STARTUP_TIMEOUT_S,
            what="alertmanager",
            process=process,
        )
    except BaseException:
        stop(process)
        raise
    return Alertmanager(url=url, process=process)


def stop_alertmanager(alertmanager: Alertmanager) -> None:
    """Stop it (its process group)."""
    stop(alertmanager.process)

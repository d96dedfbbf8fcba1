"""The Firestore and Pub/Sub emulators from the Google Cloud CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, wait_until

STARTUP_TIMEOUT_S = 90.0


def _gcloud() -> str:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise RuntimeError(
            "the Google Cloud CLI (gcloud) is needed for the Firestore and Pub/Sub emulators"
        )
    return gcloud


def start_firestore(log_dir: Path) -> ProcessInfo:
    """Start the Firestore emulator on a free loopback port and wait until it serves."""
    port = free_port()
    host = f"127.0.0.1:{port}"
    info = spawn(
        "firestore-emulator",
        [_gcloud(), "beta", "emulators", "firestore", "start", f"--host-port={host}", "--quiet"],
        log_dir=log_dir,
        url=host,
    )
    wait_until(
        http_ok(f"http://{host}/"),
        timeout=STARTUP_TIMEOUT_S,
        what="firestore emulator",
        process=info,
    )
    return info


def start_pubsub(log_dir: Path, project_id: str) -> ProcessInfo:
    """Start the Pub/Sub emulator on a free loopback port and wait until it serves."""
    port = free_port()
    host = f"127.0.0.1:{port}"
    info = spawn(
        "pubsub-emulator",
        [
            _gcloud(),
            "beta",
            "emulators",
            "pubsub",
            "start",
            f"--host-port={host}",
            f"--project={project_id}",
            "--quiet",
        ],
        log_dir=log_dir,
        url=host,
    )
    wait_until(
        http_ok(f"http://{host}/"),
        timeout=STARTUP_TIMEOUT_S,
        what="pubsub emulator",
        process=info,
    )
    return info


def clear_firestore(host: str, project_id: str) -> None:
    """Delete every document in the emulator's default database."""
    url = f"http://{host}/emulator/v1/projects/{project_id}/databases/(default)/documents"
    httpx.delete(url, timeout=10.0).raise_for_status()

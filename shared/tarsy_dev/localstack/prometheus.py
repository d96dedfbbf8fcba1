"""A real Prometheus holding the demo-cluster scenarios' metrics, served on loopback.

Design constraint: the metrics tools must answer from the real query engine a team
runs, not from a fake: Debian's ``prometheus`` package (installed by
``scripts/install_prometheus.sh`` with apt-get, like Chromium) runs as our own child
process, and each scenario's history (``tarsy_dev.demo_cluster.metrics``) is
backfilled into its TSDB with ``promtool tsdb create-blocks-from openmetrics``.

Every scenario with metrics is backfilled into one TSDB, so an evaluation that
switches scenarios needs no restart: the scenarios' windows never overlap (a unit
test holds them to it), and a query at one incident's time sees only that incident.
The blocks are built once per content (a digest names them under the cache
directory) and copied into a fresh data directory for each Prometheus, which owns
and locks its directory. Prometheus evaluates no rule and scrapes nothing here: the
history ends at each scenario's ``now``, in the past.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from tarsy.errors import ConfigError
from tarsy_dev.demo_cluster.loader import load_scenario, scenario_names
from tarsy_dev.demo_cluster.metrics import openmetrics
from tarsy_dev.demo_cluster.models import Scenario
from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, stop, wait_until

BINARY = "prometheus"
PROMTOOL = "promtool"
INSTALL_SCRIPT = Path("scripts") / "install_prometheus.sh"
STARTUP_TIMEOUT_S = 60.0
PROMTOOL_TIMEOUT_S = 300.0
# The scenarios' history is in the past: keep every block whatever today's date is.
RETENTION = "100y"


class PrometheusUnavailable(ConfigError):
    """Prometheus or promtool is missing and could not be installed, or a backfill failed."""


def ensure_installed(root: Path, progress: Callable[[str], None] = lambda _: None) -> None:
    """Install Debian's prometheus with the project's script when it is not on PATH.

    Raises:
        PrometheusUnavailable: Still missing afterwards (no apt-get, or the install failed).
    """
    if shutil.which(BINARY) and shutil.which(PROMTOOL):
        return
    progress("installing Debian's prometheus (scripts/install_prometheus.sh)")
    completed = subprocess.run(
        ["bash", str(root / INSTALL_SCRIPT)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0 or not (shutil.which(BINARY) and shutil.which(PROMTOOL)):
        detail = (completed.stderr or completed.stdout).strip()[-2000:]
        raise PrometheusUnavailable(f"prometheus could not be installed: {detail}")


def histories(scenarios: Sequence[Scenario]) -> dict[str, str]:
    """Each scenario with metrics → its history in OpenMetrics (the backfill's input)."""
    return {
        s.name: openmetrics(s.metrics, s.cluster.now) for s in scenarios if s.metrics is not None
    }


def backfill(scenarios: Sequence[Scenario], cache_dir: Path) -> Path:
    """The TSDB blocks of every scenario's history, built once for this content.

    Args:
        scenarios: The scenarios (those without metrics add nothing).
        cache_dir: Where built blocks are kept, one directory per content digest.

    Returns:
        A directory of TSDB blocks (copy it before a Prometheus opens it).

    Raises:
        PrometheusUnavailable: promtool refused a history (its message says why).
    """
    texts = histories(scenarios)
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(f"{name}\n{texts[name]}".encode())
    blocks = cache_dir / digest.hexdigest()[:16]
    if (blocks / ".complete").is_file():
        return blocks
    # Its own directory per process: two stacks starting at once may both build.
    building = cache_dir / f"{blocks.name}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    for name, text in sorted(texts.items()):
        source = building / f"{name}.om"
        source.write_text(text)
        completed = subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(building)],
            capture_output=True,
            text=True,
            timeout=PROMTOOL_TIMEOUT_S,
            check=False,
        )
        source.unlink()
        if completed.returncode != 0:
            detail = (completed.stderr or completed.stdout).strip()[-2000:]
            raise PrometheusUnavailable(f"promtool could not backfill {name!r}: {detail}")
    (building / ".complete").touch()
    try:
        building.rename(blocks)
    except OSError:  # another process finished first: its blocks are the same
        shutil.rmtree(building, ignore_errors=True)
        if not (blocks / ".complete").is_file():
            raise
    return blocks


def start_prometheus(blocks: Path, state_dir: Path, log_dir: Path) -> ProcessInfo:
    """Serve ``blocks`` with a Prometheus of our own on a free loopback port.

    Args:
        blocks: Built by :func:`backfill`; copied, never opened in place.
        state_dir: Its configuration and data directory go in ``state_dir/prometheus``.
        log_dir: Where its log goes.

    Returns:
        The process; its ``url`` is the PromQL endpoint's base
        (``http://127.0.0.1:PORT``).
    """
    home = state_dir / "prometheus"
    data = home / "data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    for block in blocks.iterdir():
        if block.is_dir():
            shutil.copytree(block, data / block.name)
    config = home / "prometheus.yml"
    config.write_text("# Nothing to scrape: the history is backfilled.\nglobal: {}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        BINARY, f"--config.file={config}", f"--storage.tsdb.path={data}",
        f"--storage.tsdb.retention.time={RETENTION}", f"--web.listen-address=127.0.0.1:{port}",
    ]  # fmt: skip
    info = spawn("prometheus", argv, log_dir=log_dir, url=url)
    try:
        wait_until(
            http_ok(f"{url}/-/ready"), timeout=STARTUP_TIMEOUT_S, what="prometheus", process=info
        )
    except BaseException:
        stop(info)
        raise
    return info


def serve_scenario_metrics(
    root: Path, state_dir: Path, log_dir: Path, progress: Callable[[str], None] = lambda _: None
) -> ProcessInfo:
    """Install if need be, backfill every bundled scenario's metrics, and serve them.

    Args:
        root: The repository root (the install script; ``.local/prometheus-blocks`` caches).
        state_dir: The stack's state directory (the Prometheus data goes under it).
        log_dir: Where its log goes.
        progress: Told what is being done.

    Returns:
        The running Prometheus (stop it with ``processes.stop``).
    """
    ensure_installed(root, progress)
    scenarios = [load_scenario(name) for name in scenario_names()]
    progress("backfilling the scenarios' metrics into Prometheus (promtool)")
    blocks = backfill(scenarios, root / ".local" / "prometheus-blocks")
    info = start_prometheus(blocks, state_dir, log_dir)
    progress(f"Prometheus serves the demo cluster's metrics on {info.url}")
    return info

"""The local stand-in for Cloud Scheduler: ``POST {api}/sweep`` and ``POST {api}/retention``.

``make up`` and ``make demo`` run it, so a local stack recovers from a killed
step and times out overdue sessions the way the deployed one does. Design
constraint: it fires as Cloud Scheduler does, on the wall clock's boundaries
(every minute on the minute for the sweep, ``* * * * *``), not an interval
after the previous call ended, and each job has its own thread, so a slow
retention pass never delays a sweep (infra/scheduler.tf has the same two
jobs). The api URL and key come from the environment (``TARSY_API_URL``,
``TARSY_API_KEY``).
"""

from __future__ import annotations

import argparse
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

import httpx

from tarsy_dev.client import KEEPALIVE_EXPIRY_S
from tarsy_dev.client_settings import ClientSettings

logger = logging.getLogger("tarsy.scheduler")

SWEEP_PATH = "/sweep"
RETENTION_PATH = "/retention"


def post_once(client: httpx.Client, api_url: str, path: str) -> dict[str, object]:
    """Call one scheduled endpoint of the api once; return its report."""
    response = client.post(f"{api_url.rstrip('/')}{path}")
    response.raise_for_status()
    report: dict[str, object] = response.json()
    return report


def sweep_once(client: httpx.Client, api_url: str) -> dict[str, object]:
    """Call the sweeper once; return its report."""
    return post_once(client, api_url, SWEEP_PATH)


def next_fire(now: float, interval: float) -> float:
    """The first wall-clock multiple of ``interval`` after ``now`` (a cron tick), in seconds."""
    return (math.floor(now / interval) + 1) * interval


class Stopper(Protocol):
    """What ends a job: waits up to ``timeout`` seconds, True once the job must stop."""

    def wait(self, timeout: float) -> bool:
        """Wait for the stop, at most ``timeout`` seconds; whether it came."""
        ...


def run_on_schedule(
    client: httpx.Client,
    api_url: str,
    path: str,
    interval: float,
    stop: Stopper,
    clock: Callable[[], float] = time.time,
) -> None:
    """POST ``path`` at every tick of ``interval`` until ``stop`` is set; log what it did."""
    while not stop.wait(max(next_fire(clock(), interval) - clock(), 0.0)):
        try:
            report = post_once(client, api_url, path)
        except httpx.HTTPError as e:
            logger.warning("%s failed: %s", path, e)
            continue
        if any(report.get(key) for key in ("republished", "timed_out", "stamped")):
            logger.info("%s: %s", path, report)


def main(argv: list[str] | None = None) -> None:
    """Run the sweep and the retention job on their schedules until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tarsy_dev.localstack.scheduler")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between sweeps")
    parser.add_argument(
        "--retention-interval", type=float, default=300.0, help="seconds between retention passes"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = ClientSettings()
    if not settings.api_url:
        raise SystemExit("TARSY_API_URL is not set")
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    stop = threading.Event()
    with httpx.Client(
        headers={"X-API-Key": key},
        timeout=30,
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S),
    ) as client:
        jobs = [
            threading.Thread(
                target=run_on_schedule,
                args=(client, settings.api_url, path, interval, stop),
                name=path.strip("/"),
                daemon=True,
            )
            for path, interval in ((SWEEP_PATH, args.interval),
                                   (RETENTION_PATH, args.retention_interval))
        ]  # fmt: skip
        for job in jobs:
            job.start()
        try:
            while not stop.wait(3600):
                pass
        finally:
            stop.set()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass

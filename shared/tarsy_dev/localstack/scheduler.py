"""The local stand-in for Cloud Scheduler: ``POST {api}/sweep`` every N seconds.

``make up`` and ``make demo`` run it, so a local stack recovers from a killed
step and times out overdue sessions the way the deployed one does. The api URL
and key come from the environment (``TARSY_API_URL``, ``TARSY_API_KEY``).
"""

from __future__ import annotations

import argparse
import logging
import time

import httpx

from tarsy.settings import ClientSettings
from tarsy_dev.client import KEEPALIVE_EXPIRY_S

logger = logging.getLogger("tarsy.scheduler")


def sweep_once(client: httpx.Client, api_url: str) -> dict[str, object]:
    """Call the sweeper once; return its report."""
    response = client.post(f"{api_url.rstrip('/')}/sweep")
    response.raise_for_status()
    report: dict[str, object] = response.json()
    return report


def main(argv: list[str] | None = None) -> None:
    """Sweep until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tarsy_dev.localstack.scheduler")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between sweeps")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = ClientSettings()
    if not settings.api_url:
        raise SystemExit("TARSY_API_URL is not set")
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    with httpx.Client(
        headers={"X-API-Key": key},
        timeout=30,
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S),
    ) as client:
        while True:
            try:
                report = sweep_once(client, settings.api_url)
                if report.get("republished") or report.get("timed_out"):
                    logger.info("sweep: %s", report)
            except httpx.HTTPError as e:
                logger.warning("sweep failed: %s", e)
            time.sleep(args.interval)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass

"""A step's value types are pure: importing them loads no client library.

Design constraint: the engine's step kinds are written and tested against
:mod:`tarsy.persistence.step_values` alone, so that module (and what it imports)
must not reach Firestore, gRPC or any other I/O client; the store that applies
them is the one adapter.
"""

from __future__ import annotations

import subprocess
import sys

from tarsy.persistence import step_values, store

_PROBE = """
import sys
import tarsy.persistence.step_values
print("\\n".join(sorted(m for m in sys.modules if m.startswith(%r))))
"""
IO = ("google.cloud.firestore", "google.api_core", "grpc", "httpx", "tarsy.persistence.store")


def test_importing_the_step_values_loads_no_io_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE % (IO,)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == []


def test_the_store_still_offers_the_step_values_to_older_callers() -> None:
    assert store.Claim is step_values.Claim
    assert store.StepCommit is step_values.StepCommit
    assert store.StepState is step_values.StepState

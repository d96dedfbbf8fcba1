"""A check: a pure function of the snapshot, registered once with its name.

Design constraint: a check's name is written in one place, its decorator
(``@check("crash_loop")``). It names the check in :data:`tarsy.evidence.detections.CHECKS`,
in ``evidence.disabled_detections`` and on every finding the check returns, so the
function body builds findings without naming itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tarsy.evidence.snapshot import Detection, Snapshot

Run = Callable[[Snapshot], list[Detection]]


@dataclass(frozen=True)
class NamedCheck:
    """A check function with its name; calling it names its findings."""

    name: str
    run: Run

    def __call__(self, snapshot: Snapshot) -> list[Detection]:
        """The check's findings, each named by it."""
        return [d.model_copy(update={"check": self.name}) for d in self.run(snapshot)]


def check(name: str) -> Callable[[Run], NamedCheck]:
    """Register the decorated function as the check ``name``."""

    def named(run: Run) -> NamedCheck:
        return NamedCheck(name=name, run=run)

    return named

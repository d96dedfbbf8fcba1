"""A bus that records step messages instead of publishing them (tests and benchmarks).

Running the step engine in process with it keeps the stack's own step function
out of the way; ``fail=True`` simulates a process that dies before its publish
reaches Pub/Sub.
"""

from __future__ import annotations

from tarsy.models import StepMessage


class RecordingBus:
    """Implements ``tarsy.bus.Publisher`` by appending to :attr:`published`."""

    def __init__(self, *, fail: bool = False) -> None:
        self.published: list[StepMessage] = []
        self.fail = fail

    async def publish(self, message: StepMessage) -> str:
        """Record ``message`` (or fail like a crash before the publish)."""
        if self.fail:
            raise ConnectionError("simulated crash before the publish reached Pub/Sub")
        self.published.append(message)
        return str(len(self.published))

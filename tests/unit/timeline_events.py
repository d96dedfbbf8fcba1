"""Reading a test's timeline events as the type the test expects them to be."""

from __future__ import annotations

from typing import TypeVar

from tarsy.models import TimelineEvent

Event = TypeVar("Event", bound=TimelineEvent)


def expect(event: TimelineEvent, kind: type[Event]) -> Event:
    """``event`` as a ``kind``; fails the test (with the event) when it is another type."""
    assert isinstance(event, kind), f"expected a {kind.__name__}, got {event!r}"
    return event

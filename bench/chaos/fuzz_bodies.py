"""Hostile ingest bodies, from the strategies of ``tests/unit/test_hostile_input.py``.

The unit test checks ``parse_submission`` on a few hundred of them in process;
here thousands go to the real ingest function over HTTP. Three families, a
third each: arbitrary bytes under any Content-Encoding, alerts built from raw
JSON fragments and then broken (cut, flipped, re-encoded, gzipped right or
wrong), and well-formed alerts carrying hostile values; plus every named case.
Generation is derandomized: every run posts the same bodies.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.unit.test_hostile_input import CASES, ENCODINGS, alert_texts, encoded

Body = tuple[bytes, dict[str, str]]


def _headers(encoding: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    return headers


def _collect(count: int, draw: Callable[[st.DataObject], Body]) -> list[Body]:
    bodies: list[Body] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def generate(data: st.DataObject) -> None:
        bodies.append(draw(data))

    generate()
    return bodies


def _arbitrary(data: st.DataObject) -> Body:
    body = data.draw(st.binary(max_size=4096))
    return body, _headers(data.draw(ENCODINGS))


def _mutated(data: st.DataObject) -> Body:
    body, encoding = data.draw(encoded(data.draw(alert_texts())))
    return body, _headers(encoding)


def _hostile_values(data: st.DataObject) -> Body:
    return data.draw(alert_texts()).encode("utf-8", "surrogatepass"), _headers(None)


def hostile_bodies(total: int) -> list[Body]:
    """``total`` bodies: every named case, then the three fuzzed families in equal parts."""
    bodies = [(case.body, _headers(case.encoding)) for case in CASES.values()]
    left = total - len(bodies)
    families = (_arbitrary, _mutated, _hostile_values)
    for n, family in enumerate(families):
        share = left // len(families) + (1 if n < left % len(families) else 0)
        bodies.extend(_collect(share, family))
    return bodies

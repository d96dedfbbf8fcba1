"""docs/security.md's table of who can do what is the route table, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from tarsy.http.routes import ROUTES

SECURITY_MD = Path(__file__).resolve().parents[2] / "docs" / "security.md"
_ROW = re.compile(r"^\| (GET|POST|DELETE) \| `([^`]+)` \| (\w+) \| (\w+)")


def test_the_documented_routes_are_the_route_table() -> None:
    documented = [
        found.groups()
        for line in SECURITY_MD.read_text(encoding="utf-8").splitlines()
        if (found := _ROW.match(line))
    ]
    actual = [(r.method, r.template, r.caller, r.role or "none") for r in ROUTES]
    assert documented == actual

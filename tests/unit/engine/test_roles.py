"""What depends on an execution's role is decided in ``tarsy.engine.roles`` alone.

An AST walk over the library finds every comparison with an execution role
(``execution.role == "agent"``, ``role in {...}``, a ``match`` on a role) and
fails on one that is not allowed: a comprehension's filter that selects by
role, or a ``match`` in :mod:`tarsy.engine.progression` (what follows an
execution's end) that ``assert_never`` ends. A conversation message's role
(``"user"``, ``"tool"``) is not an execution role and is not counted.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import get_args

from tarsy.engine.roles import ROLES, rules
from tarsy.models import ExecutionRole

LIBRARY = Path(__file__).resolve().parents[3] / "shared" / "tarsy"
EXECUTION_ROLES = frozenset(get_args(ExecutionRole))
RULES_MODULE = Path("engine/roles.py")
PROGRESSION = Path("engine/progression.py")

# Comparisons known to remain, in modules other engineers own, each with its
# count: a new one anywhere fails, and so does a file whose count changes (move
# one into RoleRules, then lower its count here).
REMAINING = {
    # resolve_role picks the configuration of a synthesis, summary, chat or judge.
    Path("config/schema.py"): 3,
    # opens_the_investigation: the first iteration of a first-stage agent.
    Path("engine/iteration.py"): 1,
    # strategy_of (the compact path) and gather_pending, for a stage's agents.
    Path("engine/messages.py"): 2,
    # apply_selection: the roles whose servers an alert's tool choice replaces.
    Path("tools/selection.py"): 1,
}


def _is_role(node: ast.expr) -> bool:
    """Whether ``node`` reads a role: ``x.role`` or a name ``role``."""
    return (isinstance(node, ast.Attribute) and node.attr == "role") or (
        isinstance(node, ast.Name) and node.id == "role"
    )


def _names_a_role(node: ast.expr) -> bool:
    """Whether ``node`` is an execution role's literal, or a collection that holds one."""
    if isinstance(node, ast.Constant):
        return node.value in EXECUTION_ROLES
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        return any(_names_a_role(e) for e in node.elts)
    # A named set of roles (``_TOOL_ROLES``): a role's membership in it is a rule.
    return isinstance(node, ast.Name) and node.id.isupper() and "ROLE" in node.id


def _is_comparison(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    return any(_is_role(o) for o in operands) and any(_names_a_role(o) for o in operands)


def _pattern_names_a_role(pattern: ast.pattern) -> bool:
    if isinstance(pattern, ast.MatchValue):
        return _names_a_role(pattern.value)
    if isinstance(pattern, ast.MatchOr):
        return any(_pattern_names_a_role(p) for p in pattern.patterns)
    return False


def _ends_in_assert_never(match: ast.Match) -> bool:
    """Whether the last case is ``case _:`` whose body calls ``assert_never``."""
    last = match.cases[-1]
    if not (isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None):
        return False
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "assert_never"
        for statement in last.body
        for n in ast.walk(statement)
    )


def _filters(tree: ast.AST) -> set[int]:
    """The ids of the conditions of comprehensions: a filter that selects by role."""
    comprehensions = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
    return {
        id(n)
        for comp in ast.walk(tree)
        if isinstance(comp, comprehensions)
        for generator in comp.generators
        for condition in generator.ifs
        for n in ast.walk(condition)
    }


def role_comparisons(root: Path = LIBRARY) -> list[tuple[Path, int]]:
    """Every comparison with an execution role under ``root`` not allowed: (module, line)."""
    found: list[tuple[Path, int]] = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root)
        if module == RULES_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        filters = _filters(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and _is_comparison(node) and id(node) not in filters:
                found.append((module, node.lineno))
            elif (
                isinstance(node, ast.Match)
                and _is_role(node.subject)
                and any(_pattern_names_a_role(c.pattern) for c in node.cases)
                and not (module == PROGRESSION and _ends_in_assert_never(node))
            ):
                found.append((module, node.lineno))
    return sorted(found)


def test_no_new_role_comparison_outside_the_rules() -> None:
    found = role_comparisons()
    assert Counter(module for module, _ in found) == REMAINING, found


def test_the_walk_finds_a_branch_on_a_role_and_lets_a_filter_pass(tmp_path: Path) -> None:
    (tmp_path / "branch.py").write_text(
        "def f(execution, role, es):\n"
        "    if execution.role == 'agent':\n"
        "        pass\n"
        "    kept = [e for e in es if e.role == 'chat']\n"
        "    if role not in {'chat', 'scoring'}:\n"
        "        pass\n"
        "    if execution.role == 'user':\n"  # a message's role, not an execution's
        "        pass\n"
        "    match role:\n"
        "        case 'agent':\n"
        "            pass\n"
    )
    assert role_comparisons(tmp_path) == [
        (Path("branch.py"), 2),
        (Path("branch.py"), 5),
        (Path("branch.py"), 9),
    ]


def test_every_match_in_progression_ends_in_assert_never() -> None:
    tree = ast.parse((LIBRARY / PROGRESSION).read_text(encoding="utf-8"))
    matches = [n for n in ast.walk(tree) if isinstance(n, ast.Match)]
    assert matches
    assert all(_ends_in_assert_never(m) for m in matches)


def test_only_a_stage_agent_tells_the_judge_its_tools_and_only_a_sub_agent_answers() -> None:
    assert [r for r in ROLES if rules(r).stage_agent] == ["agent"]
    assert [r for r in ROLES if rules(r).answers_a_parent] == ["sub_agent"]

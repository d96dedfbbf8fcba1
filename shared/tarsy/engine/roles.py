"""What differs between execution roles, in one place, checked for exhaustiveness.

Every role (``agent``, ``synthesis``, ``summary``, ``chat``, ``scoring``,
``sub_agent``) is an execution run by the same step engine; what sets them
apart is a handful of rules: which configuration and strategy they run with,
whether a session's cancel or deadline stops them, what a pause pauses,
whether the judge reads them and is told of their tools, and whether their end
answers a parent. Those rules are here and nowhere else: the engine
asks :data:`ROLES`, and every ``match`` on a role ends in ``assert_never``, so
a new role fails mypy until each rule is decided for it. What follows an
execution's end, also by role, is :mod:`tarsy.engine.progression`. Elsewhere
a role is compared only to select executions by it (a filter):
``tests/unit/engine/test_roles.py`` counts the comparisons and fails on a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never, get_args

from tarsy.config.schema import ResolvedAgentConfig, TarsyConfig
from tarsy.models import AgentExecution, ExecutionRole, Session
from tarsy.tools.selection import apply_selection

PauseScope = Literal["stage_and_session", "session", "nothing"]


@dataclass(frozen=True)
class RoleRules:
    """The rules of one execution role."""

    # A fixed strategy (the summary and the judge have their own), else the configured one.
    strategy: str | None
    # Whether the session's cancel, an own cancel and the deadline stop it: a chat
    # runs on a finished session, so none of them applies.
    stopped_with_its_session: bool
    # What a pause at max iterations pauses besides the execution.
    pauses: PauseScope
    # Whether its timeline is part of the investigation the judge reads.
    investigates: bool
    # Whether it can be cancelled on its own (the session goes on without it).
    cancellable_alone: bool
    # Whether it is one of a stage's configured agents: the judge is told of its
    # tools (the servers the investigation could use).
    stage_agent: bool
    # Whether it answers a parent's tool call: its end (a cancel included) is an
    # answer that may wake the parent, and a new message may reopen it.
    answers_a_parent: bool


ROLES: dict[ExecutionRole, RoleRules] = {
    "agent": RoleRules(
        strategy=None,
        stopped_with_its_session=True,
        pauses="stage_and_session",
        investigates=True,
        cancellable_alone=True,
        stage_agent=True,
        answers_a_parent=False,
    ),
    "synthesis": RoleRules(
        strategy=None,
        stopped_with_its_session=True,
        pauses="session",
        investigates=True,
        cancellable_alone=False,
        stage_agent=False,
        answers_a_parent=False,
    ),
    "summary": RoleRules(
        strategy="executive-summary",
        stopped_with_its_session=True,
        pauses="session",
        investigates=True,
        cancellable_alone=False,
        stage_agent=False,
        answers_a_parent=False,
    ),
    "chat": RoleRules(
        strategy=None,
        stopped_with_its_session=False,
        pauses="nothing",
        investigates=False,
        cancellable_alone=False,
        stage_agent=False,
        answers_a_parent=False,
    ),
    "scoring": RoleRules(
        strategy="judge",
        stopped_with_its_session=True,
        pauses="session",
        investigates=False,
        cancellable_alone=False,
        stage_agent=False,
        answers_a_parent=False,
    ),
    "sub_agent": RoleRules(
        strategy=None,
        stopped_with_its_session=True,
        pauses="session",
        investigates=True,
        cancellable_alone=True,
        stage_agent=False,
        answers_a_parent=True,
    ),
}
# The table is complete: a role added to the literal without its rules fails at import.
assert set(ROLES) == set(get_args(ExecutionRole)), "every execution role needs its RoleRules"


def rules(role: ExecutionRole) -> RoleRules:
    """The rules of ``role``."""
    return ROLES[role]


def resolve_execution(
    config: TarsyConfig, session: Session, execution: AgentExecution
) -> ResolvedAgentConfig:
    """The configuration an execution runs with, by its role, with the alert's tool choice."""
    chain_id, role = session.chain_id, execution.role
    match role:
        case "agent":
            resolved = config.resolve(chain_id, execution.stage, execution.agent_index)
        case "synthesis":
            resolved = config.resolve_role(chain_id, execution.stage, "synthesis")
        case "chat" | "scoring" | "summary":
            resolved = config.resolve_role(chain_id, None, role)
        case "sub_agent":
            resolved = config.resolve_sub_agent(chain_id, execution.agent)
        case _:
            assert_never(role)
    return apply_selection(resolved, session.mcp, role)

"""An action's audit record, written in the same commit as the action's state change.

Design constraint: either both exist or neither (issue 42): a crash or a
failed write between an action and a separate audit write would leave an
action nobody can account for. The session commands (:mod:`tarsy.commands`) hand their writes and
the record to :meth:`~tarsy.persistence.ports.AuditedActions.commit_action`;
an action whose one decisive write is the engine's (a chat's or a judge's
execution created, a paused agent ended) runs the engine with
:class:`RecordedStore`, a wrapper of the store that adds the record to that
write's batch, so the engine needs no audit branch of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from tarsy.access.audit import audit_event, audit_keys
from tarsy.access.roles import Principal, RecordedAction
from tarsy.app import Deps
from tarsy.models import AgentExecution, ConversationMessage, TimelineEvent
from tarsy.persistence.audit_log import ActionRecord
from tarsy.persistence.ports import Persistence
from tarsy.persistence.updates import ExecutionUpdate


@dataclass(frozen=True)
class Recorder:
    """Who does which action to which session: makes the record once its target is known."""

    principal: Principal
    action: RecordedAction
    session_id: str
    detail: str = ""

    def record(self, target: str | None = None, detail: str | None = None) -> ActionRecord:
        """The action's audit record (``detail``: what was typed, already masked)."""
        event = audit_event(
            self.principal,
            self.action,
            target=target,
            detail=self.detail if detail is None else detail,
        )
        return ActionRecord(self.session_id, event, tuple(audit_keys(event)))


@dataclass
class RecordedStore:
    """The store, whose first execution created or ended carries the action's record.

    Every other call passes through unchanged; only the first such write carries
    the record (what the engine does after it, a fan-in starting the next stage
    for instance, is not the person's action).
    """

    inner: Persistence
    recorder: Recorder
    recorded: bool = field(default=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def create_execution(
        self,
        execution: AgentExecution,
        opening: Sequence[ConversationMessage],
        timeline: Sequence[TimelineEvent] = (),
    ) -> bool:
        """Create the execution; the first one with the action's record (target: its id)."""
        if self.recorded:
            return await self.inner.create_execution(execution, opening, timeline)
        record = self.recorder.record(target=execution.execution_id)
        created = await self.inner.create_recorded_execution(execution, opening, timeline, record)
        self.recorded = created
        return created

    async def end_execution(self, execution: AgentExecution, update: ExecutionUpdate) -> None:
        """End the execution; the first one with the action's record (target: its id)."""
        if self.recorded:
            await self.inner.end_execution(execution, update)
            return
        record = self.recorder.record(target=execution.execution_id)
        await self.inner.end_recorded_execution(execution, update, record)
        self.recorded = True


def recorded_deps(deps: Deps, recorder: Recorder) -> tuple[Deps, RecordedStore]:
    """``deps`` whose store records the action with its decisive write (and that store)."""
    store = RecordedStore(deps.store, recorder)
    return replace(deps, store=cast(Persistence, store)), store

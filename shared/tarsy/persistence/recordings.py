"""A finished session's records read back whole (what ``tarsy replay`` runs from)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tarsy.models import (
    ConversationMessage,
    MCPInteraction,
    TimelineEvent,
    UserQuestionEvent,
    timeline_event,
)
from tarsy.persistence._firestore import (
    LLM_INTERACTIONS,
    MCP_INTERACTIONS,
    MESSAGES,
    SUB_AGENT_TURNS,
    TIMELINE,
    Record,
    llm_interaction_of,
)
from tarsy.persistence.answers import SubAgentRecords
from tarsy.persistence.executions import ExecutionRecords
from tarsy.persistence.recording import RecordedExecution, RecordedFollowUp, SessionRecording
from tarsy.persistence.sessions import SessionRecords
from tarsy.persistence.step_values import FOLLOW_UP_SUFFIX
from tarsy.persistence.tool_lists import ToolListRecords


def _split_follow_ups(
    messages: list[tuple[str, ConversationMessage]], events: list[tuple[str, TimelineEvent]]
) -> tuple[
    list[tuple[str, ConversationMessage]],
    list[tuple[str, TimelineEvent]],
    dict[int, RecordedFollowUp],
]:
    """A conversation's own records, and its follow-ups by the step they came before."""
    follow_ups: dict[int, RecordedFollowUp] = {}
    for record_id_, message in messages:
        if record_id_.endswith(FOLLOW_UP_SUFFIX):
            shown = [e for i, e in events if i == record_id_]
            asked = shown[0] if shown and isinstance(shown[0], UserQuestionEvent) else None
            call_id = (asked.call_id if asked else None) or ""
            step = int(record_id_.split("-", 1)[0]) + 1
            follow_ups[step] = RecordedFollowUp(call_id=call_id, message=message, events=shown)
    own_messages = [(i, m) for i, m in messages if not i.endswith(FOLLOW_UP_SUFFIX)]
    own_events = [(i, e) for i, e in events if not i.endswith(FOLLOW_UP_SUFFIX)]
    return own_messages, own_events, follow_ups


class RecordingReads(SessionRecords, ExecutionRecords, SubAgentRecords, ToolListRecords):
    """Reading a whole session back, for replay."""

    async def _step_records(
        self, collection: Any, read: Callable[[dict[str, Any]], Record]
    ) -> list[tuple[str, Record]]:
        """A subcollection of step records (ids ``{step:04d}...``), as ``(id, record)`` in order.

        ``read`` turns a document into its record (a model's ``model_validate``).
        """
        self.round_trips.add("query")
        return [
            (snap.id, read(await self._read(snap)))
            async for snap in collection.order_by("__name__").stream()
        ]

    @staticmethod
    def _by_step(records: Sequence[tuple[str, Record]]) -> dict[int, list[Record]]:
        """Records grouped by the step their id starts with."""
        grouped: dict[int, list[Record]] = {}
        for record_id_, record in records:
            grouped.setdefault(int(record_id_.split("-", 1)[0]), []).append(record)
        return grouped

    async def load_recording(
        self, session_id: str, tool_servers: Sequence[str] = ()
    ) -> SessionRecording | None:
        """A session with everything its executions wrote, by step; None if there is none.

        A step's own LLM call is ``llm_interactions/{step:04d}``; the calls that
        summarized its tool results carry a suffix and are kept apart.

        Args:
            session_id: The session.
            tool_servers: MCP servers whose cached tool lists to include.

        Returns:
            The recording, or None when the session does not exist.
        """
        session = await self.get_session(session_id)
        if session is None:
            return None
        executions: list[RecordedExecution] = []
        for execution in await self.list_executions(session_id):
            ref = self._execution(execution.execution_id)
            calls = await self._step_records(ref.collection(LLM_INTERACTIONS), llm_interaction_of)
            own = [(i, call) for i, call in calls if "-" not in i]
            messages, events, follow_ups = _split_follow_ups(
                await self._step_records(
                    ref.collection(MESSAGES), ConversationMessage.model_validate
                ),
                await self._step_records(ref.collection(TIMELINE), timeline_event),
            )
            executions.append(
                RecordedExecution(
                    execution=execution,
                    messages=self._by_step(messages),
                    timeline=self._by_step(events),
                    follow_ups=follow_ups,
                    llm_interactions={int(i): call for i, call in own},
                    summary_interactions=self._by_step([(i, c) for i, c in calls if "-" in i]),
                    mcp_interactions=self._by_step(
                        await self._step_records(
                            ref.collection(MCP_INTERACTIONS), MCPInteraction.model_validate
                        )
                    ),
                    sub_agent_answers={
                        int(turn.id): await self.list_answers(execution.execution_id, int(turn.id))
                        async for turn in ref.collection(SUB_AGENT_TURNS).stream()
                    },
                )
            )
        return SessionRecording(
            session=session,
            executions=executions,
            tool_lists=await self.get_tool_lists(list(tool_servers)),
        )

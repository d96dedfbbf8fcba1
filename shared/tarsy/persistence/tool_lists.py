"""The MCP tool lists cached across steps."""

from __future__ import annotations

from collections.abc import Sequence

from tarsy.llm.base import ToolDefinition
from tarsy.models import (
    utcnow,
)
from tarsy.persistence._firestore import (
    TOOL_LISTS,
    FirestoreBase,
    document_of,
)
from tarsy.tools.base import CachedToolList


class ToolListRecords(FirestoreBase):
    """The cached MCP tool lists."""

    async def get_tool_lists(self, servers: Sequence[str]) -> dict[str, CachedToolList]:
        """The cached tool lists of ``servers`` that exist, in one round trip."""
        if not servers:
            return {}
        self.round_trips.add("get_all")
        refs = [self._db.collection(TOOL_LISTS).document(s) for s in servers]
        lists: dict[str, CachedToolList] = {}
        async for snap in self._db.get_all(refs):
            if snap.exists:
                cached = CachedToolList.model_validate(await self._read(snap))
                lists[cached.server] = cached
        return lists

    async def save_tool_list(self, server: str, tools: Sequence[ToolDefinition]) -> None:
        """Cache a server's tools."""
        cached = CachedToolList(server=server, tools=list(tools), fetched_at=utcnow())
        batch = self._db.batch()
        self._write(batch, self._db.collection(TOOL_LISTS).document(server), document_of(cached))
        self.round_trips.add("commit")
        await batch.commit()

"""The MCP tool lists cached across steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tarsy.llm.base import ToolDefinition
from tarsy.models import (
    utcnow,
)
from tarsy.persistence._firestore import (
    TOOL_LISTS,
    FirestoreBase,
    from_json_text,
    with_json_text,
)
from tarsy.tools.base import CachedToolList


def tool_list_document(cached: CachedToolList) -> dict[str, Any]:
    """A server's tool list as stored: its tools as one JSON string.

    Every step reads the lists of its agent's servers: as nested maps, Firestore's
    client decoded each schema value by value (about a millisecond per server).
    """
    return with_json_text(cached, "tools")


def tool_list_of(document: dict[str, Any]) -> CachedToolList:
    """Read a cached tool list (its tools JSON text, or a list if written earlier)."""
    return CachedToolList.model_validate(from_json_text(document, "tools"))


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
                cached = tool_list_of(await self._read(snap))
                lists[cached.server] = cached
        return lists

    async def save_tool_list(self, server: str, tools: Sequence[ToolDefinition]) -> None:
        """Cache a server's tools."""
        cached = CachedToolList(server=server, tools=list(tools), fetched_at=utcnow())
        batch = self._db.batch()
        ref = self._db.collection(TOOL_LISTS).document(server)
        self._write(batch, ref, tool_list_document(cached))
        self.round_trips.add("commit")
        await batch.commit()

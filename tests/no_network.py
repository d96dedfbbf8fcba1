"""A guard that refuses, and records, every outgoing connection and process start in a block.

Used to prove that a replay calls no model, no MCP server and nothing else:
whatever tries to connect (a socket, asyncio, httpx, a DNS lookup) or to start
a process (a stdio MCP server) is refused *and* recorded, so an attempt that
the code under test catches and turns into an error result still fails the
test. gRPC's C core is out of its reach; the replay is handed no Firestore
client at all.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class NetworkUsed(ConnectionRefusedError):
    """Raised by the guard in place of a connection or a process start."""


@contextmanager
def no_network() -> Iterator[list[str]]:
    """Refuse connections, DNS lookups and process starts inside the block.

    Yields:
        The attempts made so far (each a description); empty if none.
    """
    attempts: list[str] = []

    def refuse(what: str) -> NetworkUsed:
        attempts.append(what)
        return NetworkUsed(f"network or process use under the guard: {what}")

    def connect(self: socket.socket, address: Any) -> None:
        raise refuse(f"connect {address!r}")

    def connect_ex(self: socket.socket, address: Any) -> int:
        raise refuse(f"connect_ex {address!r}")

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        raise refuse(f"getaddrinfo {host!r}:{port!r}")

    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any) -> None:
        raise refuse(f"process {args!r}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        patch.setattr(subprocess.Popen, "_execute_child", execute_child)
        yield attempts

"""A stand-in MCP server (stdio) for a team's own inventory: not kubernetes-mcp-server.

Its tools are named and shaped as such a server might name them: ``describe``
answers with one pod as JSON. A collector in a
user's configuration that calls them says what each result is (``shape:``), and
the gather step reads them as it reads the built-in server's.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

server = MCPServer("inventory")


@server.tool()
def describe(ns: str, workload_pod: str) -> str:
    """The pod as the inventory last saw it (JSON)."""
    pod = {
        "kind": "Pod",
        "metadata": {"name": workload_pod, "namespace": ns, "labels": {"app": "ledger"}},
        "spec": {"nodeName": "node-7", "containers": [{"name": "ledger", "image": "ledger:9"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "name": "ledger",
                    "ready": False,
                    "restartCount": 7,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {
                            "reason": "Error",
                            "exitCode": 3,
                            "finishedAt": "2026-12-01T10:00:00Z",
                        }
                    },
                }
            ],
        },
    }
    return json.dumps(pod)


if __name__ == "__main__":
    server.run("stdio")

"""The demo cluster's MCP server and its command line, ``tarsy-demo-cluster``."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tarsy_dev.demo_cluster.cluster import Cluster, KubeError
from tarsy_dev.demo_cluster.faults import FaultPlan
from tarsy_dev.demo_cluster.loader import DEFAULT_SCENARIO, load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import TOOL_NAMES, Scenario

SERVER_NAME = "demo-cluster"

_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

Namespace = Annotated[str, Field(description="Namespace of the object")]
OptionalNamespace = Annotated[
    str | None, Field(description="Namespace to look in; all namespaces when omitted")
]
Name = Annotated[str, Field(description="Name of the object")]
ApiVersion = Annotated[
    str,
    Field(description="apiVersion of the resources (examples: v1, apps/v1, networking.k8s.io/v1)"),
]
Kind = Annotated[
    str, Field(description="kind of the resources (examples: Pod, Service, Deployment, Ingress)")
]


def _version() -> str:
    try:
        return version("tarsy")
    except PackageNotFoundError:
        return "0"


class ServedScenario:
    """The scenario a server answers for, its cluster and its fault counts.

    A switchable server (``--switchable``, for evaluations) moves to another
    scenario between investigations; switching, like loading, starts the fault
    counts afresh.
    """

    def __init__(self, scenario: Scenario) -> None:
        self._state = self._state_for(scenario)

    @staticmethod
    def _state_for(scenario: Scenario) -> tuple[Scenario, Cluster, FaultPlan]:
        return scenario, Cluster(scenario.cluster), FaultPlan(scenario.faults)

    @property
    def scenario(self) -> Scenario:
        """The scenario served now."""
        return self._state[0]

    def serve(self, scenario: Scenario) -> None:
        """Serve ``scenario`` from now on, its fault counts from zero."""
        self._state = self._state_for(scenario)

    def switch(self, name: str) -> Scenario:
        """Serve another bundled scenario (raises ``ValueError`` for an unknown one)."""
        scenario = load_scenario(name)
        self.serve(scenario)
        return scenario

    async def call(
        self, tool: str, arguments: dict[str, Any], answer: Callable[[Cluster], str]
    ) -> str:
        """Answer one tool call, or fail it as the scenario's faults say."""
        _, cluster, faults = self._state  # one consistent snapshot, whatever a switch does
        fault = faults.next_failure(tool, {k: v for k, v in arguments.items() if v is not None})
        if fault is not None:
            if fault.kind == "timeout":
                await anyio.sleep(fault.seconds)
            raise ToolError(fault.message)
        try:
            return answer(cluster)
        except KubeError as e:
            raise ToolError(str(e)) from e


def build_server(scenario: Scenario | ServedScenario, *, switchable: bool = False) -> MCPServer:
    """Return an MCP server for the scenario's cluster, with kubernetes-mcp-server's tools.

    Args:
        scenario: The scenario to serve (or a :class:`ServedScenario` to share).
        switchable: Also serve ``GET /scenario`` (which one) and ``POST /scenario``
            with ``{"scenario": NAME}`` (serve another one) over HTTP, for evaluations
            that run many scenarios against one server.

    Returns:
        The server; serve it over stdio or HTTP.
    """
    served = scenario if isinstance(scenario, ServedScenario) else ServedScenario(scenario)
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="Demo Kubernetes cluster",
        instructions=(
            f"A simulated Kubernetes cluster ({served.scenario.cluster.name}), read-only. "
            "Use the tools as you would kubectl."
        ),
        version=_version(),
        log_level="WARNING",
    )

    async def pods_list(namespace: OptionalNamespace = None) -> str:
        return await served.call(
            "pods_list", {"namespace": namespace}, lambda c: c.pods_list(namespace)
        )

    async def pods_get(namespace: Namespace, name: Name) -> str:
        return await served.call(
            "pods_get",
            {"namespace": namespace, "name": name},
            lambda c: c.pods_get(namespace, name),
        )

    async def pods_log(
        namespace: Namespace,
        name: Name,
        container: Annotated[
            str | None,
            Field(description="Container to read; required when the pod has more than one"),
        ] = None,
        previous: Annotated[
            bool, Field(description="Logs of the previous, terminated instance of the container")
        ] = False,
    ) -> str:
        arguments = {"namespace": namespace, "name": name, "container": container}
        return await served.call(
            "pods_log",
            {**arguments, "previous": previous},
            lambda c: c.pods_log(namespace, name, container, previous),
        )

    async def events_list(namespace: OptionalNamespace = None) -> str:
        return await served.call(
            "events_list", {"namespace": namespace}, lambda c: c.events_list(namespace)
        )

    async def resources_get(
        apiVersion: ApiVersion,  # kubernetes-mcp-server's argument name
        kind: Kind,
        name: Name,
        namespace: Annotated[
            str | None,
            Field(description="Namespace of the resource; omit it for cluster-scoped kinds"),
        ] = None,
    ) -> str:
        arguments = {"apiVersion": apiVersion, "kind": kind, "name": name, "namespace": namespace}
        return await served.call(
            "resources_get",
            arguments,
            lambda c: c.resources_get(apiVersion, kind, name, namespace),
        )

    async def resources_list(
        apiVersion: ApiVersion,
        kind: Kind,
        namespace: OptionalNamespace = None,
    ) -> str:
        arguments = {"apiVersion": apiVersion, "kind": kind, "namespace": namespace}
        return await served.call(
            "resources_list", arguments, lambda c: c.resources_list(apiVersion, kind, namespace)
        )

    async def nodes_top() -> str:
        return await served.call("nodes_top", {}, lambda c: c.nodes_top())

    async def pods_top(namespace: OptionalNamespace = None) -> str:
        return await served.call(
            "pods_top", {"namespace": namespace}, lambda c: c.pods_top(namespace)
        )

    async def namespaces_list() -> str:
        return await served.call("namespaces_list", {}, lambda c: c.namespaces_list())

    tools: dict[str, tuple[Callable[..., Awaitable[str]], str]] = {
        "pods_list": (
            pods_list,
            "List the Kubernetes pods in the cluster, in all namespaces or in the given one "
            "(like kubectl get pods -o wide)",
        ),
        "pods_get": (
            pods_get,
            "Get a Kubernetes Pod in the given namespace by name, as YAML (spec and status)",
        ),
        "pods_log": (
            pods_log,
            "Get the logs of a Kubernetes Pod's container (previous=true: of its last terminated "
            "instance, as kubectl logs --previous)",
        ),
        "events_list": (
            events_list,
            "List the Kubernetes events in all namespaces or in the given one, oldest first",
        ),
        "resources_get": (
            resources_get,
            "Get a Kubernetes resource by apiVersion, kind, namespace (for namespaced kinds) and "
            "name, as YAML (common: v1 Pod, v1 Service, v1 ConfigMap, v1 Node, apps/v1 Deployment, "
            "apps/v1 ReplicaSet, batch/v1 Job, networking.k8s.io/v1 Ingress)",
        ),
        "resources_list": (
            resources_list,
            "List Kubernetes resources of an apiVersion and kind, in all namespaces or in the "
            "given one (like kubectl get KIND)",
        ),
        "nodes_top": (
            nodes_top,
            "List the CPU and memory consumption of the nodes, as recorded by the Metrics Server",
        ),
        "pods_top": (
            pods_top,
            "List the CPU and memory consumption of the pods, in all namespaces or in the given "
            "one, as recorded by the Metrics Server",
        ),
        "namespaces_list": (namespaces_list, "List the Kubernetes namespaces in the cluster"),
    }
    assert tuple(tools) == TOOL_NAMES
    for name, (function, description) in tools.items():
        server.add_tool(
            function,
            name=name,
            description=description,
            annotations=_READ_ONLY,
            structured_output=False,
        )
    if switchable:
        _add_switch_route(server, served)
    return server


def _add_switch_route(server: MCPServer, served: ServedScenario) -> None:
    async def scenario_route(request: Request) -> Response:
        if request.method == "POST":
            try:
                body = await request.json()
                name = body["scenario"] if isinstance(body, dict) else None
                if not isinstance(name, str):
                    raise ValueError('the body must be {"scenario": NAME}')
                served.switch(name)
            except (ValueError, KeyError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
        return JSONResponse({"scenario": served.scenario.name})

    server.custom_route("/scenario", methods=["GET", "POST"])(scenario_route)


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints where it listens once its sockets are bound."""

    def __init__(self, config: uvicorn.Config, scenario: str) -> None:
        super().__init__(config)
        self.scenario = scenario

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        port = self.config.port
        for listener in self.servers:
            for sock in listener.sockets:
                port = sock.getsockname()[1]
        host = self.config.host
        url_host = f"[{host}]" if ":" in host else host
        print(
            f"demo-cluster MCP server (scenario {self.scenario}) listening on "
            f"http://{url_host}:{port}/mcp",
            flush=True,
        )


async def serve_http(server: MCPServer, host: str, port: int, scenario: str) -> None:
    """Serve streamable HTTP at ``/mcp``; print the URL once listening (port 0: any free port)."""
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await _AnnouncingServer(config, scenario).serve()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the demo cluster's MCP server (``tarsy-demo-cluster``)."""
    parser = argparse.ArgumentParser(
        prog="tarsy-demo-cluster",
        description="Serve a simulated Kubernetes cluster, with a scripted incident, over MCP.",
    )
    parser.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        choices=scenario_names(),
        help=f"the incident to simulate (default: {DEFAULT_SCENARIO})",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default), or streamable HTTP at /mcp",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8765, help="HTTP port (default: 8765; 0: any free port)"
    )
    parser.add_argument(
        "--switchable",
        action="store_true",
        help='HTTP only: POST /scenario {"scenario": NAME} serves another scenario '
        "(evaluations); GET /scenario says which is served",
    )
    args = parser.parse_args(argv)
    if args.switchable and args.transport != "http":
        parser.error("--switchable needs --transport http")
    scenario = load_scenario(args.scenario)
    server = build_server(scenario, switchable=args.switchable)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            anyio.run(serve_http, server, args.host, args.port, scenario.name)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""A simulated Kubernetes cluster served over MCP, with scripted incidents.

``tarsy-demo-cluster --scenario NAME`` serves one scenario with the tools of
kubernetes-mcp-server (``pods_list``, ``pods_log``, ``resources_get``...), so an
investigation can run end to end without a real cluster. A scenario may make
chosen tool calls fail or hang (:mod:`~tarsy_dev.demo_cluster.faults`), and
declares what a correct investigation finds, must not conclude, and must fetch
(:mod:`~tarsy_dev.demo_cluster.facts`), which ``tarsy eval`` scores runs against.
``--switchable`` (over HTTP) lets an evaluation move one server from scenario to
scenario.
"""

from tarsy_dev.demo_cluster.loader import DEFAULT_SCENARIO, load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import TOOL_NAMES, Scenario
from tarsy_dev.demo_cluster.server import build_server

__all__ = [
    "DEFAULT_SCENARIO",
    "TOOL_NAMES",
    "Scenario",
    "build_server",
    "load_scenario",
    "scenario_names",
]

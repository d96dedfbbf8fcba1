"""A simulated Kubernetes cluster served over the Kubernetes API, with scripted incidents.

``tarsy-demo-cluster --scenario NAME`` serves one scenario's cluster on loopback
(:mod:`~tarsy_dev.demo_cluster.kube_api`) and writes a kubeconfig for it, so the
real clients, kubectl and kubernetes-mcp-server (the ``kubernetes`` MCP server of
the local stack), investigate it as they would a real cluster. A scenario may make
chosen API requests fail or hang (:mod:`~tarsy_dev.demo_cluster.faults`), and
declares what a correct investigation finds, must not conclude, and must fetch
(:mod:`~tarsy_dev.demo_cluster.facts`), which ``tarsy eval`` scores runs against.
``--switchable`` lets an evaluation move one server from scenario to scenario.
"""

from tarsy_dev.demo_cluster.kube_api import build_app
from tarsy_dev.demo_cluster.loader import DEFAULT_SCENARIO, load_scenario, scenario_names
from tarsy_dev.demo_cluster.models import TOOL_NAMES, Scenario

__all__ = [
    "DEFAULT_SCENARIO",
    "TOOL_NAMES",
    "Scenario",
    "build_app",
    "load_scenario",
    "scenario_names",
]

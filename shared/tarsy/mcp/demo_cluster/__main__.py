"""``python -m tarsy.mcp.demo_cluster``: the same as ``tarsy-demo-cluster``."""

from tarsy.mcp.demo_cluster.kube_api import main

main()

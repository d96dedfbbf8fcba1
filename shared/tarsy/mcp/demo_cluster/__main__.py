"""``python -m tarsy.mcp.demo_cluster``: the same as ``tarsy-demo-cluster``."""

from tarsy.mcp.demo_cluster.server import main

main()

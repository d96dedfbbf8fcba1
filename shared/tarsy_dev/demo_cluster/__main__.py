"""``python -m tarsy_dev.demo_cluster``: the same as ``tarsy-demo-cluster``."""

from tarsy_dev.demo_cluster.kube_api import main

main()

#!/usr/bin/env bash
# Installs Debian's prometheus (the server and promtool) for the demo cluster's metrics,
# unless it is there. The local stack backfills each scenario's history with
# `promtool tsdb create-blocks-from openmetrics` and serves PromQL on loopback; the
# package's own service is never started (no systemd here, and a policy-rc.d keeps the
# postinst from trying).
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_prometheus: no prometheus and no apt-get; install Prometheus 2.x (prometheus and promtool) and put it on PATH" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "installing Debian's prometheus for the demo cluster's metrics (once)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v prometheus >/dev/null && command -v promtool >/dev/null

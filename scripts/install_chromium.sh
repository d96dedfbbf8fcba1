#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (tests/browser), unless it is there.
# Playwright drives this system browser; it never downloads one of its own.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: no chromium and no apt-get; install Chromium and put it on PATH" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "installing Debian's chromium for the browser tests (once)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null

#!/usr/bin/env bash
# Installs dependencies, builds, and runs `pikv demo`: a controller, three
# nodes and Redis (when installed) on this machine, a RAG workload through
# them, a report, and every process stopped again. Extra arguments go to
# `pikv demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build test
bash scripts/build.sh
exec "${PIKV_BUILD_DIR:-build}/bin/pikv" demo "$@"

#!/usr/bin/env bash
# Installs what the demo needs, builds what it runs (the CLI and the two
# daemons; the tests and benchmarks are scripts/test.sh's), and runs `pikv
# demo`: a controller, three nodes and Redis on this machine, a RAG workload
# through them, a report, and every process stopped again. Extra arguments
# go to `pikv demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
took() { echo "demo: $1 took $((SECONDS - $2)) s"; }
t=$SECONDS
bash scripts/install-deps.sh demo
took packages $t
t=$SECONDS
PIKV_BUILD_TARGETS="pikv pikv-node pikv-controller" bash scripts/build.sh
took build $t
t=$SECONDS
"${PIKV_BUILD_DIR:-build}/bin/pikv" demo "$@"
took run $t

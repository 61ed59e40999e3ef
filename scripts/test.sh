#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (unit, multi-process,
# the GPU check's rehearsal, and vLLM itself running the connector:
# scripts/test-vllm.sh).
# Tests start their own redis-server and pikv-node processes on free
# loopback ports and clean up after themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
took() { echo "test: $1 took $((SECONDS - $2)) s"; }
t=$SECONDS
bash scripts/install-deps.sh
took packages $t
t=$SECONDS
bash scripts/build.sh
took build $t
build_dir="${PIKV_BUILD_DIR:-build}"
t=$SECONDS
ctest --test-dir "$build_dir" --output-on-failure --parallel 2 --timeout 600
took ctest $t
# The GPU machine's run, rehearsed on the CPU (its device steps skipped).
t=$SECONDS
bash scripts/gpu-check.sh rehearse
took gpu-rehearsal $t
# vLLM itself with the connector, in its own virtualenv.
t=$SECONDS
bash scripts/test-vllm.sh
took vllm $t

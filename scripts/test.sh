#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (unit, multi-process,
# the GPU check's rehearsal, and vLLM itself running the connector:
# scripts/test-vllm.sh).
# Tests start their own redis-server and pikv-node processes on free
# loopback ports and clean up after themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build_dir="${PIKV_BUILD_DIR:-build}"
ctest --test-dir "$build_dir" --output-on-failure --parallel 2 --timeout 600
# The GPU machine's run, rehearsed on the CPU (its device steps skipped).
bash scripts/gpu-check.sh rehearse
# vLLM itself with the connector, in its own virtualenv.
bash scripts/test-vllm.sh

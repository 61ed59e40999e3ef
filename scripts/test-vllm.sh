#!/usr/bin/env bash
# vLLM itself runs pikv's connector (tests/vllm/): the vLLM virtualenv made
# and pikv built into it (install-deps.sh vllm), the daemons built, then
# pytest in that virtualenv: layouts against vLLM's own cache writers,
# vLLM's scheduler driving the connector, and two vLLM engines on a real
# secure cluster answering as an independent reference. A few minutes on
# 2 cores; scripts/test.sh runs it after the C++ and Debian-Python suites.
set -euo pipefail
cd "$(dirname "$0")/.."
# vLLM's multiprocess engines (the server's, the fault tests') share 160 MiB
# rings in /dev/shm; a container's default /dev/shm is 64 MiB.
shm_free_mib=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -n "$shm_free_mib" ] && [ "$shm_free_mib" -lt 512 ]; then
  echo "test-vllm: /dev/shm has ${shm_free_mib} MiB free; vLLM's engines need more (in a" \
    "container: docker run --shm-size 2g, or --ipc=host)" >&2
  exit 1
fi
bash scripts/install-deps.sh vllm
bash scripts/build.sh
build_dir="${PIKV_BUILD_DIR:-build}"
# vLLM's CPU backend sizes its KV cache by this (GiB); the test models are tiny.
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
export PIKV_BIN_DIR="$PWD/$build_dir/bin"
cd tests/vllm
exec ../../.venv-vllm/bin/python -m pytest -q -p no:cacheprovider "$@" .

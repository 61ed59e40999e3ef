#!/usr/bin/env bash
# Installs dependencies (idempotent) and builds everything into ./build
# (or $PIKV_BUILD_DIR) with Ninja and ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir="${PIKV_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${PIKV_BUILD_TYPE:-Release}" >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"

#!/usr/bin/env bash
# Installs the build set of packages (idempotent; scripts/install-deps.sh
# build) and builds everything into ./build (or $PIKV_BUILD_DIR) with Ninja
# and ccache; only the targets PIKV_BUILD_TARGETS lists when it is set
# (scripts/demo.sh: the CLI and the two daemons).
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths relative to the checkout in ccache's hashes: a fresh clone elsewhere
# (as CI makes) still hits the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
bash scripts/install-deps.sh build
build_dir="${PIKV_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  # shellcheck disable=SC2086  # PIKV_CMAKE_ARGS is a list of -D options
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${PIKV_BUILD_TYPE:-Release}" ${PIKV_CMAKE_ARGS:-} >/dev/null
fi
# shellcheck disable=SC2086  # PIKV_BUILD_TARGETS is a list of target names
cmake --build "$build_dir" --parallel "$(nproc)" ${PIKV_BUILD_TARGETS:+--target $PIKV_BUILD_TARGETS}

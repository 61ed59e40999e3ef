#!/usr/bin/env bash
# Installs dependencies, builds, and starts one pikv-node on embedded
# defaults: CPU tier + RocksDB disk tier under ./data, no Redis. It prints its
# endpoints and serves until Ctrl-C (SIGINT) or SIGTERM. Extra arguments go
# to pikv-node (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${PIKV_BUILD_DIR:-build}/bin/pikv-node" --data-dir ./data "$@"

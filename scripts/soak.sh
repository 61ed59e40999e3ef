#!/usr/bin/env bash
# The long fault soak: controller, 3 nodes and Redis under a verifying load
# with random node/controller SIGKILLs and Redis pauses.
#   bash scripts/soak.sh [--seconds 300] [--keys-per-node 5000] [--seed N] [--controllers 3]
# --controllers 3: standbys on a local 3-member etcd; every controller fault
# kills the leader (docs/operations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build test
bash scripts/build.sh
exec "${PIKV_BUILD_DIR:-build}/bin/fault_soak" --seconds 300 "$@"

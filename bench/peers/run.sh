#!/usr/bin/env bash
# pikv beside its peers, on this machine (docs/benchmarks.md): installs the
# peers into virtualenvs of their own (pinned in bench/peers/requirements.txt
# for Mooncake Store and requirements-lmcache.txt for LMCache, each made once
# under ~/.cache/pikv and reused),
# builds what pikv's side needs, and runs bench/peers/peers_bench.py; its
# flags pass through (--smoke: one small object per system, for CI).
#   bash bench/peers/run.sh [--workloads data,hosts,lookup,failover,tiers,reuse] [--smoke] ...
set -euo pipefail
shopt -s inherit_errexit # a failed install inside $(venv_of ...) stops the script
cd "$(dirname "$0")/../.."
build_dir="${PIKV_BUILD_DIR:-build}"

# Mooncake's wheel carries its libraries but libibverbs and libnuma (ldd).
bash scripts/install-deps.sh build test >/dev/null
need=()
for pkg in libibverbs1 libnuma1 util-linux; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

python="${PYTHON:-python3}"
# A virtualenv of `requirements`, made once under ~/.cache/pikv (keyed by
# the file and the python) and reused; `check` must import in it. Each step
# says when it failed (errexit does not hold where this is called).
venv_of() {
  local requirements=$1 check=$2 key venv
  key=$( (cat "$requirements"; "$python" -VV) | sha256sum | cut -c1-12) || return 1
  venv="$HOME/.cache/pikv/peers-$key"
  if [ ! -f "$venv/.complete" ]; then
    echo "peers: making $venv ($requirements)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || return 1
    "$venv/bin/pip" install -q --upgrade pip >&2 || return 1
    "$venv/bin/pip" install -q --no-deps -r "$requirements" >&2 || return 1
    "$venv/bin/python" -c "$check" >&2 || return 1
    touch "$venv/.complete"
  fi
  echo "$venv"
}
venv="${PIKV_PEERS_VENV:-$(venv_of bench/peers/requirements.txt "from mooncake.store import MooncakeDistributedStore")}"
# LMCache (about 5 GB with the torch it imports) only where the data, lookup
# or tiers workload runs: by default, and when --workloads names one.
workloads=lookup
for ((i = 1; i <= $#; i++)); do
  [ "${!i}" = --workloads ] && j=$((i + 1)) && workloads="${!j:-}"
  [[ "${!i}" == --workloads=* ]] && workloads="${!i#--workloads=}"
done
lmcache=()
if [[ ",$workloads," =~ ,(data|lookup|tiers), ]]; then
  lmcache_venv="${PIKV_LMCACHE_VENV:-$(venv_of bench/peers/requirements-lmcache.txt \
    "import lmcache.v1.cache_controller.message, lmcache.v1.cache_engine")}"
  lmcache=(--lmcache-python "$lmcache_venv/bin/python")
  echo "peers: $("$lmcache_venv/bin/pip" list 2>/dev/null | grep -i '^lmcache ' | tr -s ' ')"
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  PIKV_BUILD_DIR="$build_dir" bash scripts/build.sh >/dev/null
fi
CCACHE_BASEDIR="$PWD" cmake --build "$build_dir" --target pikv pikv-node pikv-controller peer_data_client \
  peer_lookup_client e2e_bench >/dev/null

echo "peers: $("$venv/bin/pip" list 2>/dev/null | grep -i '^mooncake' | tr -s ' '), redis $(redis-server --version | cut -d' ' -f3 | cut -d= -f2)"
exec "$venv/bin/python" bench/peers/peers_bench.py --bin-dir "$build_dir/bin" \
  --peers-python "$venv/bin/python" --mooncake-master "$venv/bin/mooncake_master" \
  "${lmcache[@]}" "$@"

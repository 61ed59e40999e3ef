#!/usr/bin/env bash
# Installs every Debian 12 package pikv needs to build, test and benchmark.
# Idempotent: re-running it is cheap when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libhiredis-dev librocksdb-dev
  libxxhash-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  libcpp-httplib-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server iproute2 procps docker-compose
  python3 python3-dev python3-venv python3-pip python3-setuptools pybind11-dev
  python3-pytest python3-numpy python3-torch
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package starts a system redis on :6379; pikv's tests start their own on
# free ports, so the system one is left alone.

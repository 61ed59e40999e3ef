#!/usr/bin/env bash
# Installs the Debian 12 packages pikv needs, by set:
#   bash scripts/install-deps.sh [build|test|runtime|all|demo ...]   (default: all)
#   build    compile everything scripts/build.sh builds (libraries, daemons, CLI,
#            tests, benchmarks, the Python module)
#   test     run the suite and CI's checks: Redis, etcd (standby controllers),
#            Python test packages, clang (sanitizers, fuzzers, clang-format),
#            iproute2, docker-compose
#   runtime  what the three binaries load, and curl for healthchecks (the
#            Docker image's runtime stage installs exactly this set)
#   demo     what scripts/demo.sh needs: build, and Redis (the shared tier)
#   all      build + test + runtime
#   vllm     after the Debian sets: a virtualenv with vLLM's CPU build, torch,
#            transformers and pytest (python/requirements-vllm.txt, pinned),
#            made once per requirements under ~/.cache/pikv and linked as
#            ./.venv-vllm, with pikv's Python package built into it for its
#            interpreter; not part of `all`
#   --print  only print the set's packages, one a line
# Idempotent: re-running it is cheap when everything is already present.
set -euo pipefail

build=(
  build-essential cmake ninja-build ccache pkg-config git
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libhiredis-dev librocksdb-dev
  libxxhash-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  libcpp-httplib-dev nlohmann-json3-dev libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-dev pybind11-dev
)
test=(
  redis-server etcd-server etcd-client iproute2 procps docker-compose
  python3-venv python3-pip python3-setuptools
  python3-pytest python3-numpy python3-torch
  clang clang-format libclang-rt-14-dev
)
# The shared libraries `ldd` lists for pikv, pikv-node and pikv-controller
# beyond the base system's, by their Debian 12 package names.
runtime=(
  libzmq5 libhiredis0.14 librocksdb7.8 libxxhash0 libspdlog1.10 libfmt9
  libyaml-cpp0.7 libcurl4 curl openssl
)

print=0
want_vllm=0
sets=()
for arg in "$@"; do
  case "$arg" in
    --print) print=1 ;;
    build | test | runtime | all | demo) sets+=("$arg") ;;
    vllm) sets+=(build test); want_vllm=1 ;;
    *) echo "usage: $0 [--print] [build|test|runtime|all|demo|vllm ...]" >&2; exit 2 ;;
  esac
done
((${#sets[@]})) || sets=(all)
packages=()
for s in "${sets[@]}"; do
  case "$s" in
    build) packages+=("${build[@]}") ;;
    test) packages+=("${test[@]}") ;;
    runtime) packages+=("${runtime[@]}") ;;
    demo) packages+=("${build[@]}" redis-server) ;;
    all) packages+=("${build[@]}" "${test[@]}" "${runtime[@]}") ;;
  esac
done
if ((print)); then
  printf '%s\n' "${packages[@]}" | awk '!seen[$0]++'
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The redis-server package starts a system redis on :6379 where services
  # start; pikv's tests start their own on free ports, so that one is left alone.
fi
if ((want_vllm)); then
  bash "$(dirname "$0")/install-vllm-venv.sh"
fi

#!/usr/bin/env bash
# pikv's GPU checks in one bounded run on a lent GPU machine (the `device`
# tool: one H100 or H200, CUDA 13, its own Python 3.12 with torch; nothing
# can be fetched there, 64 MiB travel with a call).
#
#   scripts/gpu-check.sh pack       here: build what the device runs and gather
#                                   it under .gpu/ (binaries, the pikv package
#                                   for the device's Python, the shared
#                                   libraries they need), checked under 64 MiB
#   scripts/gpu-check.sh run        there (carry .gpu): every check below, its
#                                   output and one JSON line of figures under
#                                   $OUT; exits non-zero if a check failed
#                                   (--quick: the Python device path's fused
#                                   and lease checks and its bench, ~1.5 min)
#   scripts/gpu-check.sh rehearse   here, in CI: pack with this machine's own
#                                   build and Python, then run with the device
#                                   steps skipped (what runs without a GPU)
#
# The checks (each under its own time limit, all under ~8 minutes):
#   1. remap_cuda_tests: the fused CUDA remap against the CPU remap, every
#      published config (label gpu);
#   2. tests/python/test_device.py -m gpu: pikv.device on CUDA tensors against
#      the C++ remap, every published config, f32/f16/bf16, both K forms,
#      flash/HND/block-major and vLLM's 4-D packings (label gpu);
#   3. remap_cuda_bench: the fused kernel beside a device-to-device copy;
#   4. python_connector_bench --device cuda: loads through pikv.device beside
#      a pinned host-to-device copy and a recompute estimate.
# The device call, from the repository root here:
#   scripts/gpu-check.sh pack, then device run with carry [".gpu"] and
#   command "bash scripts/gpu-check.sh run".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUNDLE=$ROOT/.gpu
LIMIT_MIB=60  # of the 64 MiB a call carries, with the working tree

# Python of the device machine's image (3.12); a pyenv 3.12 builds for it here.
DEVICE_PYTHON=${PIKV_GPU_PYTHON:-$HOME/.pyenv/versions/3.12.1/bin/python3}
TARGETS=(pikv pikv-node pikv-controller client_load_bench pikv_python)
CUDA_TARGETS=(remap_cuda_tests remap_cuda_bench)  # built where nvcc is

# Shared libraries every system has (glibc's, the compiler runtime's): not carried.
SYSTEM_LIBS='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.'

pack() {  # pack BUILD_DIR PYTHON
  local build=$1 python=$2
  export CCACHE_BASEDIR=$ROOT
  bash scripts/install-deps.sh build >/dev/null || return 1
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$python" \
      >/dev/null || return 1
  fi
  local targets=("${TARGETS[@]}")
  if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^remap_cuda_tests:'; then
    targets+=("${CUDA_TARGETS[@]}")
  else
    echo "gpu-check: no nvcc in this build: the CUDA remap's test and bench are not packed"
  fi
  cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" || return 1
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/python" || return 1
  for t in "${targets[@]}"; do
    [ "$t" = pikv_python ] || cp "$build/bin/$t" "$BUNDLE/bin/" || return 1
  done
  cp -r "$build/python/pikv" "$BUNDLE/python/" || return 1
  rm -rf "$BUNDLE/python/pikv/__pycache__"
  # Every shared library the binaries and the extension load, but the system's.
  local libs
  libs=$(ldd "$BUNDLE"/bin/* "$BUNDLE"/python/pikv/_pikv*.so | awk '/=> \//{print $1, $3}' |
    sort -u) || return 1
  while read -r name path; do
    [[ $name =~ $SYSTEM_LIBS ]] || cp -L "$path" "$BUNDLE/lib/$name" || return 1
  done <<<"$libs"
  strip --strip-unneeded "$BUNDLE"/bin/* "$BUNDLE"/lib/*.so* "$BUNDLE"/python/pikv/*.so ||
    return 1
  local bundle tree
  bundle=$(du -sb "$BUNDLE" | cut -f1)
  tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
  printf 'bundle %d MiB (%s), working tree %d MiB\n' $((bundle >> 20)) \
    "$(ls "$BUNDLE/lib" | wc -l) libraries" $((tree >> 20))
  if [ $(((bundle + tree) >> 20)) -ge $LIMIT_MIB ]; then
    echo "gpu-check: the bundle and the tree exceed ${LIMIT_MIB} MiB: a device call cannot carry them" >&2
    return 1
  fi
}

# ---- run: on the device machine (or rehearsed here) ----

STEPS=()
FAILED=0
step() {  # step NAME SECONDS COMMAND...: its output in $OUT/NAME.txt
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  echo "== $name"
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.txt" 2>&1
  rc=$?
  tail -n 40 "$OUT/$name.txt"
  STEPS+=("\"$name\": {\"rc\": $rc, \"seconds\": $((SECONDS - t0))}")
  [ $rc -eq 0 ] || FAILED=1
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
}

last_json() { [ -f "$OUT/$1.txt" ] && grep '^{' "$OUT/$1.txt" | tail -1; }

run() {  # run PYTHON DEVICE(yes|no)
  local python=$1 device=$2
  OUT=${OUT:-/tmp/pikv-gpu-check}
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH=$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PYTHONPATH=$BUNDLE/python PIKV_BIN_DIR=$BUNDLE/bin PIKV_BUILD_DIR=$BUNDLE
  export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
  local name="no device"
  if [ "$device" != no ]; then
    # A GPU check that cannot run fails here rather than skips.
    export PIKV_REQUIRE_GPU=1
    name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
      head -1 | tr -d '"\\')
  fi
  echo "device: $name; $("$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1)"
  if ldd "$BUNDLE"/bin/* "$BUNDLE"/python/pikv/_pikv*.so | grep 'not found'; then
    echo "gpu-check: the bundle misses libraries (above)" >&2
    return 1
  fi
  local pytest=("$python" -m pytest -q -rs -p no:cacheprovider)
  if [ "$device" = quick ]; then  # a re-check of the Python device path after a change
    step torch_device_gpu 120 "${pytest[@]}" -s -m gpu tests/python/test_device.py \
      -k "fused_remap_equals and (llama-3.1 or deepseek-v3 or gemma-3-4b or phi-2) or leased"
    step python_connector_bench 60 "$python" bench/python_connector_bench.py --device cuda \
      --path torch --chunks 4 --tokens 1024 --rounds 3 --iterations 10 --pin-arena both
  elif [ "$device" = yes ]; then
    [ -x "$BUNDLE/bin/remap_cuda_tests" ] || { echo "gpu-check: the bundle has no CUDA build" >&2; return 1; }
    step remap_cuda_tests 60 "$BUNDLE/bin/remap_cuda_tests"
    step torch_device_gpu 200 "${pytest[@]}" -s -m gpu tests/python/test_device.py
    step remap_cuda_bench 40 "$BUNDLE/bin/remap_cuda_bench" --iterations 20
    step python_connector_bench 90 "$python" bench/python_connector_bench.py --device cuda \
      --path torch --chunks 4 --tokens 1024 --rounds 3 --iterations 10 --profile --pin-arena both
  else  # the same steps as far as a CPU goes: each one's skip, and the torch path on CPU
    [ -x "$BUNDLE/bin/remap_cuda_tests" ] && step remap_cuda_tests 60 "$BUNDLE/bin/remap_cuda_tests"
    step torch_device_gpu 60 "${pytest[@]}" -m gpu tests/python/test_device.py
    step torch_device_cpu 120 "${pytest[@]}" -s tests/python/test_device.py \
      -k "torch_path_equals and (llama-3.2-1b or deepseek-v2-lite)"
    [ -x "$BUNDLE/bin/remap_cuda_bench" ] && step remap_cuda_bench 30 "$BUNDLE/bin/remap_cuda_bench"
    step python_connector_bench 120 "$python" bench/python_connector_bench.py --device cpu \
      --path both --chunks 1 --tokens 64 --rounds 1 --iterations 2
  fi
  local figures=() bench j
  for bench in remap_cuda_bench python_connector_bench; do
    j=$(last_json $bench)
    [ -n "$j" ] && figures+=("\"$bench\": $j")
  done
  local IFS=,
  echo "{\"check\": \"gpu\", \"device\": \"$name\", \"failed\": $FAILED, \"steps\": {${STEPS[*]}}, \"figures\": {${figures[*]}}}" |
    tee "$OUT/gpu-check.json"
  return $FAILED
}

case "${1:-}" in
  pack)
    [ -x "$DEVICE_PYTHON" ] || { echo "gpu-check: no Python 3.12 at $DEVICE_PYTHON (PIKV_GPU_PYTHON)" >&2; exit 1; }
    pack "${PIKV_GPU_BUILD_DIR:-build-gpu}" "$DEVICE_PYTHON"
    ;;
  run)  # on the GPU machine: without a GPU this fails, it does not rehearse
    nvidia-smi >/dev/null 2>&1 || { echo "gpu-check: no GPU here (nvidia-smi)" >&2; exit 1; }
    run "$(command -v python3)" "$([ "${2:-}" = --quick ] && echo quick || echo yes)"
    ;;
  rehearse)  # its own bundle, inside the build tree: .gpu stays the device's
    BUNDLE=$ROOT/${PIKV_BUILD_DIR:-build}/gpu-rehearsal
    OUT=${OUT:-$BUNDLE-out}
    pack "${PIKV_BUILD_DIR:-build}" /usr/bin/python3 && run /usr/bin/python3 no
    ;;
  *)
    sed -n '2,/^set /p' "$0" | sed '$d'
    exit 2
    ;;
esac

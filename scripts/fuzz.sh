#!/usr/bin/env bash
# Runs every libFuzzer target on a copy of its seed corpus (fuzz/corpus/<name>)
# for a bounded time; any crash, leak, sanitizer report or timeout fails.
#   bash scripts/fuzz.sh [seconds per target, default 20]
# Needs the fuzz build (bash scripts/sanitize.sh builds it in build-asan).
# Prints a table of executions per target and, last, one JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
dir="${PIKV_FUZZ_BUILD_DIR:-build-asan}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
json="{"
printf '| target | executions | exec/s | corpus |\n|---|---|---|---|\n'
for fuzzer in "$dir"/bin/fuzz_*; do
  name=$(basename "$fuzzer"); name=${name#fuzz_}
  [ "$name" = make_seeds ] && continue
  mkdir -p "$work/$name"
  cp -r "fuzz/corpus/$name/." "$work/$name/" 2>/dev/null || true
  # The published model configs are seeds too (kept once, as test data).
  [ "$name" = model_config ] && cp tests/device/model_configs/*.json "$work/$name/"
  log="$work/$name.log"
  if ! "$fuzzer" "$work/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -print_final_stats=1 -artifact_prefix="$work/$name-" >"$log" 2>&1; then
    echo "fuzz_$name FAILED:"; tail -40 "$log"
    mkdir -p fuzz-artifacts && cp "$work/$name"-* fuzz-artifacts/ 2>/dev/null || true
    exit 1
  fi
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  rate=$(grep -oE 'exec/s: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  units=$(ls "$work/$name" | wc -l)
  printf '| %s | %s | %s | %s |\n' "$name" "$runs" "${rate:-?}" "$units"
  json+="\"$name\":$runs,"
done
echo "${json%,}}"

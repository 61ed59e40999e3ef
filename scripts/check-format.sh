#!/usr/bin/env bash
# Every C++ source follows .clang-format. `--fix` rewrites them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.h' '*.cc' '*.cu' | grep -v '^fuzz/corpus/')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/pikv-format.$$; then
  grep -E '^[^ ].*(warning|error):' /tmp/pikv-format.$$ | cut -d: -f1 | sort -u |
    sed 's/$/: not formatted (bash scripts\/check-format.sh --fix)/' >&2
  rm -f /tmp/pikv-format.$$
  exit 1
fi
rm -f /tmp/pikv-format.$$
echo "format: ${#files[@]} files follow .clang-format"

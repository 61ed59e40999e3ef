#!/usr/bin/env bash
# The layering rule, checked: every part's README has one line
#   May include: <part>, <part>, ...   (or "(none)")
# and every `#include "pikv/<part>/..."` in that part's sources must name the
# part itself or one listed there. Prints each violation; exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=(common proto transport http coord storage device rpc node controller client engine launch apps python)
status=0
for part in "${parts[@]}"; do
  readme="$part/README.md"
  line=$(grep -m1 '^May include:' "$readme" 2>/dev/null || true)
  if [ -z "$line" ]; then
    echo "$readme: no 'May include:' line" >&2
    status=1
    continue
  fi
  allowed=" $part $(sed 's/^May include://; s/,/ /g; s/(none)//' <<<"$line") "
  while IFS=: read -r file lineno text; do
    used=$(sed -E 's|.*#include "pikv/([a-z_]+)/.*|\1|' <<<"$text")
    if [[ "$allowed" != *" $used "* ]]; then
      echo "$file:$lineno: $part may not include pikv/$used (see $readme)" >&2
      status=1
    fi
  done < <(git ls-files --cached --others --exclude-standard -- "$part" | grep -E '\.(h|cc|cu)$' |
             xargs -r grep -Hn '#include "pikv/' || true)
done
[ "$status" = 0 ] && echo "layering: every include follows its part's README"
exit "$status"

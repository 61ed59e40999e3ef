#!/usr/bin/env bash
# Installs the build into a temp prefix and uses it as another project
# would, with nothing from the build tree:
#   1. a CMake project finds the package and links pikv::client only: it
#      builds, runs, and neither its link line nor ldd names RocksDB,
#      hiredis, cpp-httplib or etcd's client (pikv_coord, libcurl);
#   2. the same program builds with the pkg-config file;
#   3. the installed binaries answer --version and carry no build-tree path;
#   4. the installed `pikv demo --prompts 8` runs a local cluster from the
#      prefix, with PATH holding nothing of pikv's and, where a mount
#      namespace can be made (root), the build tree hidden under an empty
#      tmpfs for the demo's processes only, and exits 0;
#   5. `pikv` copied alone to a directory without the daemons reports them
#      missing and exits 1 (it once aborted with an uncaught exception).
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/pikv-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
# Moved after installing: nothing may depend on where it was installed.
mv "$prefix" "$work/moved" && prefix="$work/moved"

fail() { echo "FAIL: $*" >&2; exit 1; }
forbidden='rocksdb|hiredis|httplib|pikv_coord|curl'

echo "== CMake package"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
link=$(ninja -C "$work/consumer" -t commands consumer | tail -1)
echo "link: $link"
grep -Eiq "$forbidden" <<<"$link" && fail "the link line names $forbidden"
grep -q "$build" <<<"$link" && fail "the link line names the build tree"
ldd "$work/consumer/consumer" | grep -Ei "$forbidden" && fail "ldd names $forbidden"
"$work/consumer/consumer" || fail "the consumer failed"

echo "== pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046  # pkg-config prints a list of flags
g++ -O1 -o "$work/consumer-pc" "$src/tests/install/consumer/main.cc" \
  $(pkg-config --cflags --libs pikv)
"$work/consumer-pc" >/dev/null || fail "the pkg-config build failed to run"

echo "== binaries"
for b in pikv pikv-node pikv-controller; do
  "$prefix/bin/$b" --version | grep -Eq "^$b [0-9]+\.[0-9]+\.[0-9]+ \(git " ||
    fail "$b --version"
  grep -q "$build" "$prefix/bin/$b" && fail "$b names the build tree"
done

echo "== installed demo"
# The build tree is hidden from the demo (not from tests running beside it).
hide=()
if unshare --mount true 2>/dev/null; then
  hide=(unshare --mount sh -c \
    'mount -t tmpfs pikv-hidden "$1" && [ -z "$(ls -A "$1")" ] && shift && exec "$@"' sh "$build")
  echo "build tree hidden: $build is an empty tmpfs for the demo"
else
  echo "no mount namespace here (not root): the build tree stays visible"
fi
env -i HOME="$work" TMPDIR="$work" PATH=/usr/bin:/bin \
  "${hide[@]}" "$prefix/bin/pikv" demo --prompts 8 --redis off >"$work/demo.log" 2>&1 ||
  { cat "$work/demo.log"; fail "the installed pikv demo failed"; }
grep -q "exactness vs recompute.*PASS" "$work/demo.log" || { cat "$work/demo.log"; fail "no report"; }
tail -n 25 "$work/demo.log"
echo "== pikv without its daemons"
mkdir "$work/alone" && cp "$prefix/bin/pikv" "$work/alone/"
set +e
env -i HOME="$work" TMPDIR="$work" PATH=/usr/bin:/bin "$work/alone/pikv" demo --prompts 1 \
  >"$work/alone.log" 2>&1
rc=$?
set -e
cat "$work/alone.log"
[ "$rc" = 1 ] || fail "pikv without daemons exited $rc, not 1"
grep -q "pikv-controller was found neither next to" "$work/alone.log" || fail "no clear error"

echo "install test passed"

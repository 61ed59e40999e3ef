#!/usr/bin/env bash
# Checks, without a Docker engine, that deploy/Dockerfile builds what CI
# builds and that its runtime stage has what the binaries load:
#   - the build stage runs scripts/build.sh (the script .ci/run runs), and
#     every binary it copies is one that build produces;
#   - both stages take their packages from scripts/install-deps.sh (build
#     and runtime sets), the build set holds no test-only package, and every
#     shared library the binaries load (readelf NEEDED, found with ldd) comes
#     from a package of the runtime set or of every Debian image;
#   - .dockerignore keeps build trees and .git out of the context;
#   - the compose deployment runs with security on, and is valid (with the
#     small-host override) where docker-compose is installed.
# Run after a build; BUILD_DIR defaults to ./build. scripts/docker-e2e.sh
# builds the image and runs the deployment for real.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${PIKV_BUILD_DIR:-build}"
dockerfile=deploy/Dockerfile
grep -qE '^RUN bash scripts/build.sh$' "$dockerfile" || { echo "Dockerfile does not build with scripts/build.sh"; exit 1; }
copied=$(grep -E '^COPY --from=build' "$dockerfile" | tr ' ' '\n' | grep -E '^/src/build/bin/' | sed 's|/src/build/bin/||')
[ -n "$copied" ] || { echo "Dockerfile copies no binaries"; exit 1; }
for bin in $copied; do
  [ -x "$build_dir/bin/$bin" ] || { echo "Dockerfile copies $bin, which the CI build does not produce"; exit 1; }
done
echo "Dockerfile: builds with scripts/build.sh; copies $(echo "$copied" | wc -w) binaries the CI build produced"

# Packages: one list per set, in scripts/install-deps.sh.
grep -qE '^RUN bash scripts/install-deps.sh build( |$)' "$dockerfile" ||
  { echo "the build stage does not install scripts/install-deps.sh's build set"; exit 1; }
grep -qE '^RUN bash /tmp/install-deps.sh runtime( |$)' "$dockerfile" ||
  { echo "the runtime stage does not install scripts/install-deps.sh's runtime set"; exit 1; }
if grep -vE '^\s*#' "$dockerfile" | grep -qE 'apt-get install'; then
  echo "Dockerfile installs packages of its own (use scripts/install-deps.sh's sets)"; exit 1
fi
test_only=$(bash scripts/install-deps.sh --print build | grep -E '^(python3-torch|python3-pytest|clang.*|redis-server|docker.*)$' || true)
[ -z "$test_only" ] || { echo "the build set holds test-only packages: $test_only"; exit 1; }
runtime=$(bash scripts/install-deps.sh --print runtime)
base="libc6 libgcc-s1 libstdc++6"  # in every Debian image (apt needs them)
for bin in $copied; do
  for lib in $(readelf -d "$build_dir/bin/$bin" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p'); do
    # "libx.so.1 => /path (addr)", or "/lib64/ld-linux-x86-64.so.2 (addr)"
    path=$(ldd "$build_dir/bin/$bin" |
      awk -v l="$lib" '$1 == l { print $3 } $1 ~ "/" l "$" { print $1 }' | head -1)
    [ -n "$path" ] || { echo "$bin: $lib not found on this machine"; exit 1; }
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true)
    pkg=${pkg%%:*}
    [ -n "$pkg" ] || { echo "$bin: no package owns $path"; exit 1; }
    if ! grep -qx "$pkg" <<<"$runtime" && [[ " $base " != *" $pkg "* ]]; then
      echo "$bin needs $lib from $pkg, which the runtime set (scripts/install-deps.sh) lacks"; exit 1
    fi
  done
done
echo "runtime set: has every library the $(echo "$copied" | wc -w) binaries load; build set: no test-only package"

for pattern in '.git' 'build*'; do
  grep -qxF "$pattern" .dockerignore || { echo ".dockerignore does not leave out $pattern"; exit 1; }
done

# Secure by default: both daemons' configs name the keyring, and every node
# service its own key pair.
grep -q '^curve-keyring:' deploy/config/controller.yaml && grep -q '^curve-key:' deploy/config/controller.yaml &&
  grep -q '^curve-keyring:' deploy/config/node.yaml || { echo "the compose configs run without security"; exit 1; }
services=$(grep -cE '^  node[0-9]+:' deploy/docker-compose.yml)
keyed=$(grep -cE 'PIKV_CURVE_KEY: /var/lib/pikv/keys/node-node[0-9]+' deploy/docker-compose.yml)
[ "$services" = "$keyed" ] || { echo "a compose node runs without its key pair"; exit 1; }
if command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f deploy/docker-compose.yml config -q
  docker-compose -f deploy/docker-compose.yml -f deploy/docker-compose.small.yml config -q
  echo "docker-compose.yml: valid (alone and with docker-compose.small.yml), security on"
fi

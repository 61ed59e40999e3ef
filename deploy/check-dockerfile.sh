#!/usr/bin/env bash
# Checks that deploy/Dockerfile builds what CI builds: its build stage must
# run scripts/build.sh (the script .ci/run runs), and every binary it copies
# must be one that build produces. Run after a build; BUILD_DIR defaults to
# ./build. Also checks that the compose deployment runs with security on, and
# validates the compose file when docker-compose is installed.
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
echo "Dockerfile: builds with scripts/build.sh; copies $(echo $copied | wc -w) binaries the CI build produced"
# Secure by default: both daemons' configs name the keyring, and every node
# service its own key pair.
grep -q '^curve-keyring:' deploy/config/controller.yaml && grep -q '^curve-key:' deploy/config/controller.yaml &&
  grep -q '^curve-keyring:' deploy/config/node.yaml || { echo "the compose configs run without security"; exit 1; }
services=$(grep -cE '^  node[0-9]+:' deploy/docker-compose.yml)
keyed=$(grep -cE 'PIKV_CURVE_KEY: /var/lib/pikv/keys/node-node[0-9]+' deploy/docker-compose.yml)
[ "$services" = "$keyed" ] || { echo "a compose node runs without its key pair"; exit 1; }
if command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f deploy/docker-compose.yml config -q
  echo "docker-compose.yml: valid, security on"
fi

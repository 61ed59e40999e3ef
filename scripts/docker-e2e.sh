#!/usr/bin/env bash
# The container deployment, built and run for real (run by .ci/run, as root):
# builds the pikv image, starts deploy/docker-compose.yml (Redis, etcd, two
# controllers, three nodes, security on) and uses it as a user would:
#   - the image: every binary's libraries present (ldd), every binary answers --version;
#   - `pikv admin nodes|stats|health` inside a container with the admin key,
#     the leader found through etcd: 3 nodes alive, one leader, one standby;
#   - an engine on the host (the Python package, the engine key copied out of
#     the keys volume) stores chunks through node1's published port; a second
#     engine on node2's port gets them by node2 pulling from node1 and remaps
#     them exactly (byte for byte);
#   - a key pair the keyring does not list gets no answer on the published ports;
#   - node2 killed and started again: it re-registers and re-reports its disk tier;
#   - the leader's container killed while the host asks the controllers every
#     100 ms (by their published ports): the standby leads at a higher epoch,
#     the nodes re-register and report their chunks again, answers resume;
#     the killed one started again stands by;
#   - `down -v`: no container, volume or network of the project is left.
# It prints a table of the steps and their times at the end. Every address it
# uses is the host's loopback or the compose network's.
#
# What it needs and does to the machine:
#   - Docker: installs Debian's docker.io if no dockerd is installed, and
#     starts dockerd if none runs (stopped again at exit). The dockerd it
#     starts runs with --iptables=false --ip-forward=false --bridge=none: it
#     changes no firewall rule, no FORWARD policy (dockerd would set it to
#     DROP, which breaks tests/multihost's bridged namespaces) and no sysctl,
#     and makes no docker0 bridge; the compose network is a plain bridge
#     (containers on it reach each other; published ports go through
#     docker-proxy on the host's loopback), and builds use the host's network
#     to reach the apt mirror. At exit the iptables FORWARD policies and the
#     forwarding sysctls are put back as found, whatever happened.
#   - Base images: `debian:12` and `debian:12-slim` are made once with
#     debootstrap from the apt mirror this host uses (no registry is
#     reachable) and kept; so are the built images (pikv:latest,
#     pikv-redis-test:latest: deploy/redis-test, Debian's redis-server in
#     place of redis:7; pikv-etcd-test:latest: deploy/etcd-test, Debian's
#     etcd in place of quay.io/coreos/etcd) and Docker's build cache, under
#     /var/lib/docker.
#   - The host-side engine runs /usr/bin/python3 with the build tree's module
#     (${PIKV_BUILD_DIR:-build}/python; built by scripts/build.sh if missing).
#   - Ports on 127.0.0.1: 7300 7301 7380 7381 7401-7403 7481-7483 must be free.
# Bounded: every command has a timeout, and the whole run stops (and cleans
# up) past PIKV_E2E_LIMIT seconds (default 900); a run takes 2-3 minutes.
# PIKV_SKIP_DOCKER_E2E=1 skips it all and says so (CI must not set it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${PIKV_SKIP_DOCKER_E2E:-}" = 1 ]; then
  echo "docker-e2e: SKIPPED (PIKV_SKIP_DOCKER_E2E=1): the image and the compose deployment were NOT built or tested"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "docker-e2e: needs root (it may install and start a Docker engine)" >&2
  exit 1
fi

PROJECT=pikv-e2e
BUILD_DIR="${PIKV_BUILD_DIR:-build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/pikv-docker-e2e.XXXXXX)
PORTS=(7300 7301 7380 7381 7401 7402 7403 7481 7482 7483)
SERVICES=(redis etcd controller1 controller2 node1 node2 node3)
export PIKV_REDIS_IMAGE=pikv-redis-test:latest PIKV_IMAGE=pikv:latest PIKV_PUBLISH=127.0.0.1
export PIKV_ETCD_IMAGE=pikv-etcd-test:latest

# --- the table of steps -------------------------------------------------------
names=() secs=() results=()
t_all=$(date +%s.%N)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
table() {
  echo
  echo "docker-e2e: steps"
  printf '  %-58s %8s  %s\n' step seconds result
  printf '  %s\n' "--------------------------------------------------------------------------------"
  for i in "${!names[@]}"; do printf '  %-58s %8s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"; done
  printf '  %-58s %8s\n' "total" "$(since "$t_all")"
}
current=""
# step NAME FUNCTION [ARGS...]: runs it, timed; a failure ends the run (the
# trap cleans up and prints the table).
step() {
  local name=$1 t0
  shift
  current=$name
  echo
  echo "=== $name"
  t0=$(now)
  "$@"
  names+=("$name") secs+=("$(since "$t0")") results+=(ok)
  current=""
}

# --- host state put back at exit ---------------------------------------------
started_dockerd=""
dockerd_pid=""
run_docker_existed="" run_containerd_existed=""
forward_policy="" forward_policy_legacy=""
sysctls=(net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.bridge.bridge-nf-call-iptables
         net.bridge.bridge-nf-call-ip6tables)
declare -A sysctl_was=()
compose_up=""
watchdog=""

policy_of() { "$1" -S FORWARD 2>/dev/null | awk '$1 == "-P" { print $3 }'; }
record_host_state() {
  if command -v iptables >/dev/null; then forward_policy=$(policy_of iptables); fi
  if command -v iptables-legacy >/dev/null; then forward_policy_legacy=$(policy_of iptables-legacy); fi
  for s in "${sysctls[@]}"; do
    sysctl_was[$s]=$(sysctl -n "$s" 2>/dev/null || echo absent)
  done
  echo "host state: iptables FORWARD policy ${forward_policy:-n/a} (legacy: ${forward_policy_legacy:-n/a});" \
    "$(for s in "${sysctls[@]}"; do printf '%s=%s ' "$s" "${sysctl_was[$s]}"; done)"
}
# A host whose FORWARD policy drops (a dockerd once started with its
# iptables rules leaves DROP behind) and that passes bridged frames through
# iptables (br_netfilter) drops the compose network's traffic between
# containers: the controllers never reach etcd. For the run, bridged frames
# skip iptables (restore_host_state puts the sysctls back).
let_bridges_forward() {
  local drops=""
  [ "${forward_policy:-ACCEPT}" = ACCEPT ] || drops=1
  [ "${forward_policy_legacy:-ACCEPT}" = ACCEPT ] || drops=1
  if [ -n "$drops" ] && [ "${sysctl_was[net.bridge.bridge-nf-call-iptables]:-absent}" = 1 ]; then
    echo "the FORWARD policy drops and bridged frames go through iptables: off for this run"
    sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 || true
  fi
}
restore_host_state() {
  local p
  if [ -n "$forward_policy" ] && p=$(policy_of iptables) && [ "$p" != "$forward_policy" ]; then
    echo "restoring the iptables FORWARD policy: $p -> $forward_policy"
    iptables -P FORWARD "$forward_policy" || true
  fi
  if [ -n "$forward_policy_legacy" ] && p=$(policy_of iptables-legacy) && [ "$p" != "$forward_policy_legacy" ]; then
    echo "restoring the iptables-legacy FORWARD policy: $p -> $forward_policy_legacy"
    iptables-legacy -P FORWARD "$forward_policy_legacy" || true
  fi
  for s in "${!sysctl_was[@]}"; do
    local was=${sysctl_was[$s]} is
    [ "$was" = absent ] && continue
    is=$(sysctl -n "$s" 2>/dev/null || echo absent)
    if [ "$is" != "$was" ]; then
      echo "restoring $s: $is -> $was"
      sysctl -qw "$s=$was" || true
    fi
  done
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  kill -TERM "$watchdog" 2>/dev/null
  if [ -n "$current" ]; then
    names+=("$current") secs+=("-") results+=(FAILED)
    echo
    echo "docker-e2e: FAILED at: $current"
    if [ -n "$compose_up" ]; then
      echo "--- docker ps"; timeout 20 "$DOCKER" ps -a --filter "label=com.docker.compose.project=$PROJECT"
      for s in "${SERVICES[@]}"; do
        echo "--- logs of $s (last 25 lines)"
        timeout 20 "$DOCKER" logs --tail 25 "$(cid "$s")" 2>&1
      done
    fi
    if [ -f "$WORK/dockerd.log" ] && grep -qE 'level=(error|fatal)' "$WORK/dockerd.log"; then
      echo "--- dockerd errors (last 20)"; grep -E 'level=(error|fatal)' "$WORK/dockerd.log" | tail -20
    fi
  fi
  if [ -n "$compose_up" ] || leftovers >/dev/null 2>&1; then
    echo
    echo "=== cleanup: $PROJECT down -v"
    compose_down
  fi
  if [ -n "$started_dockerd" ]; then
    echo "=== cleanup: stopping the dockerd this run started (pid $dockerd_pid)"
    stop_dockerd
  fi
  restore_host_state
  rm -rf "$WORK"
  table
  if [ "$rc" -eq 0 ]; then echo "docker-e2e: ok"; else echo "docker-e2e: FAILED (exit $rc)"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The whole run is bounded: past PIKV_E2E_LIMIT seconds (default 900) the
# watchdog stops the step under way and the run (the trap still cleans up).
limit=${PIKV_E2E_LIMIT:-900}
(
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$limit" &
  nap=$!
  wait "$nap"
  echo "docker-e2e: over ${limit}s: stopping" >&2
  # Not dockerd: the cleanup still needs it for `down`, then stops it.
  keep=$(cat "$WORK/dockerd.pid" 2>/dev/null || true)
  for p in $(ps --ppid $$ -o pid=); do
    [ "$p" = "$BASHPID" ] || [ "$p" = "$keep" ] || kill -TERM "$p" 2>/dev/null
  done
  kill -TERM $$ 2>/dev/null
) &
watchdog=$!

# --- Docker -------------------------------------------------------------------
DOCKER=""
COMPOSE=()
ensure_engine() {
  if ! command -v dockerd >/dev/null || [ ! -x /usr/bin/docker ]; then
    # Debian's engine: dockerd 20.10 with its own client (API 1.41). A newer
    # client elsewhere on PATH speaks to it too, but only Debian's builds
    # with BuildKit without the buildx plugin.
    echo "installing Debian's docker.io"
    # The package would start its services (dockerd with its iptables rules
    # and a DROP FORWARD policy): no service starts while it installs.
    local guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      guard=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends docker.io >/dev/null ||
      { [ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d; return 1; }
    [ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
  fi
  DOCKER=/usr/bin/docker
  if "$DOCKER" compose version >/dev/null 2>&1; then
    COMPOSE=("$DOCKER" compose)
  else
    if ! command -v docker-compose >/dev/null; then
      DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
    fi
    COMPOSE=(docker-compose)
  fi
  COMPOSE+=(-p "$PROJECT" -f deploy/docker-compose.yml -f deploy/docker-compose.small.yml)
  record_host_state
  let_bridges_forward
  if timeout 20 "$DOCKER" info >/dev/null 2>&1; then
    echo "using the running Docker engine"
  else
    # No daemon answers: start one that leaves the host's networking alone.
    if [ -d /run/docker ]; then run_docker_existed=1; fi
    if [ -d /run/containerd ]; then run_containerd_existed=1; fi
    cat >"$WORK/daemon.json" <<'EOF'
{
  "iptables": false,
  "ip-forward": false,
  "bridge": "none",
  "builder": {"gc": {"enabled": true, "defaultKeepStorage": "8GB"}}
}
EOF
    setsid dockerd --config-file "$WORK/daemon.json" --pidfile "$WORK/dockerd.pid" \
      >"$WORK/dockerd.log" 2>&1 </dev/null &
    dockerd_pid=$!
    started_dockerd=1
    local deadline=$((SECONDS + 60))
    until timeout 10 "$DOCKER" info >/dev/null 2>&1; do
      if ! kill -0 "$dockerd_pid" 2>/dev/null || ((SECONDS > deadline)); then
        echo "dockerd did not start:"; tail -20 "$WORK/dockerd.log"; return 1
      fi
      sleep 0.5
    done
    echo "started dockerd (pid $dockerd_pid): no iptables rules, no ip_forward, no docker0"
  fi
  echo "engine $(timeout 20 "$DOCKER" version -f '{{.Server.Version}} (API {{.Server.APIVersion}})'); client $DOCKER; compose: ${COMPOSE[*]:0:2}"
}
stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  kill -TERM "$dockerd_pid" 2>/dev/null
  local deadline=$((SECONDS + 40))
  while kill -0 "$dockerd_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
  if kill -0 "$dockerd_pid" 2>/dev/null; then
    echo "dockerd did not stop in 40 s: killing it"
    kill -KILL "$dockerd_pid" 2>/dev/null
  fi
  wait "$dockerd_pid" 2>/dev/null
  # dockerd stops the containerd it started; nothing of ours may remain.
  sleep 1
  local left
  left=$(pgrep -a -f '(^|/)(dockerd|containerd|containerd-shim-runc-v2|docker-proxy)( |$)' || true)
  if [ -n "$left" ]; then echo "left running after dockerd stopped:"; echo "$left"; fi
  # dockerd leaves the host's network namespace bound at
  # /run/docker/netns/default, and its runtime directory.
  if grep -q ' /run/docker/netns/default ' /proc/mounts; then umount /run/docker/netns/default || true; fi
  # dockerd leaves its runtime directories (and containerd's shims theirs).
  if [ -z "$run_docker_existed" ] && [ -d /run/docker ] && ! grep -q ' /run/docker/' /proc/mounts; then
    rm -rf /run/docker
  fi
  if [ -z "$run_containerd_existed" ] && [ -d /run/containerd ] &&
    ! grep -q ' /run/containerd/' /proc/mounts; then
    rm -rf /run/containerd
  fi
  if ip link show docker0 >/dev/null 2>&1; then echo "note: a docker0 bridge exists (not made by this run)"; fi
  return 0
}

cid() {  # the container of a compose service (either compose flavour)
  "$DOCKER" ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
    --filter "label=com.docker.compose.service=$1" | head -1
}
leftovers() {  # containers, volumes and networks of the project
  [ -n "$DOCKER" ] || return 1
  local c v n
  c=$(timeout 20 "$DOCKER" ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  v=$(timeout 20 "$DOCKER" volume ls -q --filter "label=com.docker.compose.project=$PROJECT")
  n=$(timeout 20 "$DOCKER" network ls -q --filter "label=com.docker.compose.project=$PROJECT")
  [ -n "$c$v$n" ] && { echo "containers: $c volumes: $v networks: $n" | tr '\n' ' '; echo; }
}
compose_down() {
  timeout 180 "${COMPOSE[@]}" down -v --remove-orphans -t 10 >"$WORK/down.log" 2>&1 ||
    { echo "compose down failed:"; cat "$WORK/down.log"; }
  compose_up=""
}

# --- steps ----------------------------------------------------------------------
engine_step() { ensure_engine; }

base_images() {
  if timeout 20 "$DOCKER" image inspect debian:12 >/dev/null 2>&1; then
    echo "debian:12 exists (made by an earlier run): kept"
  else
    command -v debootstrap >/dev/null ||
      DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    # The mirror this host's apt uses.
    local mirror rootfs="$WORK/rootfs"
    mirror=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }' |
      grep -E '/debian/?$' | head -1 || true)
    [ -n "$mirror" ] || mirror=$(grep -hsE '^deb (\[[^]]*\] )?https?://[^ ]*/debian/? bookworm ' \
      /etc/apt/sources.list | sed -E 's/^deb (\[[^]]*\] )?//' | awk '{ print $1 }' | head -1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "debootstrap --variant=minbase bookworm from $mirror"
    timeout 900 debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
      { tail -20 "$WORK/debootstrap.log"; return 1; }
    # As Debian's own images: the same apt sources as this host, no caches,
    # no documentation installed.
    rm -f "$rootfs/etc/apt/sources.list"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/debian.sources"
    else
      printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" >"$rootfs/etc/apt/sources.list.d/debian.sources"
    fi
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
      'path-exclude /usr/share/locale/*' >"$rootfs/etc/dpkg/dpkg.cfg.d/docker"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
      "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
      "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/apt/*
    tar -C "$rootfs" -c . | timeout 300 "$DOCKER" import -c 'CMD ["bash"]' - debian:12 >/dev/null
    rm -rf "$rootfs"
  fi
  timeout 20 "$DOCKER" image inspect debian:12-slim >/dev/null 2>&1 || "$DOCKER" tag debian:12 debian:12-slim
  "$DOCKER" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' debian
}

# build TAG TIMEOUT ARGS...: builds, then removes the image TAG named before
# (if unused), so repeated runs leave no dangling images.
build() {
  local tag=$1 limit=$2 old new
  shift 2
  old=$("$DOCKER" image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  # BuildKit (cache of its own, pruned by the daemon) where the client has it
  # built in (20.10) or has the buildx plugin; the classic builder otherwise.
  local buildkit=0
  if "$DOCKER" buildx version >/dev/null 2>&1 ||
    [ "$("$DOCKER" version -f '{{.Client.Version}}' | cut -d. -f1)" -lt 23 ]; then buildkit=1; fi
  DOCKER_BUILDKIT=$buildkit timeout "$limit" "$DOCKER" build --network host --progress plain \
    -t "$tag" "$@" >"$WORK/build-${tag%%:*}.log" 2>&1 ||
    { tail -40 "$WORK/build-${tag%%:*}.log"; return 1; }
  new=$("$DOCKER" image inspect -f '{{.Id}}' "$tag")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then "$DOCKER" rmi "$old" >/dev/null 2>&1 || true; fi
  local size
  size=$("$DOCKER" image inspect -f '{{.Size}}' "$tag")
  echo "$tag: $((size / 1000000)) MB (BuildKit: $buildkit)"
}
build_pikv() {
  local rev
  rev=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
  build pikv:latest 900 -f deploy/Dockerfile --build-arg PIKV_GIT_REVISION="$rev" .
  # BuildKit's plain log: how long the package and the compile steps took.
  awk '$1 ~ /^#[0-9]+$/ && $2 ~ /^\[/ { step[$1] = substr($0, length($1) + 2) }
       $1 ~ /^#[0-9]+$/ && ($2 == "DONE" || $2 == "CACHED") &&
       step[$1] ~ /install-deps.sh build|scripts\/build.sh/ {
         printf "  %-64s %s\n", substr(step[$1], 1, 64), ($2 == "DONE" ? $3 : "cached") }' \
    "$WORK/build-pikv.log" || true
}
build_redis() { build pikv-redis-test:latest 300 deploy/redis-test; }
build_etcd() { build pikv-etcd-test:latest 300 deploy/etcd-test; }

check_image() {
  # As a user would: every binary's libraries are there, every binary starts.
  timeout 60 "$DOCKER" run --rm --network none pikv:latest sh -ec '
    for b in pikv pikv-node pikv-controller; do
      if ldd "/usr/local/bin/$b" | grep "not found"; then echo "$b: libraries missing"; exit 1; fi
      "$b" --version
    done
    echo "runs as $(id -un) (uid $(id -u))"'
}

ports_free() {
  local busy=()
  for p in "${PORTS[@]}"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then busy+=("$p"); fi
  done
  if ((${#busy[@]})); then echo "ports in use on 127.0.0.1: ${busy[*]}"; return 1; fi
  echo "127.0.0.1 ports ${PORTS[*]} are free"
}

up() {
  if leftovers >/dev/null; then
    echo "an earlier run of $PROJECT was left behind: down -v first"
    compose_down
  fi
  ports_free
  compose_up=1
  timeout 240 "${COMPOSE[@]}" up -d >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; return 1; }
  wait_healthy 120
}
# Every service healthy (keys: exited 0), within LIMIT seconds.
wait_healthy() {
  local limit=$1 deadline=$((SECONDS + $1)) s st bad
  while true; do
    bad=()
    st=$(timeout 20 "$DOCKER" inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$(cid keys)" 2>/dev/null || echo missing)
    [ "$st" = "exited 0" ] || bad+=("keys:$st")
    for s in "${SERVICES[@]}"; do
      st=$(timeout 20 "$DOCKER" inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' \
        "$(cid "$s")" 2>/dev/null || echo missing)
      [ "$st" = running/healthy ] || bad+=("$s:$st")
    done
    ((${#bad[@]} == 0)) && break
    if ((SECONDS > deadline)); then echo "not healthy within ${limit}s: ${bad[*]}"; return 1; fi
    sleep 1
  done
  timeout 30 "${COMPOSE[@]}" ps 2>&1 | sed 's/^/  /'
}

admin() {  # pikv admin inside node1's container, with the admin key, the leader found by etcd
  timeout 30 "$DOCKER" exec -e PIKV_CURVE_KEY=/var/lib/pikv/keys/admin \
    -e PIKV_CURVE_KEYRING=/var/lib/pikv/keys/keyring -e PIKV_CONTROLLER='etcd://etcd:2379?tls=/var/lib/pikv/keys/etcd' \
    "$(cid node1)" pikv admin "$@"
}
# Until `admin nodes` lists node1..3 alive (node WANT_NEW: with an incarnation
# other than OLD), within LIMIT seconds.
wait_alive() {
  local limit=$1 want_new=${2:-} old=${3:-} deadline=$((SECONDS + $1)) json=""
  while true; do
    json=$(admin nodes --json 2>/dev/null || true)
    if [ -n "$json" ] && echo "$json" | "$PY" -c '
import json, sys
nodes = {n["id"]: n for n in json.load(sys.stdin)["nodes"]}
want_new, old = sys.argv[1], sys.argv[2]
ok = all(nodes.get(i, {}).get("state") == "alive" for i in ("node1", "node2", "node3"))
if want_new:
    ok = ok and nodes[want_new]["incarnation"] != old
sys.exit(0 if ok else 1)' "$want_new" "$old"; then
      break
    fi
    if ((SECONDS > deadline)); then
      echo "nodes not all alive within ${limit}s:"; admin nodes || true; return 1
    fi
    sleep 0.5
  done
}
incarnation() {
  admin nodes --json | "$PY" -c '
import json, sys
print({n["id"]: n for n in json.load(sys.stdin)["nodes"]}[sys.argv[1]]["incarnation"])' "$1"
}

admin_tables() {
  wait_alive 60
  admin nodes
  admin stats
  admin health | tee "$WORK/health"
  grep -q '^status: ok (3 alive' "$WORK/health" || { echo "health is not ok with 3 alive"; return 1; }
  grep -Eq '^controller: leader tcp://controller[12]:7300, epoch [0-9]+, .*standbys: tcp://controller[12]:7300$' \
    "$WORK/health" || { echo "health names no leader with one standby"; return 1; }
}

engine_keys() {
  # The engine's key pair and the keyring, out of the keys volume (as an
  # operator hands them to an engine host), and a key pair nobody listed.
  mkdir -m 700 "$WORK/keys"
  local f
  for f in engine.key engine.pub admin.key admin.pub keyring; do
    timeout 30 "$DOCKER" exec "$(cid node1)" cat "/var/lib/pikv/keys/$f" >"$WORK/keys/$f"
  done
  chmod 600 "$WORK"/keys/*
  if ! ls "$BUILD_DIR"/python/pikv/_pikv*.so >/dev/null 2>&1 || [ ! -x "$BUILD_DIR/bin/pikv" ]; then
    echo "no Python module in $BUILD_DIR/python: building"; PIKV_BUILD_DIR="$BUILD_DIR" bash scripts/build.sh
  fi
  "$BUILD_DIR/bin/pikv" keygen "$WORK/stranger" >/dev/null
  "$PY" -c 'import numpy' 2>/dev/null ||
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends python3-numpy >/dev/null
  echo "engine key pair and keyring copied out of the keys volume; an unlisted pair made with pikv keygen"
}
engine() {  # the host-side engine (scripts/docker_e2e_engine.py)
  PYTHONPATH="$BUILD_DIR/python" timeout 120 "$PY" scripts/docker_e2e_engine.py "$@"
}
p2p() { engine p2p "$WORK/keys" "$WORK/state.json"; }
tier() {  # tier() TIER FIELD: a number of `pikv admin stats`
  admin stats --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["tiers"][sys.argv[1]][sys.argv[2]])' "$1" "$2"
}
stats_after_p2p() {
  # Chunks come with the nodes' events at once, bytes with their next
  # heartbeat: the table once the bytes are in (bounded).
  local deadline=$((SECONDS + 15))
  until [ "$(tier cpu used_bytes)" -gt 0 ] || ((SECONDS > deadline)); do sleep 0.5; done
  admin stats
  local remote
  remote=$(tier remote chunks)
  echo "remote tier: $remote chunks, $(tier remote used_bytes) bytes (the nodes write through to Redis; not asserted)"
  # The remote tier's assertion goes here once the nodes report it everywhere:
  # [ "$remote" -ge 2 ] || { echo "the remote tier shows $remote chunks, not the 2 stored"; return 1; }
}
unlisted() { engine unlisted "$WORK/keys" "$WORK/stranger"; }

kill_node2() {
  local old
  old=$(incarnation node2)
  timeout 30 "$DOCKER" kill "$(cid node2)" >/dev/null
  echo "node2 killed (SIGKILL); waiting for the controller to drop its copies"
  engine locate "$WORK/keys" "$WORK/state.json" node2 none
  admin nodes
  timeout 60 "$DOCKER" start "$(cid node2)" >/dev/null
  echo "node2 started again (same volume)"
  wait_alive 60 node2 "$old"
  engine locate "$WORK/keys" "$WORK/state.json" node2 disk
  admin nodes
  echo "node2 re-registered (incarnation $old -> $(incarnation node2)) and re-reported its disk tier"
}

health_field() { admin health --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
epoch() { health_field epoch; }
leader_service() { health_field leader | sed -E 's|tcp://([a-z0-9]+):7300|\1|'; }
# Host-side load: `pikv admin stats` through both published controller
# ports every 100 ms; one line per call, "<seconds> ok|fail".
host_load() {
  local t0=$1 out=$2 r
  while :; do
    if PIKV_CURVE_KEY="$WORK/keys/admin" PIKV_CURVE_KEYRING="$WORK/keys/keyring" \
      timeout 5 "$BUILD_DIR/bin/pikv" admin stats --json --timeout 500ms \
      --controller tcp://127.0.0.1:7300,tcp://127.0.0.1:7301 >/dev/null 2>&1; then r=ok; else r=fail; fi
    echo "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }') $r" >>"$out"
    sleep 0.1
  done
}
kill_leader() {
  local old leader standby t0 load deadline
  old=$(epoch)
  leader=$(leader_service)
  case "$leader" in controller1) standby=controller2 ;; controller2) standby=controller1 ;;
    *) echo "no leader named: '$leader'"; return 1 ;; esac
  t0=$(now)
  host_load "$t0" "$WORK/load" &
  load=$!
  sleep 1
  timeout 30 "$DOCKER" kill "$(cid "$leader")" >/dev/null
  echo "$leader (the leader, epoch $old) killed (SIGKILL) at $(since "$t0") s"
  deadline=$((SECONDS + 30))
  until [ "$(leader_service 2>/dev/null)" = "$standby" ]; do
    ((SECONDS < deadline)) || { kill "$load"; echo "$standby did not take over in 30 s"; return 1; }
    sleep 0.2
  done
  echo "$standby leads at $(since "$t0") s: epoch $old -> $(epoch)"
  [ "$(epoch)" -gt "$old" ] || { kill "$load"; echo "the epoch did not grow"; return 1; }
  wait_alive 60
  engine locate "$WORK/keys" "$WORK/state.json" node1 cpu disk
  engine locate "$WORK/keys" "$WORK/state.json" node2 disk
  sleep 1
  kill "$load"
  wait "$load" 2>/dev/null || true
  awk '{ if ($2 == "fail") { if (start == "") start = prev } else { if (start != "" && $1 - start > gap) gap = $1 - start; start = "" }
         prev = $1; n[$2]++ }
       END { printf "host load: %d answered, %d unanswered; longest time without an answer %.2f s\n",
             n["ok"], n["fail"], gap }' "$WORK/load"
  tail -1 "$WORK/load" | grep -q ' ok$' || { echo "the host's last call went unanswered"; return 1; }
  timeout 60 "$DOCKER" start "$(cid "$leader")" >/dev/null
  deadline=$((SECONDS + 60))
  until admin health >"$WORK/health" 2>&1 && grep -q "standbys: tcp://$leader:7300\$" "$WORK/health"; do
    ((SECONDS < deadline)) || { cat "$WORK/health"; echo "$leader did not come back as a standby"; return 1; }
    sleep 0.5
  done
  cat "$WORK/health"
  admin nodes
}

down() {
  compose_down
  local left
  left=$(leftovers || true)
  if [ -n "$left" ]; then echo "left behind: $left"; return 1; fi
  local procs
  procs=$(pgrep -a -x docker-proxy || true)
  [ -z "$procs" ] || { echo "docker-proxy still running: $procs"; return 1; }
  echo "no container, volume or network of $PROJECT is left"
}

step "engine: docker.io, dockerd" engine_step
step "base images debian:12, debian:12-slim" base_images
step "image pikv:latest (deploy/Dockerfile)" build_pikv
step "image pikv-redis-test (deploy/redis-test)" build_redis
step "image pikv-etcd-test (deploy/etcd-test)" build_etcd
step "image: ldd complete, every binary --version" check_image
step "compose up -d, every service healthy" up
step "pikv admin nodes/stats/health: 3 alive" admin_tables
step "engine keys out of the keys volume" engine_keys
step "store via node1, node2 pulls, exact remap" p2p
step "pikv admin stats after the P2P" stats_after_p2p
step "unlisted key: no answer on published ports" unlisted
step "node2 killed, started: re-registers, disk re-reported" kill_node2
step "leader killed under load: standby leads, registry rebuilt" kill_leader
step "compose down -v: nothing left" down

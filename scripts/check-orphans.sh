#!/usr/bin/env bash
# Fails if pikv processes, or redis-servers that were not running before,
# outlive the suite.   before=$(bash scripts/check-orphans.sh snapshot)
#                      ... run tests ...
#                      bash scripts/check-orphans.sh check "$before"
set -euo pipefail
redis_pids() { pgrep -x redis-server | sort || true; }
case "${1:-}" in
  snapshot) redis_pids | tr '\n' ' ' ;;
  check)
    sleep 1  # a killed child may take a moment to be reaped
    left=$(pgrep -a -f '(^|/)(pikv-node|pikv-controller|pikv|fault_soak|fuzz_[a-z_]+)( |$)' || true)
    for pid in $(redis_pids); do
      case " ${2:-} " in *" $pid "*) ;; *) left+=$'\n'"$(ps -o pid=,args= -p "$pid")" ;; esac
    done
    left=$(echo "$left" | sed '/^\s*$/d')
    if [ -n "$left" ]; then
      echo "processes outlived the suite:"; echo "$left"
      exit 1
    fi
    echo "no process outlived the suite" ;;
  *) echo "usage: $0 snapshot | check <snapshot>"; exit 2 ;;
esac

"""What bench/peers' Python clients (mooncake_client.py, lmcache_client.py)
share with the driver: the start signal and the timed loop of calls, whose
result is peer_data_client's JSON line (bench/peers/client_result.h)."""
import json
import sys
import time


def wait_for_go():
    """Says "ready" and waits for a line on stdin (the driver starts a run's
    clients together, once each is set up)."""
    print("ready", flush=True)
    sys.stdin.readline()


def timed_calls(call, batch, seconds, sync):
    """Calls `call()` (True: all `batch` keys ok) for `seconds`, at least
    once, after the start signal when `sync`; prints the JSON line. A failed
    call adds no latency. Returns 0 when none failed."""
    if sync:
        wait_for_go()
    ok = failed = 0
    latencies = []
    cpu_start = time.process_time()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or ok + failed == 0:
        t0 = time.perf_counter()
        if call():
            latencies.append(int((time.perf_counter() - t0) * 1e6))
            ok += batch
        else:
            failed += batch
    print(json.dumps({"ok": ok, "failed": failed, "bytes": 0,
                      "seconds": time.perf_counter() - start,
                      "cpu_seconds": time.process_time() - cpu_start,
                      "latencies_us": latencies}), flush=True)
    return 0 if failed == 0 else 1

"""What bench/peers' Python clients (mooncake_client.py, lmcache_client.py,
lmcache_data_client.py) share with the driver: the start signal and the
timed loops of calls, whose result is peer_data_client's JSON line
(bench/peers/client_result.h)."""
import json
import random
import sys
import time

from key_mix import zipf_keys


def wait_for_go():
    """Says "ready" and waits for a line on stdin (the driver starts a run's
    clients together, once each is set up)."""
    print("ready", flush=True)
    sys.stdin.readline()


def print_result(ok, failed, nbytes, seconds, cpu_seconds, latencies):
    print(json.dumps({"ok": ok, "failed": failed, "bytes": nbytes, "seconds": seconds,
                      "cpu_seconds": cpu_seconds, "latencies_us": latencies}), flush=True)


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
    print_result(ok, failed, 0, time.perf_counter() - start, time.process_time() - cpu_start,
                 latencies)
    return 0 if failed == 0 else 1


def add_data_flags(p):
    """peer_data_client's flags for a run of data_calls, on parser `p`."""
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--objects", type=int, default=8, help="objects (keys) in the run's key space")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--seed", type=int, default=0, help="which key space (objects differ by seed)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--zipf", type=float, default=0, help="gets draw objects by Zipf(THETA)")
    p.add_argument("--sync", action="store_true", help="print ready, start on a stdin line")


def data_calls(args, call):
    """peer_data_client's loop over objects of args.size: `call(indices)`
    (True: every one of them moved whole) with args.batch object indices per
    call. load stores objects --first.. once round the key space of
    --objects; put walks it round and round for --seconds; get draws
    uniformly (or by Zipf(--zipf)). Prints the JSON line; a failed call adds
    no bytes and no latency. Returns 0 when none failed."""
    if args.sync:
        wait_for_go()
    batch = args.batch
    rng = random.Random(args.first + 1)
    draw = zipf_keys(args.objects, args.zipf, rng) if args.zipf else \
        (lambda: rng.randrange(args.objects))
    ok = failed = 0
    latencies = []
    nxt = args.first
    cpu_start = time.process_time()
    start = time.perf_counter()
    end = start + args.seconds
    while (nxt < args.first + args.objects) if args.op == "load" else \
            (time.perf_counter() < end or ok + failed == 0):
        if args.op == "get":
            idx = [draw() for _ in range(batch)]
        else:
            idx = [(nxt + j) % args.objects for j in range(batch)]
            nxt += batch
        t0 = time.perf_counter()
        if call(idx):
            latencies.append(int((time.perf_counter() - t0) * 1e6))
            ok += batch
        else:
            failed += batch
    print_result(ok, failed, ok * args.size, time.perf_counter() - start,
                 time.process_time() - cpu_start, latencies)
    return 0 if failed == 0 else 1

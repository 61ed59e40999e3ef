"""One client process of bench/peers for Mooncake Store: the twin of
peer_data_client (same flags, same JSON line), or, with --hold, the process
that lends the store its memory segment (a separate process, so a client's
get crosses the transport as a pikv get does, instead of a local copy).

  mooncake_client.py --master H:P --op load|put|get --size B --objects K
      [--first I] [--batch B] [--seconds S] [--seed N] [--into] [--zipf THETA] [--sync]
      [--dummy H:P]
  mooncake_client.py --master H:P --hold SEGMENT_BYTES [--host ADDRESS]
      [--ssd-dir DIR --http-port P]
  mooncake_client.py --master H:P --op clear
  mooncake_client.py --master H:P --op fill-keys|exist|replicas --objects N
      [--batch 32] [--seconds S] [--sync]

  mooncake_client.py --master etcd://H:P --op probe --objects N [--seconds S]

fill-keys stores N objects of 64 bytes (a registry of N keys, for the
lookup workload: peer_lookup_client's twin); exist asks batch_is_exist of
--batch random ones of them per call, replicas batch_get_replica_desc (where
each is, as pikv's locate answers). probe (the failover workload) asks
batch_is_exist of --batch random ones for --seconds and prints the calls
(CLOCK_MONOTONIC start and end) whose outcome changed or that took over
100 ms (0: an error, 1: answered but not every key exists, 2: every key
exists), and how many of the N exist before and at the end, as
peer_lookup_client --op probe does.

--zipf: gets draw objects by Zipf(THETA) (key_mix.py), as peer_data_client
--zipf does. --ssd-dir: the holder offloads what its segment evicts to DIR
(Mooncake's SSD tier; its master needs --enable_offload) and serves its
counters (mooncake_ssd_read_ops_total) on http://HOST:P/metrics. A load
retries a put the master refuses for want of space (-200) for up to 60 s:
with the SSD tier, space is freed only once an evicted object is written out.

--dummy: Mooncake's same-host path. The client is a "dummy" one
(setup_dummy) served by a real client on this host (the wheel's
mooncake_client binary, which holds the segment) over shared memory: its
region comes from alloc_from_mem_pool and is registered with the real
client, which copies objects between it and the segment.

--into reads with get_into / batch_get_into into a buffer registered with
the transfer engine (Mooncake's zero-copy read); without it, get/get_batch
return bytes. Puts use put_from / batch_put_from from a registered buffer.
"""
import argparse
import ctypes
import itertools
import json
import random
import signal
import sys
import time

from mooncake.store import MooncakeDistributedStore
from timed_calls import add_data_flags, data_calls, timed_calls, wait_for_go


HOST = "127.0.0.1"  # this process's address, which its peers dial (--host)


def setup(master, segment, local_buffer, **options):
    store = MooncakeDistributedStore()
    rc = store.setup(HOST, "P2PHANDSHAKE", segment, local_buffer, "tcp", "", master, **options)
    if rc != 0:
        sys.exit(f"mooncake_client: setup against {master} returned {rc}")
    return store


def hold(args):
    ssd = dict(enable_ssd_offload=True, ssd_offload_path=args.ssd_dir,
               enable_client_http_server=True,
               client_http_port=args.http_port) if args.ssd_dir else {}
    store = setup(args.master, args.hold, 0, **ssd)
    print("holding", flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    store.close()


LOOKUP_OBJECT = 64  # bytes of each object of the lookup registry


def lookup_key(i):
    """A 128-bit content hash's hex, as the peers' keys are (LMCache's too)."""
    return format((i * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % (1 << 128), "032x")


def fill_keys(args):
    store = setup(args.master, 0, 64 << 20)
    batch = 1024
    region = ctypes.create_string_buffer(batch * LOOKUP_OBJECT)
    base = ctypes.addressof(region)
    if store.register_buffer(base, len(region)) != 0:
        sys.exit("mooncake_client: register_buffer failed")
    start = time.perf_counter()
    for first in range(0, args.objects, batch):
        names = [lookup_key(i) for i in range(first, min(args.objects, first + batch))]
        rcs = store.batch_put_from(names, [base + j * LOOKUP_OBJECT for j in range(len(names))],
                                   [LOOKUP_OBJECT] * len(names))
        if any(rc != 0 for rc in rcs):
            sys.exit(f"mooncake_client: filling keys {first}..: {rcs[:4]}")
    print(json.dumps({"ok": args.objects, "failed": 0, "bytes": 0,
                      "seconds": time.perf_counter() - start, "cpu_seconds": 0,
                      "latencies_us": []}), flush=True)
    store.close()
    return 0


def query_keys(args):
    store = setup(args.master, 0, 16 << 20)
    rng = random.Random()
    # The keys of calls made before the clock starts (Python's string work
    # would otherwise be timed; pikv's client makes 32 keys in nanoseconds).
    batches = [[lookup_key(rng.randrange(args.objects)) for _ in range(args.batch)]
               for _ in range(32768)]
    calls = itertools.cycle(batches)

    def call():
        names = next(calls)
        if args.op == "exist":
            return all(x == 1 for x in store.batch_is_exist(names))
        return all(len(store.batch_get_replica_desc(names).get(n, [])) > 0 for n in names)
    call()  # the connection made, untimed
    rc = timed_calls(call, args.batch, args.seconds, args.sync)
    store.close()
    return rc


def probe(args):
    store = setup(args.master, 0, 16 << 20)
    rng = random.Random()

    def outcome():
        got = store.batch_is_exist([lookup_key(rng.randrange(args.objects))
                                    for _ in range(args.batch)])
        return 0 if any(x < 0 for x in got) else 2 if all(x == 1 for x in got) else 1
    def found_all():
        found = 0
        for first in range(0, args.objects, 1024):
            got = store.batch_is_exist([lookup_key(i) for i in
                                        range(first, min(args.objects, first + 1024))])
            found += sum(1 for x in got if x == 1)
        return found
    found_before = found_all()
    if args.sync:
        wait_for_go()
    events, last = [], None
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        t0 = time.monotonic()
        now = outcome()
        t1 = time.monotonic()
        if now != last or t1 - t0 > 0.1:  # a slow call may have spanned the failover
            events.append([t0, t1, now])
            last = now
    print(json.dumps({"events": events, "found_before": found_before, "found_after": found_all(),
                      "keys": args.objects}), flush=True)
    store.close()
    return 0


NO_SPACE = -200  # Mooncake's NO_AVAILABLE_HANDLE


def put(store, names, addresses, size, patient):
    """batch_put_from; `patient`: what the master refuses for want of space
    is tried again for up to 60 s."""
    deadline = time.monotonic() + 60
    while True:
        rcs = store.batch_put_from(names, addresses, [size] * len(names))
        if not patient or time.monotonic() > deadline or \
                any(rc not in (0, NO_SPACE) for rc in rcs) or all(rc == 0 for rc in rcs):
            return all(rc == 0 for rc in rcs)
        left = [i for i, rc in enumerate(rcs) if rc == NO_SPACE]
        names, addresses = [names[i] for i in left], [addresses[i] for i in left]
        time.sleep(0.05)


def run(args):
    size, batch = args.size, args.batch
    # One registered region: every object of the key space (object i is
    # `size` bytes starting with i), then `batch` receive slots.
    length = (args.objects + batch) * size
    if args.dummy:
        # Shared memory with the real client, which maps it once registered
        # (same base, same size); get() would read through the local
        # buffer, which --dummy leaves small: use --into.
        store = MooncakeDistributedStore()
        if store.setup_dummy(length, 16 << 20, args.dummy) != 0:
            sys.exit(f"mooncake_client: setup_dummy against {args.dummy} failed")
        base = store.alloc_from_mem_pool(length)
    else:
        region = ctypes.create_string_buffer(length)
        base = ctypes.addressof(region)
        # put() copies through the client's local buffer; it must hold a call.
        store = setup(args.master, 0, max(64 << 20, 2 * batch * size))
    if not base or store.register_buffer(base, length) != 0:
        sys.exit("mooncake_client: register_buffer failed")
    for i in range(args.objects):
        ctypes.memmove(base + i * size, i.to_bytes(8, "little"), 8)
    keys = [f"obj-{args.seed}-{size}-{i}" for i in range(args.objects)]
    slots = [base + (args.objects + j) * size for j in range(batch)]

    if args.op == "get":  # one untimed, as peer_data_client does
        if args.into:
            store.batch_get_into(keys[:1] * batch, slots, [size] * batch)
        else:
            store.get_batch(keys[:1] * batch)

    def call(idx):
        names = [keys[i] for i in idx]
        if args.op != "get":
            return put(store, names, [base + i * size for i in idx], size, args.op == "load")
        if args.into:
            return all(n == size for n in store.batch_get_into(names, slots, [size] * batch))
        if batch == 1:
            return len(store.get(names[0])) == size
        return all(len(v) == size for v in store.get_batch(names))
    rc = data_calls(args, call)
    store.close()
    return rc


def main():
    global HOST
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", required=True)
    p.add_argument("--host", default=HOST, help="this process's address (its segment's)")
    p.add_argument("--hold", type=int, help="lend a segment of this many bytes and wait")
    p.add_argument("--op", choices=["load", "put", "get", "clear", "fill-keys", "exist",
                                    "replicas", "probe"])
    add_data_flags(p)
    p.add_argument("--into", action="store_true")
    p.add_argument("--dummy", help="HOST:PORT of a real client (the mooncake_client binary) on "
                   "this host: its same-host path, over shared memory, instead of --master")
    p.add_argument("--ssd-dir", help="--hold: offload evicted objects to this directory")
    p.add_argument("--http-port", type=int, default=0, help="--hold --ssd-dir: its metrics")
    args = p.parse_args()
    HOST = args.host
    if args.hold:
        hold(args)
        return 0
    if args.op == "clear":  # every object gone (Mooncake evicts in the background)
        store = setup(args.master, 0, 16 << 20)
        store.remove_all()
        store.close()
        return 0
    if args.op == "fill-keys":
        return fill_keys(args)
    if args.op in ("exist", "replicas"):
        return query_keys(args)
    if args.op == "probe":
        return probe(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

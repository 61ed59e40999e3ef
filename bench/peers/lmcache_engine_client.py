"""LMCache's side of bench/peers' tiers workload: its cache engine (0.5.x)
in this process, as an inference engine links it, with its CPU tier and its
local-disk tier; LMCache has no server for these tiers.

The engine is LMCache's own (LMCacheEngineBuilder: token hashing, the
StorageManager, LocalCPUBackend and LocalDiskBackend, promote-on-hit); the
one stand-in is the connector, which copies between a chunk's memory
object and a CPU tensor shaped as the engine's KV (LMCache's
MockGPUConnector moves no bytes). Object i is a distinct 256-token chunk
whose KV is --size bytes (fp16; 4 heads of 64 per layer, as many layers as
the size makes).

Stores the --objects objects (every disk write waited for), then reads by
the same Zipf mix as peer_data_client --zipf (key_mix.py) for --warm
seconds, checking each object's bytes; then prints "ready" and, for each
line on stdin, runs one timed round of --seconds and prints
peer_data_client's JSON line plus "served": {"memory", "disk", "miss"},
gets by the tier that answered them.
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

os.environ.setdefault("LMCACHE_LOG_LEVEL", "ERROR")  # INFO logs every call
os.environ.setdefault("LMCACHE_TRACK_USAGE", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

import torch  # noqa: E402
from lmcache.utils import mock_up_broadcast_fn, mock_up_broadcast_object_fn  # noqa: E402
from lmcache.v1.cache_engine import LMCacheEngineBuilder  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402

from key_mix import zipf_keys  # noqa: E402

# The copy into the engine's KV on one thread, as every reader of this
# workload copies (torch would split a large copy_ over every core).
torch.set_num_threads(1)

TOKENS, HEADS, HEAD_DIM = 256, 4, 64
MEMORY, DISK = "LocalCPUBackend", "LocalDiskBackend"


class CpuCopyConnector(GPUConnectorInterface):
    """The engine's KV is the CPU tensor passed as `kv`, [2, layers, tokens,
    heads * head_dim], the layout of LMCache's memory objects."""

    def __init__(self, layers):
        self.layers = layers

    def from_gpu(self, memory_obj, start, end, **kw):
        memory_obj.tensor.copy_(kw["kv"][:, :, start:end, :])

    def to_gpu(self, memory_obj, start, end, **kw):
        kw["kv"][:, :, start:end, :].copy_(memory_obj.tensor)

    def batched_from_gpu(self, memory_objs, starts, ends, **kw):
        for m, s, e in zip(memory_objs, starts, ends):
            self.from_gpu(m, s, e, **kw)

    def batched_to_gpu(self, memory_objs, starts, ends, **kw):
        for m, s, e in zip(memory_objs, starts, ends):
            self.to_gpu(m, s, e, **kw)

    def get_shape(self, num_tokens):
        return torch.Size([2, self.layers, num_tokens, HEADS * HEAD_DIM])


def make_engine(args, layers):
    config = LMCacheEngineConfig.from_defaults(
        chunk_size=TOKENS, local_cpu=True, max_local_cpu_size=args.memory / (1 << 30),
        local_disk=f"file://{args.disk_dir}", max_local_disk_size=args.disk / (1 << 30),
        lmcache_instance_id="peers-tiers",
        # A store waits for CPU memory rather than skip the chunk (by
        # default it skips when every buffer waits for its disk write).
        extra_config={"force_store_wait": True})
    metadata = LMCacheMetadata(
        model_name="peers", world_size=1, local_world_size=1, worker_id=0, local_worker_id=0,
        kv_dtype=torch.float16, kv_shape=(layers, 2, TOKENS, HEADS, HEAD_DIM), role="worker")
    engine = LMCacheEngineBuilder.get_or_create(
        "peers-tiers", config, metadata, CpuCopyConnector(layers), mock_up_broadcast_fn,
        mock_up_broadcast_object_fn)
    engine.post_init()
    return engine


def track_tiers(engine):
    """{key: the backend that answered its last get}: retrieve asks the
    storage manager tier by tier (batched_get with a location)."""
    served, storage = {}, engine.storage_manager
    batched_get = storage.batched_get

    def tracked(keys, location=None):
        objects = batched_get(keys, location=location)
        for k, o in zip(keys, objects):
            if o is not None:
                served[k] = location
        return objects
    storage.batched_get = tracked
    return served


def fill(engine, tokens, payload):
    """Stores every object and waits until each is on disk (the disk tier
    writes asynchronously; a chunk waiting for its write cannot be evicted,
    so the backlog is kept short)."""
    disk = engine.storage_manager.storage_backends[DISK]
    keys = []
    for t, kv in zip(tokens, payload):
        while len(disk.disk_worker.put_tasks) > 64:
            time.sleep(0.0005)
        engine.store(t, kv=kv)
        keys += [k for _, _, k in engine.token_database.process_tokens(tokens=t)]
    deadline = time.time() + 300
    while not all(disk.contains(k) for k in keys):
        if time.time() > deadline:
            raise RuntimeError("LMCache's disk tier did not hold every object in 300 s")
        time.sleep(0.01)
    return keys


def run(engine, tokens, payload, keys, served, draw, seconds, check):
    """Gets by `draw` for `seconds`: peer_data_client's result, plus where
    the gets were served."""
    out = torch.empty_like(payload[0])
    counts = dict.fromkeys(("memory", "disk", "miss"), 0)
    ok = failed = moved = 0
    latencies = []
    cpu_start, start = time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds or ok + failed == 0:
        i = draw()
        served.pop(keys[i], None)
        t0 = time.perf_counter()
        mask = engine.retrieve(tokens[i], kv=out)
        elapsed = time.perf_counter() - t0
        whole = int(mask.sum()) == TOKENS
        if not whole or (check and not torch.equal(out.view(torch.int16),
                                                   payload[i].view(torch.int16))):
            failed += 1
            counts["miss" if not whole else "memory"] += 1
            continue
        counts["disk" if served.get(keys[i]) == DISK else "memory"] += 1
        latencies.append(int(elapsed * 1e6))
        ok += 1
        moved += out.numel() * out.element_size()
    return {"ok": ok, "failed": failed, "bytes": moved, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu_start, "latencies_us": latencies,
            "served": counts}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memory", type=int, required=True, help="CPU tier bytes")
    p.add_argument("--disk", type=int, required=True, help="disk tier bytes")
    p.add_argument("--disk-dir", required=True)
    p.add_argument("--size", type=int, default=1 << 20, help="bytes per object")
    p.add_argument("--objects", type=int, required=True)
    p.add_argument("--zipf", type=float, default=0.9)
    p.add_argument("--warm", type=float, default=5, help="untimed seconds of the mix")
    p.add_argument("--seconds", type=float, default=5, help="each timed round")
    args = p.parse_args()
    per_layer = 2 * TOKENS * HEADS * HEAD_DIM * 2
    if args.size % per_layer:
        p.error(f"--size must be a multiple of {per_layer}")
    shutil.rmtree(args.disk_dir, ignore_errors=True)
    os.makedirs(args.disk_dir)
    engine = make_engine(args, args.size // per_layer)
    served = track_tiers(engine)
    gen = torch.Generator().manual_seed(1)
    tokens = [torch.arange(i * TOKENS, (i + 1) * TOKENS) for i in range(args.objects)]
    shape = (2, args.size // per_layer, TOKENS, HEADS * HEAD_DIM)
    payload = [torch.randint(-32768, 32767, shape,
                             dtype=torch.int16, generator=gen).view(torch.float16)
               for _ in range(args.objects)]
    keys = fill(engine, tokens, payload)
    draw = zipf_keys(args.objects, args.zipf, random.Random(1))
    warm = run(engine, tokens, payload, keys, served, draw, args.warm, check=True)
    if warm["failed"]:
        raise RuntimeError(f"{warm['failed']} gets of the warm-up did not return the object")
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps(run(engine, tokens, payload, keys, served, draw, args.seconds,
                             check=False)), flush=True)
    LMCacheEngineBuilder.destroy("peers-tiers")


if __name__ == "__main__":
    try:
        main()
        code = 0
    except Exception as e:
        print(f"lmcache_engine_client: {e!r}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    os._exit(code)  # LMCache's threads would keep a failed process alive

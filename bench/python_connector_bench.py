#!/usr/bin/env python3
"""python_connector_bench: time per loaded token through pikv.vllm's
PikvConnector (worker start_load_kv: plan + fetch + remap through the Python
binding into torch tensors) against the C++ client's plan + fetch + remap
(bench/client_load_bench) on the same chunks of the same running node, in
alternating rounds. Goal: the Python layer adds at most 10%.

  /usr/bin/python3 bench/python_connector_bench.py [--chunks 4 --tokens 1024
      --rounds 5 --iterations 10 --config tests/device/model_configs/llama-3.2-1b.json]

Needs the build (build/bin, build/python). vLLM is not installed here: the
connector is driven through the test suite's stand-in of vLLM's connector
interface (tests/python/vllm_standin). Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("PIKV_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path[:0] = [os.path.join(BUILD, "python"), os.path.join(ROOT, "tests", "python", "vllm_standin")]

import torch  # noqa: E402

import pikv  # noqa: E402
from pikv.local_cluster import LocalCluster  # noqa: E402
from pikv.vllm import PikvConnector, PikvConnectorMetadata, _Load  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402


def segments(chunks, tokens):
    out = [[1000 + c * tokens + t for t in range(tokens)] for c in range(chunks)]
    return out + [[7, 8, 9]]


def cxx_round(ends, args, store):
    cmd = [os.path.join(BUILD, "bin", "client_load_bench"), "--local-node", ends["node"],
           "--controller", ends["controller"], "--model-config", args.config,
           "--chunks", str(args.chunks), "--tokens", str(args.tokens),
           "--iterations", str(args.iterations)] + (["--store"] if store else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["cxx_ns_per_token"]


def python_connector(ends, args):
    info = pikv.model_info(args.config)
    block = 16
    total = args.chunks * args.tokens + 3
    blocks = -(-total // block)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[info["dtype"]]
    caches = {f"layer.{i}": torch.zeros(2, blocks, block, info["kv_heads"], info["head_dim"],
                                        dtype=dtype) for i in range(info["layers"])}
    config = SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector_extra_config={
            "local-node": ends["node"], "controller": ends["controller"], "model-id": "bench",
            "model-config": args.config}),
        cache_config=SimpleNamespace(block_size=block, enable_prefix_caching=False,
                                     cache_dtype="auto"),
        model_config=SimpleNamespace(model="bench", max_model_len=131072, dtype=dtype))
    worker = PikvConnector(config, KVConnectorRole.WORKER)
    worker.register_kv_caches(caches)
    segs = segments(args.chunks, args.tokens)
    prompt = sum(segs, [])
    load = _Load("r", prompt, [len(s) for s in segs], list(range(blocks)),
                 args.chunks * args.tokens)
    return worker, PikvConnectorMetadata(loads=[load]), load.num_tokens


def python_round(worker, meta, loaded, iterations):
    per_token = []
    for _ in range(iterations):
        worker.bind_connector_metadata(meta)
        t0 = time.perf_counter_ns()
        worker.start_load_kv(SimpleNamespace())
        took = time.perf_counter_ns() - t0
        worker.clear_connector_metadata()
        if worker.get_block_ids_with_load_errors() or worker.core.stats.errors:
            raise RuntimeError("a load failed: it would not count as throughput")
        per_token.append(took / loaded)
    return statistics.median(per_token)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default=os.path.join(ROOT, "tests", "device", "model_configs",
                                                    "llama-3.2-1b.json"))
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=10)
    args = p.parse_args()
    cluster = LocalCluster(os.path.join(BUILD, "bin", "pikv"), nodes=1, redis="off")
    ends = {"controller": cluster.controller, "node": cluster.nodes[0]["ipc"]}
    try:
        cxx_round(ends, args, store=True)  # stores the chunks, warms the node
        worker, meta, loaded = python_connector(ends, args)
        python_round(worker, meta, loaded, 2)  # warm-up
        cxx, py = [], []
        for _ in range(args.rounds):
            cxx.append(cxx_round(ends, args, store=False))
            py.append(python_round(worker, meta, loaded, args.iterations))
    finally:
        cluster.stop()
    info = pikv.model_info(args.config)
    cxx_ns, py_ns = statistics.median(cxx), statistics.median(py)
    rows = [("C++ client: plan+fetch+remap", cxx_ns), ("PikvConnector.start_load_kv", py_ns)]
    print(f"{args.chunks} chunks x {args.tokens} tokens, {info['kv_bytes_per_token']} KV "
          f"bytes/token ({os.path.basename(args.config)}), {args.rounds} alternating rounds "
          f"of {args.iterations} loads; median of round medians")
    print(f"{'path':<32} {'ns/token':>10} {'GB/s':>8}")
    for name, ns in rows:
        print(f"{name:<32} {ns:>10.1f} {info['kv_bytes_per_token'] / ns:>8.2f}")
    ratio = py_ns / cxx_ns
    print(f"python/cxx: {ratio:.3f} (goal <= 1.10)")
    print(json.dumps({"cxx_ns_per_token": round(cxx_ns, 1), "python_ns_per_token": round(py_ns, 1),
                      "python_vs_cxx": round(ratio, 4), "chunks": args.chunks,
                      "tokens_per_chunk": args.tokens,
                      "kv_bytes_per_token": info["kv_bytes_per_token"]}))


if __name__ == "__main__":
    main()
